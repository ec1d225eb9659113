/* test_quant.c — GGUF weight types (kernels/quant.c).
 *
 * 1. Block sizes against the GGUF spec; quant_row_bytes edge cases (n not a multiple of the
 *    block, n = 0, overflow, unknown types); type names.
 * 2. Fixtures: tests/fixtures/quant/TYPE.gguf hold tensor q (rows of 256 values, raw TYPE: 4 rows,
 *    more for the IQ / MXFP4 / ternary types, whose rows walk every codebook entry, sign pattern and
 *    sub-scale) and ref (F32), ref being the dequantisation by the PyPI `gguf` package
 *    (tests/ref/make_quant_fixtures.py). Both our paths must reproduce ref bit for bit: every value
 *    is an exact product plus at most one rounded add, so there is no legitimate difference to allow for.
 * 3. The fast path against the reference on random blocks (aligned and unaligned, odd lengths),
 *    and on all 65536 halves for F16.
 * 4. Invalid requests fill the output with NaN.
 * 5. The fused dequantise-and-dot (quant_dot_rows) against dequantising and the canonical dot; and
 *    ops_matmul (fused or generic path, decode and prefill shapes) against the same, for every type.
 * 6. Throughput per type (information only).
 *
 * The fixture folder is tests/fixtures/quant relative to the working directory (the repository
 * root), or $STRATA_QUANT_FIXTURES.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "tests/check.h"
#include "tests/proc.h"
#include "worker/gguf.h"
#include "kernels/quant.h"
#include "kernels/vec16.h"

static const uint32_t supported[] = {
    GGUF_T_F32, GGUF_T_F16, GGUF_T_BF16, GGUF_T_Q4_0, GGUF_T_Q4_1, GGUF_T_Q5_0, GGUF_T_Q5_1,
    GGUF_T_Q8_0, GGUF_T_Q2_K, GGUF_T_Q3_K, GGUF_T_Q4_K, GGUF_T_Q5_K, GGUF_T_Q6_K,
    QUANT_T_IQ4_NL, QUANT_T_IQ4_XS, QUANT_T_IQ3_S, QUANT_T_IQ3_XXS, QUANT_T_IQ2_XXS, QUANT_T_IQ2_XS,
    QUANT_T_IQ2_S, QUANT_T_IQ1_S, QUANT_T_IQ1_M, QUANT_T_MXFP4, QUANT_T_TQ1_0, QUANT_T_TQ2_0,
};
#define N_SUPPORTED (int)(sizeof supported / sizeof supported[0])

/* ---- a small deterministic generator (splitmix64) -------------------------------------------- */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- 1. sizes, row bytes, names ------------------------------------------------------------- */
static void test_sizes(void) {
    /* values per block and bytes per block, from the GGUF spec (ggml's block structs) */
    static const struct { uint32_t type; const char *name; int bv; size_t bb; } spec[] = {
        {GGUF_T_F32, "F32", 1, 4},        {GGUF_T_F16, "F16", 1, 2},
        {GGUF_T_BF16, "BF16", 1, 2},      {GGUF_T_Q4_0, "Q4_0", 32, 18},
        {GGUF_T_Q4_1, "Q4_1", 32, 20},    {GGUF_T_Q5_0, "Q5_0", 32, 22},
        {GGUF_T_Q5_1, "Q5_1", 32, 24},    {GGUF_T_Q8_0, "Q8_0", 32, 34},
        {GGUF_T_Q2_K, "Q2_K", 256, 84},   {GGUF_T_Q3_K, "Q3_K", 256, 110},
        {GGUF_T_Q4_K, "Q4_K", 256, 144},  {GGUF_T_Q5_K, "Q5_K", 256, 176},
        {GGUF_T_Q6_K, "Q6_K", 256, 210},
        {16, "IQ2_XXS", 256, 66},         {17, "IQ2_XS", 256, 74},
        {18, "IQ3_XXS", 256, 98},         {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},           {21, "IQ3_S", 256, 110},
        {22, "IQ2_S", 256, 82},           {23, "IQ4_XS", 256, 136},
        {29, "IQ1_M", 256, 56},           {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},           {39, "MXFP4", 32, 17},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        uint32_t t = spec[i].type;
        CHECK(quant_supported(t) && quant_block_values(t) == spec[i].bv &&
              quant_block_bytes(t) == spec[i].bb && strcmp(quant_type_name(t), spec[i].name) == 0,
              "%s: supported, %d values in %zu bytes per block", spec[i].name, spec[i].bv, spec[i].bb);
    }

    /* unsupported types: named when ggml names them, sizes 0 */
    static const uint32_t unsup[] = {4, 5, GGUF_T_Q8_1, GGUF_T_Q8_K, GGUF_T_I8, GGUF_T_I32,
                                     GGUF_T_F64, 31, 36, 38, 40, 41, 42, 1000, UINT32_MAX};
    int all_zero = 1;
    for (size_t i = 0; i < sizeof unsup / sizeof unsup[0]; i++) {
        uint32_t t = unsup[i];
        if (quant_supported(t) || quant_block_values(t) || quant_block_bytes(t) ||
            quant_row_bytes(t, 256) || quant_row_bytes(t, 1))
            all_zero = 0;
    }
    CHECK(all_zero, "unsupported / unknown types: not supported, block sizes and row bytes 0");
    CHECK(strcmp(quant_type_name(40), "NVFP4") == 0 && strcmp(quant_type_name(GGUF_T_Q8_K), "Q8_K") == 0 &&
          strcmp(quant_type_name(GGUF_T_I32), "I32") == 0,
          "unsupported ggml types keep their names (NVFP4, Q8_K, I32)");
    CHECK(strcmp(quant_type_name(4), "unknown") == 0 && strcmp(quant_type_name(1000), "unknown") == 0,
          "retired / unknown numbers are \"unknown\"");
    char buf[32];
    CHECK(strcmp(quant_type_name_buf(1000, buf, sizeof buf), "type 1000") == 0 &&
          strcmp(quant_type_name_buf(UINT32_MAX, buf, sizeof buf), "type 4294967295") == 0 &&
          strcmp(quant_type_name_buf(GGUF_T_Q6_K, buf, sizeof buf), "Q6_K") == 0,
          "quant_type_name_buf: \"type N\" for unknown numbers, the name otherwise");
    char tiny[6];
    const char *s = quant_type_name_buf(12345, tiny, sizeof tiny);
    CHECK(s == tiny && strcmp(tiny, "type ") == 0, "quant_type_name_buf truncates to its buffer");

    /* row bytes */
    CHECK(quant_row_bytes(GGUF_T_Q4_0, 64) == 36 && quant_row_bytes(GGUF_T_Q4_K, 4096) == 16 * 144 &&
          quant_row_bytes(GGUF_T_Q6_K, 256) == 210 && quant_row_bytes(GGUF_T_F16, 3) == 6 &&
          quant_row_bytes(GGUF_T_F32, 1) == 4,
          "quant_row_bytes of whole blocks");
    CHECK(quant_row_bytes(GGUF_T_Q4_0, 31) == 0 && quant_row_bytes(GGUF_T_Q4_0, 33) == 0 &&
          quant_row_bytes(GGUF_T_Q4_K, 128) == 0 && quant_row_bytes(GGUF_T_Q2_K, 257) == 0 &&
          quant_row_bytes(GGUF_T_Q8_0, 16) == 0,
          "quant_row_bytes is 0 when n is not a multiple of the block size");
    CHECK(quant_row_bytes(GGUF_T_F32, 0) == 0 && quant_row_bytes(GGUF_T_Q4_K, 0) == 0,
          "quant_row_bytes(n = 0) is 0");
    /* overflow (64-bit size_t: only types with more than one byte per value can overflow) */
    uint64_t maxb = SIZE_MAX / 34;   /* Q8_0 blocks that fit */
    CHECK(quant_row_bytes(GGUF_T_Q8_0, maxb * 32) == maxb * 34 &&
          quant_row_bytes(GGUF_T_Q8_0, (maxb + 1) * 32) == 0 &&
          quant_row_bytes(GGUF_T_Q8_0, UINT64_MAX - 31) == 0,
          "Q8_0: %llu blocks fit in size_t, one more overflows -> 0", (unsigned long long)maxb);
    CHECK(quant_row_bytes(GGUF_T_F32, UINT64_MAX) == 0 && quant_row_bytes(GGUF_T_F32, 1ull << 62) == 0 &&
          quant_row_bytes(GGUF_T_F32, (1ull << 62) - 1) == ((1ull << 62) - 1) * 4 &&
          quant_row_bytes(GGUF_T_F16, 1ull << 63) == 0 &&
          quant_row_bytes(GGUF_T_Q6_K, UINT64_MAX - 255) == (UINT64_MAX - 255) / 256 * 210,
          "quant_row_bytes overflow -> 0 (F32 2^62, F16 2^63 values); Q6_K near 2^64 fits");
}

