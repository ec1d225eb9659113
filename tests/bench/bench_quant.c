/* bench_quant.c — weight types: values/s of dequantisation (the vector path where the build has one,
 * and the plain C reference) and of a decode matrix-vector product (quant_dot_rows' fused kernel,
 * 8 rows at a time, against dequantising each row and ops_dot), one thread, every supported block
 * type. The matrix is 512 rows x 2048 values of random blocks with realistic scales (about 0.5 MB
 * at 4 bits: it stays in L2, so this measures the kernels, not memory). Nothing is checked here:
 * tests/test_quant.c checks that all these paths give the same bits.
 * usage: bench_quant [seconds per figure, default 0.1]; "ratio" is fused dot / dequantise + dot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/clock.h"
#include "kernels/ops.h"
#include "worker/gguf.h"
#include "kernels/quant.h"

enum { ROWS = 512, COLS = 2048 };

static uint64_t rng(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Offset of the fp16 super-scale in a block (-1: none, or not at one place). */
static int scale_offset(uint32_t t) {
    switch (t) {
    case GGUF_T_Q2_K: return 80;
    case GGUF_T_Q3_K: return 108;
    case GGUF_T_Q6_K: return 208;
    case QUANT_T_TQ1_0: return 52;
    case QUANT_T_TQ2_0: return 64;
    case QUANT_T_IQ1_M: case QUANT_T_MXFP4: return -1;
    default: return 0;
    }
}

/* Random blocks whose scales are small normal numbers (no NaN, inf or subnormal arithmetic). */
static void fill(uint32_t t, uint8_t *dst, uint64_t *s) {
    size_t bytes = quant_row_bytes(t, (uint64_t)ROWS * COLS), bb = quant_block_bytes(t);
    for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rng(s);
    for (size_t b = 0; b < bytes; b += bb) {
        uint16_t h = fp16_from_f32((float)((double)(rng(s) % 1000 + 1) * 1e-5));
        int off = scale_offset(t);
        if (t == GGUF_T_F16 || t == GGUF_T_BF16) {
            float v = (float)((double)(int32_t)rng(s) * 1e-10);
            uint32_t u;
            memcpy(&u, &v, 4);
            h = t == GGUF_T_F16 ? fp16_from_f32(v) : (uint16_t)(u >> 16);
        }
        if (off >= 0) memcpy(dst + b + off, &h, 2);
        if (t == GGUF_T_Q4_1 || t == GGUF_T_Q5_1 || t == GGUF_T_Q4_K || t == GGUF_T_Q5_K) memcpy(dst + b + 2, &h, 2);
        if (t == GGUF_T_Q2_K) memcpy(dst + b + 82, &h, 2);
        if (t == QUANT_T_MXFP4) dst[b] = (uint8_t)(110 + rng(s) % 20);
        if (t == QUANT_T_IQ1_M)
            for (int w = 0; w < 4; w++) dst[b + 49 + 2 * w] = (uint8_t)((dst[b + 49 + 2 * w] & 0x0F) | (((h >> (4 * w)) & 0x0F) << 4));
    }
}

static volatile float sink;

/* values/s of fn over the whole matrix, repeated for at least `secs` */
typedef void (*pass_fn)(uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out);

static void pass_dequant(uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out) {
    (void)x; (void)out;
    for (int r = 0; r < ROWS; r++) quant_dequant_row(t, w + (size_t)r * rb, tmp, COLS);
    sink = tmp[COLS - 1];
}
static void pass_dequant_ref(uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out) {
    (void)x; (void)out;
    for (int r = 0; r < ROWS; r++) quant_dequant_row_ref(t, w + (size_t)r * rb, tmp, COLS);
    sink = tmp[COLS - 1];
}
static void pass_fused(uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out) {
    (void)tmp;
    for (int r = 0; r < ROWS; r += 8)   /* asking for the rows 16 on, as decode does (kernels/ops.c) */
        quant_dot_rows(t, w + (size_t)r * rb, rb, 8, x, COLS, r + 24 <= ROWS ? w + (size_t)(r + 16) * rb : NULL, out + r);
    sink = out[ROWS - 1];
}
static void pass_generic(uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out) {
    for (int r = 0; r < ROWS; r++) {
        quant_dequant_row(t, w + (size_t)r * rb, tmp, COLS);
        out[r] = ops_dot(tmp, x, COLS);
    }
    sink = out[ROWS - 1];
}

static double rate(pass_fn fn, uint32_t t, const uint8_t *w, size_t rb, const float *x, float *tmp, float *out, double secs) {
    fn(t, w, rb, x, tmp, out);   /* warm the caches */
    int64_t passes = 0;
    double t0 = clock_s(), t1;
    do {
        fn(t, w, rb, x, tmp, out);
        passes++;
        t1 = clock_s();
    } while (t1 - t0 < secs);
    return (double)passes * ROWS * COLS / (t1 - t0);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.1;
    static const uint32_t types[] = {
        GGUF_T_F16, GGUF_T_BF16, GGUF_T_Q8_0, GGUF_T_Q4_0, GGUF_T_Q4_1, GGUF_T_Q5_0, GGUF_T_Q5_1,
        GGUF_T_Q2_K, GGUF_T_Q3_K, GGUF_T_Q4_K, GGUF_T_Q5_K, GGUF_T_Q6_K,
        QUANT_T_IQ4_NL, QUANT_T_IQ4_XS, QUANT_T_MXFP4, QUANT_T_IQ3_S, QUANT_T_IQ3_XXS, QUANT_T_IQ2_S,
        QUANT_T_IQ2_XS, QUANT_T_IQ2_XXS, QUANT_T_IQ1_M, QUANT_T_IQ1_S, QUANT_T_TQ2_0, QUANT_T_TQ1_0,
    };
    uint8_t *w = malloc((size_t)ROWS * COLS * 2);
    float *x = malloc(sizeof(float) * COLS), *tmp = malloc(sizeof(float) * COLS), *out = malloc(sizeof(float) * ROWS);
    if (!w || !x || !tmp || !out) return 1;
    uint64_t s = 1;
    for (int i = 0; i < COLS; i++) x[i] = (float)((double)(int32_t)rng(&s) * 0x1p-31);
    printf("weight types, %d x %d matrix, 1 thread, values/s (dot: one token times every row)\n", ROWS, COLS);
    printf("  %-8s %10s %10s %10s %10s %8s\n", "type", "deq fast", "deq ref", "dot fused", "dot deq+dot", "ratio");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint32_t t = types[i];
        size_t rb = quant_row_bytes(t, COLS);
        fill(t, w, &s);
        double df = rate(pass_dequant, t, w, rb, x, tmp, out, secs);
        double dr = rate(pass_dequant_ref, t, w, rb, x, tmp, out, secs);
        float o[8];
        int fused = quant_dot_rows(t, w, rb, 8, x, COLS, NULL, o) == 0;
        double ff = fused ? rate(pass_fused, t, w, rb, x, tmp, out, secs) : 0;
        double gg = rate(pass_generic, t, w, rb, x, tmp, out, secs);
        char fbuf[32] = "-", rbuf[32] = "-";
        if (fused) {
            snprintf(fbuf, sizeof fbuf, "%.3g", ff);
            snprintf(rbuf, sizeof rbuf, "x%.1f", ff / gg);
        }
        printf("  %-8s %10.3g %10.3g %10s %10.3g %8s%s\n", quant_type_name(t), df, dr, fbuf, gg, rbuf,
               quant_has_fast_path(t) ? "" : "  (no vector dequantiser)");
    }
    free(w); free(x); free(tmp); free(out);
    return 0;
}
