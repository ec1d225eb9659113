/* prefetch.h — asking the memory for bytes before a kernel reads them. A hint only: it reads and
 * changes no value, so no result depends on it. Header-only, includes only libc.
 *
 * prefetch_l2(p, bytes) asks for every 64-byte line of [p, p + bytes) to be brought into L2
 * (locality 2: x86 `prefetcht1`). Decode streams each weight and each cached K/V row from memory
 * once per token, so the kernels ask for the rows they will read next while they compute on the
 * current ones (kernels/ops.c: the weight rows MM_AHEAD ahead; kernels/attn.c: the next key block).
 * L2, not L1: on the Zen-4-class VM of kernels/NOTES.md row 31 L1 prefetches (`prefetcht0`) gained
 * nothing over none in a streaming decode bench, L2 ones 1.5-1.6x (why L1 does not help was not
 * measured: that VM has no hardware counters).
 *
 * Always inlined, on purpose: GCC 12 finds an out-of-line function whose body is nothing but
 * prefetches "looping pure" (no side effects) and deletes every call to it, so a static helper of
 * this kind compiles to nothing (kernels/ops.c's weight prefetch did, unnoticed, from the session
 * that added it to the seventeenth). tests/isa.test.sh checks that the instructions are in
 * ops.o and attn.o. */
#ifndef STRATA_PREFETCH_H
#define STRATA_PREFETCH_H

#include <stddef.h>

static inline __attribute__((always_inline)) void prefetch_l2(const void *p, size_t bytes) {
    const char *c = p;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 2);
}

#endif