/* ---- 2. fixtures from the gguf package -------------------------------------------------------- */
static void test_fixture(const char *dir, uint32_t type) {
    const char *name = quant_type_name(type);
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    gguf_file *g = NULL;
    if (gguf_open(path, &g, err, sizeof err) != 0) {
        CHECK(0, "%s: fixture opens: %s", name, err);
        return;
    }
    const gguf_tensor *q = gguf_tensor_find(g, "q"), *ref = gguf_tensor_find(g, "ref");
    char fixture_type[32] = "";
    gguf_get_strz(g, "strata.fixture.type", fixture_type, sizeof fixture_type);
    int shape_ok = q && ref && q->type == type && ref->type == GGUF_T_F32 && q->n_dims == 2 &&
                   ref->n_dims == 2 && q->ne[0] == ref->ne[0] && q->ne[1] == ref->ne[1] &&
                   q->ne[0] % (uint64_t)quant_block_values(type) == 0 && q->ne[0] <= 4096 &&
                   strcmp(fixture_type, name) == 0;
    CHECK(shape_ok, "%s: fixture has q (%s) and ref (F32) of the same shape", name, fixture_type);
    if (!shape_ok) {
        gguf_close(g);
        return;
    }
    int64_t n = (int64_t)q->ne[0], rows = (int64_t)q->ne[1];
    size_t rb = quant_row_bytes(type, (uint64_t)n);
    CHECK(rb * (size_t)rows == q->nbytes, "%s: %lld rows of %zu bytes", name, (long long)rows, rb);

    float y[4096], yr[4096], want[4096];
    int64_t bad_fast = 0, bad_ref = 0, first_bad = -1;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = (const uint8_t *)q->data + (size_t)r * rb;
        memcpy(want, (const uint8_t *)ref->data + (size_t)r * (size_t)n * 4, (size_t)n * 4);
        quant_dequant_row(type, src, y, n);
        quant_dequant_row_ref(type, src, yr, n);
        for (int64_t j = 0; j < n; j++) {
            int bf = f32_bits(y[j]) != f32_bits(want[j]), br = f32_bits(yr[j]) != f32_bits(want[j]);
            bad_fast += bf;
            bad_ref += br;
            if ((bf || br) && first_bad < 0) {
                first_bad = r * n + j;
                printf("  %s row %lld value %lld: want %.9g (%08x), fast %.9g (%08x), ref %.9g (%08x)\n",
                       name, (long long)r, (long long)j, want[j], f32_bits(want[j]), y[j],
                       f32_bits(y[j]), yr[j], f32_bits(yr[j]));
            }
        }
    }
    CHECK(bad_fast == 0 && bad_ref == 0,
          "%s: %lld values bit-identical to the gguf package (fast path %lld differ, reference %lld)",
          name, (long long)(rows * n), (long long)bad_fast, (long long)bad_ref);
    gguf_close(g);
}

