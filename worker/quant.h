/* quant.h — GGUF weight types: block sizes and dequantisation of one row to f32.
 *
 * Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (type
 * numbers are the GGUF_T_* enum of worker/gguf.h). The block layouts are written out beside each
 * dequantiser in quant.c.
 *
 * Exactness: every dequantised value is either d*q (one f32 product that is exact, because the
 * factors' significands are short) or d*q - m / d*q + m (an exact product followed by one rounded
 * add). So the result does not depend on evaluation order or FMA use, and the AVX2 fast path
 * (compiled when the build has __AVX2__ and __F16C__) gives bit-identical output to the plain C
 * reference for every input whose fp16 fields are not NaN.
 *
 * No function here allocates, keeps state, or fails loudly: sizes return 0 for what is not
 * supported, and the caller checks quant_row_bytes() before dequantising.
 */
#ifndef STRATA_QUANT_H
#define STRATA_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Values per block (1 for F32/F16/BF16, 32 for Q4_0..Q8_0, 256 for the K-quants); 0 if unsupported. */
int quant_block_values(uint32_t type);

/* Bytes per block; 0 if unsupported. */
size_t quant_block_bytes(uint32_t type);

/* Name of a GGUF tensor type: "Q4_K", "F16", ... for the supported types and for the other
 * types ggml defines (e.g. "Q8_K", "IQ2_XS", "I32"), so an error can name what it refuses; the
 * static string "unknown" for a number no type has. Never NULL, never allocates. */
const char *quant_type_name(uint32_t type);

/* Same, but an unknown number is written as "type 17" into buf[buflen] (truncated to fit) and buf
 * is returned; known names are the static strings above. */
const char *quant_type_name_buf(uint32_t type, char *buf, size_t buflen);

/* 1 if quant_dequant_row can handle type, else 0. */
int quant_supported(uint32_t type);

/* Bytes of a row of n values: n / block_values * block_bytes. 0 if the type is unsupported, n is
 * 0, n is not a multiple of the block size, or the result does not fit in size_t. */
size_t quant_row_bytes(uint32_t type, uint64_t n);

/* Dequantises one row of n values from src (quant_row_bytes(type, n) bytes, any alignment) into
 * y[n] (f32). Uses the AVX2/F16C path when compiled in and one exists for the type, else the
 * reference. If the type is unsupported or n is not a positive multiple of the block size, writes
 * NaN into y[0..n) (nothing when n <= 0) and returns: a misuse shows up in the output, never as a
 * read past src. */
void quant_dequant_row(uint32_t type, const void *src, float *y, int64_t n);

/* The plain C reference for the same (no intrinsics). Same contract as quant_dequant_row. */
void quant_dequant_row_ref(uint32_t type, const void *src, float *y, int64_t n);

/* out[r] = the canonical dot product (kernels/ops.h) of x[n] and row r dequantised, for the nr
 * rows (1..8) at src, src + row_bytes, ...: bit-identical to quant_dequant_row followed by
 * ops_dot, without storing the dequantised values (for decode, where each row meets one token).
 * Returns 0, or -1 with nothing written when this build has no fused kernel for type (AVX-512
 * builds have Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K) or nr / n is out of range: the caller then
 * dequantises. Allocates nothing. */
int quant_dot_rows(uint32_t type, const void *src, size_t row_bytes, int nr, const float *x, int64_t n, float *out);

/* 1 if quant_dequant_row uses a vectorised path for type in this build, else 0 (informational). */
int quant_has_fast_path(uint32_t type);

#endif
