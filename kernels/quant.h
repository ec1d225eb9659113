/* quant.h — GGUF weight types: block sizes and dequantisation of one row to f32.
 *
 * Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (type
 * numbers are the GGUF_T_* enum below), and IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_XXS,
 * IQ2_XS, IQ2_S, IQ1_S, IQ1_M, MXFP4, TQ1_0, TQ2_0 (QUANT_T_* below). The block layouts are written
 * out beside each dequantiser in quant.c; the IQ codebooks are in quant_tables.h (generated).
 *
 * Exactness: every dequantised value is either a product of a few short factors (an fp16 or
 * power-of-two scale, a small integer sub-scale, a code or codebook value, a sign; the significant
 * bits add up to at most 24, so every partial product is exact in f32; MXFP4's largest exponents
 * can overflow to inf, one rounding that is the same on every path) or such a product followed by
 * one rounded add (d*q - m / d*q + m). So the result does not depend on evaluation order or FMA
 * use, and the vectorised path (the vec16 layer, on every ISA) gives
 * bit-identical output to the plain C reference for every input whose fp16 fields are not NaN.
 *
 * No function here allocates, keeps state, or fails loudly: sizes return 0 for what is not
 * supported, and the caller checks quant_row_bytes() before dequantising.
 */
#ifndef STRATA_QUANT_H
#define STRATA_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Tensor types as GGUF files number them (ggml's enum ggml_type, the same numbers as the gguf
 * package's GGMLQuantizationType): the weight types this file knows, plus the few a reader must
 * name to refuse. The weight-type enum of the kernels; worker/gguf.h reads these numbers. */
enum {
    GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_Q4_0 = 2, GGUF_T_Q4_1 = 3, GGUF_T_Q5_0 = 6,
    GGUF_T_Q5_1 = 7, GGUF_T_Q8_0 = 8, GGUF_T_Q8_1 = 9, GGUF_T_Q2_K = 10, GGUF_T_Q3_K = 11,
    GGUF_T_Q4_K = 12, GGUF_T_Q5_K = 13, GGUF_T_Q6_K = 14, GGUF_T_Q8_K = 15, GGUF_T_I8 = 24,
    GGUF_T_I16 = 25, GGUF_T_I32 = 26, GGUF_T_I64 = 27, GGUF_T_F64 = 28, GGUF_T_BF16 = 30,
    GGUF_T_COUNT = 40,
};

/* The numbers of the other supported types (ggml's names, QUANT_T_ here). */
enum {
    QUANT_T_IQ2_XXS = 16, QUANT_T_IQ2_XS = 17, QUANT_T_IQ3_XXS = 18, QUANT_T_IQ1_S = 19,
    QUANT_T_IQ4_NL = 20, QUANT_T_IQ3_S = 21, QUANT_T_IQ2_S = 22, QUANT_T_IQ4_XS = 23,
    QUANT_T_IQ1_M = 29, QUANT_T_TQ1_0 = 34, QUANT_T_TQ2_0 = 35, QUANT_T_MXFP4 = 39,
};

/* Values per block (1 for F32/F16/BF16, 32 for Q4_0..Q8_0, IQ4_NL and MXFP4, 256 for the K-quants,
 * the other IQ types and TQ1_0/TQ2_0); 0 if unsupported. */
int quant_block_values(uint32_t type);

/* Bytes per block; 0 if unsupported. */
size_t quant_block_bytes(uint32_t type);

/* Name of a GGUF tensor type: "Q4_K", "F16", ... for the supported types and for the other
 * types ggml defines (e.g. "Q8_K", "NVFP4", "I32"), so an error can name what it refuses; the
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
 * y[n] (f32). Uses the vectorised path (the vec16 layer: AVX-512, AVX2, NEON or plain C) when
 * one exists for the type, else the reference. If the type is unsupported or n is not a positive multiple of the block size, writes
 * NaN into y[0..n) (nothing when n <= 0) and returns: a misuse shows up in the output, never as a
 * read past src. */
void quant_dequant_row(uint32_t type, const void *src, float *y, int64_t n);

/* The plain C reference for the same (no intrinsics). Same contract as quant_dequant_row. */
void quant_dequant_row_ref(uint32_t type, const void *src, float *y, int64_t n);

/* out[r] = the canonical dot product (kernels/ops.h) of x[n] and row r dequantised, for the nr
 * rows (1..8) at src, src + row_bytes, ...: bit-identical to quant_dequant_row followed by
 * ops_dot, without storing the dequantised values (for decode, where each row meets one token).
 * Returns 0, or -1 with nothing written when there is no fused kernel for type (every block type
 * but Q2_K Q3_K Q5_K has one, on every ISA: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K and the twelve IQ /
 * MXFP4 / TQ types) or nr / n is out of range: the caller then dequantises.
 * ahead: NULL, or the nr rows (the same row_bytes apart) the caller multiplies next: their lines are
 * asked of the memory (prefetched into L1) spread through this call's blocks, never read, so no
 * value depends on them. Allocates nothing. */
int quant_dot_rows(uint32_t type, const void *src, size_t row_bytes, int nr, const float *x, int64_t n,
                   const void *ahead, float *out);

/* 1 if quant_dequant_row uses a vectorised path for type in this build, else 0 (informational). */
int quant_has_fast_path(uint32_t type);

#endif