/* ---- 3. fast path == reference ---------------------------------------------------------------- */

/* Offsets of the fp16 fields in one block (the rest of a block is any bits). */
static int fp16_fields(uint32_t type, int off[2]) {
    switch (type) {
    case GGUF_T_Q4_0: case GGUF_T_Q5_0: case GGUF_T_Q8_0: off[0] = 0; return 1;
    case GGUF_T_Q4_1: case GGUF_T_Q5_1: case GGUF_T_Q4_K: case GGUF_T_Q5_K:
        off[0] = 0; off[1] = 2; return 2;
    case GGUF_T_Q2_K: off[0] = 80; off[1] = 82; return 2;
    case GGUF_T_Q3_K: off[0] = 108; return 1;
    case GGUF_T_Q6_K: off[0] = 208; return 1;
    case GGUF_T_F16: off[0] = 0; return 1;
    case QUANT_T_IQ4_NL: case QUANT_T_IQ4_XS: case QUANT_T_IQ3_S: case QUANT_T_IQ3_XXS:
    case QUANT_T_IQ2_XXS: case QUANT_T_IQ2_XS: case QUANT_T_IQ2_S: case QUANT_T_IQ1_S:
        off[0] = 0; return 1;
    case QUANT_T_TQ1_0: off[0] = 52; return 1;
    case QUANT_T_TQ2_0: off[0] = 64; return 1;
    default: return 0;   /* IQ1_M (d in four nibbles) and MXFP4 (E8M0): random_row */
    }
}

