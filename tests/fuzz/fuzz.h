/* fuzz.h — the libFuzzer entry point every target in tests/fuzz defines.
 *
 * Each target is built two ways:
 *   make fuzz      clang -fsanitize=fuzzer,address,undefined: libFuzzer's main explores inputs from
 *                  the committed seed corpus (tests/fuzz/corpus/<target>/) for FUZZ_SECONDS;
 *   make test      the same file with tests/fuzz/replay.c's main (gcc; under SAN=1 with ASan+UBSan):
 *                  every file of the seed corpus is run once, a crash or an abort fails the test.
 * A target aborts (a finding) when a property it checks does not hold; bad input that is refused
 * with an error is the expected outcome, not a finding. */
#ifndef STRATA_FUZZ_H
#define STRATA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
