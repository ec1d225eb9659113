/* prefetch.h — asking the memory for bytes before a kernel reads them. A hint only: it reads and
 * changes no value, so no result depends on it. Header-only, includes only libc.
 *
 * prefetch_l1(p, bytes) asks for every 64-byte line of [p, p + bytes) to be brought into L1
 * (locality 3: x86 `prefetcht0`). Decode streams each weight and each cached K/V row from memory
 * once per token, so the kernels ask for the rows they will read next while they compute on the
 * current ones (kernels/ops.c: the weight rows MM_AHEAD ahead; kernels/attn.c: the next key block).
 * Which level pays depends on the CPU (kernels/NOTES.md rows 31 and 45): on the Zen-4-class VM of
 * row 31 L2 prefetches (`prefetcht1`) read a streamed Q4_1 matrix 1.6x faster than none and L1
 * ones no faster than none; on the Zen 5 of row 45 a streamed Q8_0 matrix read at 16 GB/s with
 * L2 prefetches (8 without any) and at 30 GB/s with L1 ones (a plain read: 39 GB/s), and the
 * worker decoded 10-53 % faster. L1 is kept as the one hint: the later, measured machine, and the
 * one whose figures the roofline quotes (neither VM has counters to say why they differ).
 *
 * Always inlined, on purpose: GCC 12 finds an out-of-line function whose body is nothing but
 * prefetches "looping pure" (no side effects) and deletes every call to it, so a static helper of
 * this kind compiles to nothing (kernels/ops.c's weight prefetch did, unnoticed, from the session
 * that added it to the seventeenth). tests/isa.test.sh checks that the instructions are in
 * ops.o and attn.o. */
#ifndef STRATA_PREFETCH_H
#define STRATA_PREFETCH_H

#include <stddef.h>

static inline __attribute__((always_inline)) void prefetch_l1(const void *p, size_t bytes) {
    const char *c = p;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 3);
}

/* Asks for the lines of [p + *at, p + end) into L1 and moves *at past them: a range asked for a
 * piece at a time, spread through the loop that needs it next (kernels/quant_internal.h's fused
 * kernels ask for the next rows' lines a block at a time, where one burst per call waited on the
 * core's fill buffers: kernels/NOTES.md row 50). p may be NULL when end is 0. */
static inline __attribute__((always_inline)) void prefetch_l1_upto(const void *p, size_t *at, size_t end) {
    const char *c = p;
    for (; *at < end; *at += 64) __builtin_prefetch(c + *at, 0, 3);
}

#endif