/* A random finite fp16: any bits with the exponent field kept below 31. */
static uint16_t rand_finite_f16(uint64_t *s) {
    uint16_t h = (uint16_t)rng_next(s);
    if ((h & 0x7C00u) == 0x7C00u) h &= 0xBFFFu;
    return h;
}

/* Fills n values' worth of blocks of type with random bits, fp16 fields finite (F32: finite). */
static void random_row(uint32_t type, uint8_t *dst, int64_t n, uint64_t *s) {
    size_t bytes = quant_row_bytes(type, (uint64_t)n);
    for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rng_next(s);
    size_t bb = quant_block_bytes(type);
    int off[2], nf = fp16_fields(type, off);
    for (size_t b = 0; b < bytes; b += bb) {
        for (int f = 0; f < nf; f++) {
            uint16_t h = rand_finite_f16(s);
            memcpy(dst + b + off[f], &h, 2);
        }
        if (type == QUANT_T_IQ1_M) {          /* d: the top nibbles of the four scale words */
            uint16_t h = rand_finite_f16(s);
            for (int w = 0; w < 4; w++)
                dst[b + 49 + 2 * w] = (uint8_t)((dst[b + 49 + 2 * w] & 0x0F) | (((h >> (4 * w)) & 0x0F) << 4));
        }
        if (type == QUANT_T_MXFP4) dst[b] = (uint8_t)(rng_next(s) % 160);   /* scale 2^-128 .. 2^31 */
    }
    if (type == GGUF_T_F32)
        for (size_t i = 0; i < bytes; i += 4) {
            float v = (float)((double)(int32_t)rng_next(s) * 1e-6);
            memcpy(dst + i, &v, 4);
        }
}

static void test_fast_vs_ref(void) {
    static const uint32_t hot[] = {GGUF_T_Q4_0, GGUF_T_Q4_1, GGUF_T_Q5_0, GGUF_T_Q5_1, GGUF_T_Q8_0,
                                   GGUF_T_Q4_K, GGUF_T_Q6_K, GGUF_T_F16, GGUF_T_BF16,
                                   QUANT_T_IQ4_NL, QUANT_T_IQ4_XS, QUANT_T_MXFP4};
    int all = 1;
    for (size_t i = 0; i < sizeof hot / sizeof hot[0]; i++) all &= quant_has_fast_path(hot[i]);
    CHECK(all, "every build (here %s): Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K F16 BF16 IQ4_NL IQ4_XS MXFP4 have a "
          "fast path", VEC16_ISA);
    static const uint32_t grid[] = {QUANT_T_IQ3_S, QUANT_T_IQ3_XXS, QUANT_T_IQ2_XXS, QUANT_T_IQ2_XS,
                                    QUANT_T_IQ2_S, QUANT_T_IQ1_S, QUANT_T_IQ1_M, QUANT_T_TQ1_0, QUANT_T_TQ2_0};
    int all512 = 1;
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) all512 &= quant_has_fast_path(grid[i]);
    CHECK(all512, "every build: IQ3_S IQ3_XXS IQ2_XXS IQ2_XS IQ2_S IQ1_S IQ1_M TQ1_0 TQ2_0 have a fast path too");
    enum { N = 4096 };
    static uint8_t buf[N * 4 + 64];
    static float y[N + 8], yr[N + 8];
    uint64_t s = 42;
    for (int i = 0; i < N_SUPPORTED; i++) {
        uint32_t t = supported[i];
        int64_t bad = 0, lens = 0;
        int bv = quant_block_values(t);
        /* lengths: a whole 4096 row, one block, and for 1-value types odd lengths (vector tails);
         * sources and outputs at offsets 0 and 1 (unaligned) */
        int64_t ns[] = {N, bv, bv == 1 ? 4093 : 3 * bv, bv == 1 ? 7 : 5 * bv};
        for (int rep = 0; rep < 8; rep++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                int64_t n = ns[k];
                int so = rep & 1, yo = (rep >> 1) & 1;
                random_row(t, buf + so, n, &s);
                quant_dequant_row(t, buf + so, y + yo, n);
                quant_dequant_row_ref(t, buf + so, yr + yo, n);
                for (int64_t j = 0; j < n; j++) bad += f32_bits(y[yo + j]) != f32_bits(yr[yo + j]);
                lens++;
            }
        CHECK(bad == 0, "%s: fast path (%s) bit-identical to the reference on %lld random rows",
              quant_type_name(t), quant_has_fast_path(t) ? "vector" : "same code", (long long)lens);
    }

    /* F16: all 65536 halves. Non-NaN: bit-identical, and equal to the value computed from the
     * definition; NaN: NaN on both paths (F16C quiets signalling NaNs; the payload may differ). */
    static uint16_t h[65536];
    static float yf[65536], yfr[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    quant_dequant_row(GGUF_T_F16, h, yf, 65536);
    quant_dequant_row_ref(GGUF_T_F16, h, yfr, 65536);
    int64_t bad_bits = 0, bad_def = 0, bad_nan = 0, nan_payload = 0;
    for (int i = 0; i < 65536; i++) {
        int exp = (i >> 10) & 31, man = i & 1023, neg = i >> 15;
        if (exp == 31 && man) {
            bad_nan += !(isnan(yf[i]) && isnan(yfr[i]));
            nan_payload += f32_bits(yf[i]) != f32_bits(yfr[i]);
            continue;
        }
        double v = exp == 31 ? INFINITY : exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
        float want = (float)(neg ? -v : v);
        bad_bits += f32_bits(yf[i]) != f32_bits(yfr[i]);
        bad_def += f32_bits(yfr[i]) != f32_bits(want);
    }
    CHECK(bad_bits == 0 && bad_def == 0,
          "F16: all 63488 non-NaN halves: fast == reference == definition (%lld, %lld differ)",
          (long long)bad_bits, (long long)bad_def);
    CHECK(bad_nan == 0, "F16: all 2046 NaN halves give NaN on both paths (%lld NaNs with another payload)",
          (long long)nan_payload);
}

/* ---- 5. fused dequantise-and-dot ------------------------------------------------------------ */

static void test_fused(void) {
    enum { N = 4096, ROWS = 8 };
    static uint8_t buf[ROWS * N * 4 + 64];
    static float x[N], w[N];
    uint64_t s = 7;
    int n_fused = 0;
    for (int i = 0; i < N_SUPPORTED; i++) {
        uint32_t t = supported[i];
        int bv = quant_block_values(t);
        int64_t ns[2] = { N, 2 * (int64_t)bv };
        int64_t bad = 0, calls = 0, refused = 0;
        for (int k = 0; k < 2; k++)
            for (int nr = 1; nr <= ROWS; nr++)
                for (int so = 0; so < 2; so++) {   /* rows at offset 0 and 1 (unaligned blocks) */
                    int64_t n = ns[k];
                    size_t rb = quant_row_bytes(t, (uint64_t)n);
                    for (int r = 0; r < nr; r++) random_row(t, buf + so + r * rb, n, &s);
                    /* activations of mixed sign and magnitude, so the sums round */
                    for (int64_t j = 0; j < n; j++) x[j] = (float)((double)(int32_t)rng_next(&s) * 0x1p-29);
                    float out[ROWS + 1];
                    out[nr] = 12345.0f;
                    /* at offset 1 the rows also ask for themselves as the next ones (a hint: the same bits) */
                    if (quant_dot_rows(t, buf + so, rb, nr, x, n, so ? buf + so : NULL, out)) { refused++; continue; }
                    calls++;
                    for (int r = 0; r < nr; r++) {
                        quant_dequant_row_ref(t, buf + so + r * rb, w, n);
                        bad += f32_bits(out[r]) != f32_bits(ops_dot_ref(w, x, (int)n));
                    }
                    bad += out[nr] != 12345.0f;   /* nothing written past nr */
                }
        if (calls) {
            n_fused++;
            CHECK(bad == 0 && refused == 0, "%s: fused dot of 1..8 rows bit-identical to dequantise + canonical dot "
                  "(%lld calls, %lld differ)", quant_type_name(t), (long long)calls, (long long)bad);
        }
    }
    {
    static const uint32_t hot[] = {GGUF_T_Q4_0, GGUF_T_Q4_1, GGUF_T_Q5_0, GGUF_T_Q5_1, GGUF_T_Q8_0,
                                   GGUF_T_Q4_K, GGUF_T_Q6_K, QUANT_T_IQ4_NL, QUANT_T_IQ4_XS, QUANT_T_MXFP4,
                                   QUANT_T_IQ2_XXS, QUANT_T_IQ3_S};
    int all = 1;
    float o1[8];
    for (size_t i = 0; i < sizeof hot / sizeof hot[0]; i++) all &= quant_dot_rows(hot[i], buf, 0, 1, x, 256, NULL, o1) == 0;
    /* every block type but Q2_K Q3_K Q5_K: the seven above, and all twelve IQ / MXFP4 / TQ types */
    CHECK(all && n_fused == 19, "every build (here %s): fused kernels for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K, "
          "IQ4_NL IQ4_XS MXFP4 IQ2_XXS IQ3_S ... (%d types)", VEC16_ISA, n_fused);
    }
    float o[10] = {0};
    int refused = quant_dot_rows(GGUF_T_Q8_0, buf, 34, 0, x, 32, NULL, o) && quant_dot_rows(GGUF_T_Q8_0, buf, 34, 9, x, 32, NULL, o) &&
                  quant_dot_rows(GGUF_T_Q8_0, buf, 34, 1, x, 48, NULL, o) && quant_dot_rows(GGUF_T_F32, buf, 128, 1, x, 32, NULL, o) &&
                  quant_dot_rows(GGUF_T_Q8_K, buf, 292, 1, x, 256, NULL, o);
    int untouched = 1;
    for (int i = 0; i < 10; i++) untouched &= o[i] == 0.0f;
    CHECK(refused && untouched, "fused dot refuses 0 or 9 rows, a partial block, F32 and unsupported types, writing nothing");
}

/* ---- 5b. the caller: ops_matmul ------------------------------------------------------------------
 * For every type, through the code the forward pass runs: T = 1 takes the fused kernel where the
 * type has one and dequantise + dot where not, T = 5 dequantises and uses the matmul tiles; rows
 * unaligned, a row count that leaves a partial group of 8. Both must equal dequantising with the
 * reference and ops_dot_ref, bit for bit. */
static void test_matmul(void) {
    enum { ROWS = 19, COLS = 512, T = 5 };
    static uint8_t data[ROWS * COLS * 4 + 64];
    static float x[T * COLS], y[T * ROWS], w[COLS];
    pool *p = NULL;
    if (pool_create(check_threads(2), &p) != 0) {
        CHECK(0, "pool_create(2)");
        return;
    }
    uint64_t s = 11;
    for (int i = 0; i < N_SUPPORTED; i++) {
        uint32_t t = supported[i];
        size_t rb = quant_row_bytes(t, COLS);
        for (int r = 0; r < ROWS; r++) random_row(t, data + 1 + (size_t)r * rb, COLS, &s);
        if (t == GGUF_T_BF16)   /* random bits would hold NaN and inf: moderate values instead */
            for (size_t j = 0; j < (size_t)ROWS * rb; j += 2) {
                uint32_t u = f32_bits((float)((double)(int32_t)rng_next(&s) * 1e-9));
                uint16_t h = (uint16_t)(u >> 16);
                memcpy(data + 1 + j, &h, 2);
            }
        for (int j = 0; j < T * COLS; j++) x[j] = (float)((double)(int32_t)rng_next(&s) * 0x1p-29);
        backend_weight W = {.type = t, .rows = ROWS, .cols = COLS, .row_bytes = rb, .data = data + 1};
        int64_t bad = 0, fail = 0;
        for (int nt = 1; nt <= T; nt += T - 1) {
            for (int j = 0; j < T * ROWS; j++) y[j] = NAN;
            fail |= ops_matmul(p, &W, x, y, nt, ROWS, NULL) != 0;
            for (int r = 0; r < ROWS; r++) {
                quant_dequant_row_ref(t, data + 1 + (size_t)r * rb, w, COLS);
                for (int k = 0; k < nt; k++)
                    bad += f32_bits(y[k * ROWS + r]) != f32_bits(ops_dot_ref(w, x + k * COLS, COLS));
            }
        }
        float o[8];
        int fused = quant_dot_rows(t, data + 1, rb, 1, x, COLS, NULL, o) == 0;
        CHECK(!fail && bad == 0, "%s: ops_matmul T = 1 (%s) and T = 5 bit-identical to reference dequantise + dot (%lld differ)",
              quant_type_name(t), fused ? "fused kernel" : "dequantise + dot", (long long)bad);
    }
    pool_free(p);
}

/* ---- 4. invalid requests ------------------------------------------------------------------- */
static void test_invalid(void) {
    uint8_t src[256] = {0};
    float y[64];
    int all_nan = 1;
    for (int i = 0; i < 64; i++) y[i] = 1.0f;
    quant_dequant_row(1000, src, y, 64);
    for (int i = 0; i < 64; i++) all_nan &= isnan(y[i]);
    for (int i = 0; i < 64; i++) y[i] = 1.0f;
    quant_dequant_row(GGUF_T_Q4_0, src, y, 48);   /* 1.5 blocks */
    for (int i = 0; i < 48; i++) all_nan &= isnan(y[i]);
    all_nan &= y[48] == 1.0f;
    for (int i = 0; i < 64; i++) y[i] = 1.0f;
    quant_dequant_row_ref(GGUF_T_Q4_K, src, y, 32);
    for (int i = 0; i < 32; i++) all_nan &= isnan(y[i]);
    CHECK(all_nan, "unknown type / partial block: output y[0..n) is NaN, nothing past n written");
    for (int i = 0; i < 64; i++) y[i] = 1.0f;
    quant_dequant_row(GGUF_T_Q4_0, src, y, 0);
    quant_dequant_row(GGUF_T_Q4_0, src, y, -32);
    int untouched = 1;
    for (int i = 0; i < 64; i++) untouched &= y[i] == 1.0f;
    CHECK(untouched, "n <= 0 writes nothing");
}

/* ---- 5. throughput (information) --------------------------------------------------------------- */

/* Values per second dequantising one 4096-value row over and over for about 20 ms. */
static double throughput(void (*fn)(uint32_t, const void *, float *, int64_t), uint32_t t,
                         const uint8_t *src, float *y) {
    int64_t reps = 0;
    double t0 = clock_s(), t1;
    do {
        for (int k = 0; k < 64; k++) fn(t, src, y, 4096);
        reps += 64;
        t1 = clock_s();
    } while (t1 - t0 < 0.02);
    return (double)reps * 4096.0 / (t1 - t0);
}

static void report_throughput(void) {
    static uint8_t src[4096 * 4];
    static float y[4096];
    uint64_t s = 7;
    printf("info: dequantisation throughput, one 4096-value row repeated (values/s):\n");
    for (int i = 0; i < N_SUPPORTED; i++) {
        uint32_t t = supported[i];
        random_row(t, src, 4096, &s);
        double fast = throughput(quant_dequant_row, t, src, y);
        double ref = throughput(quant_dequant_row_ref, t, src, y);
        printf("info:   %-7s fast %8.3g  reference %8.3g  (x%.1f%s)\n", quant_type_name(t), fast, ref,
               fast / ref, quant_has_fast_path(t) ? "" : ", no vector path");
    }
}

int main(void) {
    const char *dir = getenv("STRATA_QUANT_FIXTURES");
    if (!dir) dir = "tests/fixtures/quant";
    test_sizes();
    for (int i = 0; i < N_SUPPORTED; i++) test_fixture(dir, supported[i]);
    test_fast_vs_ref();
    test_invalid();
    test_fused();
    test_matmul();
    report_throughput();
    return check_done();
}
