/* test_kv.c — the KV formats of kernels/kv.h against hand-computed bytes (docs/DESIGN.md §3).
 *
 * Every expected byte below was worked out by hand from the format definitions (scales chosen so
 * that the arithmetic is exact, or checked with an independent f32 emulation); none comes from
 * running kv.c. Random-data checks assert the error bounds each format promises, and that the
 * fused kv_dot / kv_axpy are bit-identical to dequantising first. */
#include "kernels/kv.h"
#include "kernels/kivi.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fp16.h"
#include "tests/check.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* 1 if got[n] == want[n]; else prints the first difference and returns 0. */
static int same_bytes(const void *got, const uint8_t *want, size_t n, const char *what) {
    const uint8_t *g = got;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != want[i]) {
            printf("  %s: byte %zu is 0x%02x, want 0x%02x\n", what, i, g[i], want[i]);
            return 0;
        }
    }
    return 1;
}

static int same_float_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* splitmix64: the random source, state owned by the caller. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float rng_unit(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) / 4503599627370496.0 - 1.0); }

/* x[h]: a random head vector at a random scale 10^[-3, 2], with an occasional 20x outlier. */
static void rng_vector(uint64_t *s, float *x, int h) {
    float scale = powf(10.0f, -3.0f + 5.0f * (rng_unit(s) + 1.0f) / 2.0f);
    for (int i = 0; i < h; i++) {
        x[i] = scale * rng_unit(s);
        if ((rng_next(s) & 63) == 0) x[i] *= 20.0f;
    }
}

/* ---- names, sizes, checks ----------------------------------------------------------------- */

static void test_names(void) {
    const char *names[KV_NFMT] = {"f32", "bf16", "f16", "int8", "q8_0", "q4_0", "q4_0r", "fp8",
                                  "q4_1", "q5_0", "q5_1", "iq4_nl", "e5m2", "e4m3s", "e5m2s", "nvfp4",
                                  "mxfp4", "tq3", "tq4"};
    for (int f = 0; f < KV_NFMT; f++) {
        kv_fmt got = KV_NFMT;
        int rc = kv_fmt_parse(names[f], &got);
        CHECK(rc == 0 && got == (kv_fmt)f, "kv_fmt_parse(\"%s\") = %d", names[f], (int)f);
        CHECK(strcmp(kv_fmt_name((kv_fmt)f), names[f]) == 0, "kv_fmt_name(%d) = \"%s\"", f, names[f]);
    }
    kv_fmt keep = KV_F16;
    CHECK(kv_fmt_parse("F16", &keep) == -1 && keep == KV_F16, "kv_fmt_parse is exact: \"F16\" is unknown");
    CHECK(kv_fmt_parse("q4_0x", &keep) == -1, "kv_fmt_parse(\"q4_0x\") is unknown");
    CHECK(kv_fmt_parse("", &keep) == -1 && kv_fmt_parse(NULL, &keep) == -1, "empty / NULL name unknown");
    CHECK(strcmp(kv_fmt_name(KV_NFMT), "?") == 0, "kv_fmt_name(out of range) = \"?\"");
    char all[256] = "";
    for (int f = 0; f < KV_NFMT; f++) {
        if (f) strcat(all, " ");
        strcat(all, names[f]);
    }
    CHECK(strncmp(all, KV_FMT_NAMES, strlen(all)) == 0 && strstr(KV_FMT_NAMES, " kivi2 kivi4"),
          "KV_FMT_NAMES lists every format in enum order, then kivi2 kivi4");
    for (int f = 0; f < KV_NFMT; f++)
        CHECK(kv_fmt_rotated((kv_fmt)f) == (f == KV_Q4_0R || f == KV_TQ3 || f == KV_TQ4), "kv_fmt_rotated(%s)", names[f]);
    /* the rotation modifiers: every base but q4_0r, tq3, tq4 takes +rot, +roth and +rotp; names
     * round-trip */
    static const int mods[4] = { 0, KV_ROT_B, KV_ROT_H, KV_ROT_P };
    static const char *const modn[4] = { "", "rot", "roth", "rotp" };
    int ok = 1;
    for (int f = 0; f < KV_NFMT; f++)
        for (int r = 1; r <= 3; r++) {
            char name[32];
            kv_fmt want = (kv_fmt)(f | mods[r]), got = KV_NFMT;
            snprintf(name, sizeof name, "%s+%s", names[f], modn[r]);
            int rc = kv_fmt_parse(name, &got);
            if (f == KV_Q4_0R || f == KV_TQ3 || f == KV_TQ4) {
                ok &= rc == -1 && !kv_fmt_valid(want) && !strcmp(kv_fmt_name(want), "?");
                continue;
            }
            ok &= rc == 0 && got == want && kv_fmt_valid(got) && !strcmp(kv_fmt_name(got), name) &&
                  kv_fmt_base(got) == (kv_fmt)f && kv_fmt_rotation(got) == mods[r] && kv_fmt_rotated(got);
        }
    CHECK(ok, "FMT+rot / FMT+roth / FMT+rotp: parse, name, base and rotation for the %d bases (q4_0r, tq3, tq4 "
          "refuse them)", KV_NFMT);
    CHECK(kv_fmt_base(KV_Q4_0R) == KV_Q4_0 && kv_fmt_rotation(KV_Q4_0R) == KV_ROT_H,
          "q4_0r is q4_0 with the whole-head rotation");
    const char *badn[] = {"int8+", "int8+rot+roth", "int8+ROT", "int8+rot8", "+rot", "rot", "int8 +rot", "q4_0r+roth",
                          "int8+rotp+rot", "tq3+rotp", "kivi4+rotp", "int8+rotP"};
    ok = 1;
    for (size_t i = 0; i < sizeof badn / sizeof badn[0]; i++) ok &= kv_fmt_parse(badn[i], &keep) == -1 && keep == KV_F16;
    CHECK(ok, "kv_fmt_parse refuses int8+, int8+rot+roth, int8+ROT, int8+rot8, +rot, rot, 'int8 +rot', q4_0r+roth, "
          "int8+rotp+rot, tq3+rotp, kivi4+rotp, int8+rotP");
    CHECK(!kv_fmt_valid((kv_fmt)(KV_INT8 | KV_ROT_B | KV_ROT_H)) && !kv_fmt_valid((kv_fmt)(KV_INT8 | KV_ROT_P | KV_ROT_B)) &&
          !kv_fmt_valid((kv_fmt)(KV_INT8 | KV_ROT_P | KV_ROT_H)) && !kv_fmt_valid(KV_NFMT) &&
          !kv_fmt_valid((kv_fmt)(KV_NFMT | KV_ROT_B)), "two modifiers, or no base, are no format");
}

static void test_row_bytes(void) {
    /* docs/DESIGN.md §3: f32 4h; bf16/f16 2h; int8 h + 2h/g, g = min(64, h); q8_0 34 per 32;
     * q4_0 and q4_0r 18 per 32; fp8 h; q4_1 20, q5_0 22, q5_1 24, iq4_nl 18 per 32; e5m2 h;
     * e4m3s / e5m2s h + 4; nvfp4 9 per 16; mxfp4 17 per 32; tq3 4 + 3h/8, tq4 4 + h/2. */
    const size_t want64[KV_NFMT] = {256, 128, 128, 64 + 2, 2 * 34, 2 * 18, 2 * 18, 64,
                                    2 * 20, 2 * 22, 2 * 24, 2 * 18, 64, 68, 68, 4 * 9, 2 * 17, 4 + 24, 4 + 32};
    const size_t want256[KV_NFMT] = {1024, 512, 512, 256 + 8, 8 * 34, 8 * 18, 8 * 18, 256,
                                     8 * 20, 8 * 22, 8 * 24, 8 * 18, 256, 260, 260, 16 * 9, 8 * 17, 4 + 96, 4 + 128};
    for (int f = 0; f < KV_NFMT; f++) {
        CHECK(kv_row_bytes((kv_fmt)f, 64) == want64[f], "kv_row_bytes(%s, 64) = %zu (got %zu)",
              kv_fmt_name((kv_fmt)f), want64[f], kv_row_bytes((kv_fmt)f, 64));
        CHECK(kv_row_bytes((kv_fmt)f, 256) == want256[f], "kv_row_bytes(%s, 256) = %zu (got %zu)",
              kv_fmt_name((kv_fmt)f), want256[f], kv_row_bytes((kv_fmt)f, 256));
        CHECK(kv_row_bytes((kv_fmt)f, 0) == 0 && kv_row_bytes((kv_fmt)f, -32) == 0,
              "kv_row_bytes(%s, h <= 0) = 0", kv_fmt_name((kv_fmt)f));
    }
    CHECK(kv_row_bytes(KV_TQ3, 8) == 7 && kv_row_bytes(KV_TQ4, 8) == 8 && kv_row_bytes(KV_TQ3, 4) == 0 &&
          kv_row_bytes(KV_TQ4, 96) == 0 && kv_row_bytes(KV_TQ3, 1024) == 388 && kv_row_bytes(KV_TQ4, 2048) == 0,
          "tq3 / tq4: powers of two 8 .. 1024 (h 8: 7 and 8 bytes)");
    CHECK(kv_row_bytes(KV_INT8, 8) == 10 && kv_row_bytes(KV_INT8, 48) == 50 &&
          kv_row_bytes(KV_INT8, 128) == 132, "int8: h < 64 is one group; h = 128 two groups");
    CHECK(kv_row_bytes(KV_INT8, 96) == 0, "int8 rejects h = 96 (> 64, not a multiple of 64)");
    CHECK(kv_row_bytes(KV_Q8_0, 80) == 0 && kv_row_bytes(KV_Q4_0, 16) == 0, "q8_0/q4_0 need h %% 32 == 0");
    CHECK(kv_row_bytes(KV_Q8_0, 96) == 3 * 34 && kv_row_bytes(KV_Q4_0, 96) == 3 * 18, "q8_0/q4_0 at h = 96");
    CHECK(kv_row_bytes(KV_Q4_0R, 96) == 0 && kv_row_bytes(KV_Q4_0R, 16) == 0 &&
          kv_row_bytes(KV_Q4_0R, 2 * KV_HADAMARD_MAX) == 0 && kv_row_bytes(KV_Q4_0R, 128) == 72,
          "q4_0r needs a power of two in [32, KV_HADAMARD_MAX]");
    CHECK(kv_row_bytes(KV_F16, 80) == 160 && kv_row_bytes(KV_FP8, 80) == 80 && kv_row_bytes(KV_F32, 3) == 12,
          "f16/fp8/f32 take any h");
    CHECK(kv_row_bytes(KV_NFMT, 64) == 0, "kv_row_bytes of a non-format = 0");
    CHECK(kv_row_bytes(KV_Q4_1, 48) == 0 && kv_row_bytes(KV_Q5_0, 16) == 0 && kv_row_bytes(KV_Q5_1, 80) == 0 &&
          kv_row_bytes(KV_IQ4_NL, 8) == 0 && kv_row_bytes(KV_MXFP4, 48) == 0, "q4_1 q5_0 q5_1 iq4_nl mxfp4 need h %% 32 == 0");
    CHECK(kv_row_bytes(KV_NVFP4, 48) == 27 && kv_row_bytes(KV_NVFP4, 16) == 9 && kv_row_bytes(KV_NVFP4, 40) == 0 &&
          kv_row_bytes(KV_NVFP4, 8) == 0, "nvfp4 needs h %% 16 == 0 (48 -> 3 blocks of 9)");
    CHECK(kv_row_bytes(KV_E5M2, 8) == 8 && kv_row_bytes(KV_E4M3S, 8) == 12 && kv_row_bytes(KV_E5M2S, 1) == 5,
          "e5m2 / e4m3s / e5m2s take any h (h, h + 4, h + 4)");

    char err[200] = "";
    CHECK(kv_fmt_check(KV_Q4_0, 80, err, sizeof err) == -1 && strstr(err, "q4_0") && strstr(err, "80"),
          "kv_fmt_check(q4_0, 80) fails naming the format and h: %s", err);
    CHECK(kv_fmt_check(KV_INT8, 96, err, sizeof err) == -1 && strstr(err, "int8") && strstr(err, "96"),
          "kv_fmt_check(int8, 96): %s", err);
    CHECK(kv_fmt_check(KV_Q4_0R, 96, err, sizeof err) == -1 && strstr(err, "q4_0r") && strstr(err, "96"),
          "kv_fmt_check(q4_0r, 96): %s", err);
    /* rotated formats: the base's bytes; +rot needs h a power of two below 64 or a multiple of 64,
     * +roth a power of two, both <= KV_HADAMARD_MAX */
    kv_fmt f16b = (kv_fmt)(KV_F16 | KV_ROT_B), f16h = (kv_fmt)(KV_F16 | KV_ROT_H);
    CHECK(kv_row_bytes(f16b, 8) == 16 && kv_row_bytes(f16b, 48) == 0 && kv_row_bytes(f16b, 192) == 384 &&
          kv_row_bytes(f16b, 96) == 0 && kv_row_bytes(f16b, 1024) == 2048 && kv_row_bytes(f16b, 1088) == 0,
          "f16+rot: h = 8 (one block of 8), 192 (3 of 64), 1024; not 48, 96, 1088");
    CHECK(kv_row_bytes(f16h, 8) == 16 && kv_row_bytes(f16h, 192) == 0 && kv_row_bytes(f16h, 1024) == 2048 &&
          kv_row_bytes(f16h, 2048) == 0 && kv_row_bytes(f16h, 1) == 2, "f16+roth: powers of two up to 1024 only");
    CHECK(kv_rot_block(f16b, 8) == 8 && kv_rot_block(f16b, 192) == 64 && kv_rot_block(f16h, 256) == 256 &&
          kv_rot_block(KV_Q4_0R, 128) == 128 && kv_rot_block(KV_F16, 64) == 0 && kv_rot_block(f16b, 96) == 0,
          "kv_rot_block: min(64, h) for +rot, h for +roth and q4_0r, 0 unrotated or not fitting");
    /* +rotp: the same head dims as +rot, blocks of h & -h (llama.cpp's K rotation) */
    kv_fmt f16p = (kv_fmt)(KV_F16 | KV_ROT_P);
    CHECK(kv_rot_block(f16p, 384) == 128 && kv_rot_block(f16p, 192) == 64 && kv_rot_block(f16p, 320) == 64 &&
          kv_rot_block(f16p, 640) == 128 && kv_rot_block(f16p, 256) == 256 && kv_rot_block(f16p, 64) == 64 &&
          kv_rot_block(f16p, 1024) == 1024 && kv_rot_block(f16p, 8) == 8 && kv_rot_block(f16p, 96) == 0 &&
          kv_rot_block(f16p, 48) == 0 && kv_rot_block(f16p, 1088) == 0,
          "kv_rot_block(+rotp): 384 -> 128, 192 -> 64, 320 -> 64, 640 -> 128, powers of two whole, 8 -> 8; not 96, 48, 1088");
    CHECK(kv_row_bytes((kv_fmt)(KV_Q8_0 | KV_ROT_P), 384) == 12 * 34 && kv_row_bytes(f16p, 96) == 0,
          "q8_0+rotp at 384 = 12 blocks of q8_0; f16+rotp refuses 96");
    CHECK(kv_fmt_check((kv_fmt)(KV_Q8_0 | KV_ROT_H), 384, err, sizeof err) == -1 && strstr(err, "q8_0+roth") &&
          strstr(err, "power of two") && strstr(err, "+rotp"), "kv_fmt_check(q8_0+roth, 384) points to +rotp: %s", err);
    CHECK(kv_fmt_check(f16p, 96, err, sizeof err) == -1 && strstr(err, "f16+rotp") && strstr(err, "multiple of 64"),
          "kv_fmt_check(f16+rotp, 96): %s", err);
    CHECK(kv_row_bytes((kv_fmt)(KV_Q4_0 | KV_ROT_B), 192) == 6 * 18 && kv_row_bytes((kv_fmt)(KV_Q4_0 | KV_ROT_H), 128) ==
          kv_row_bytes(KV_Q4_0R, 128) && kv_row_bytes((kv_fmt)(KV_Q4_0 | KV_ROT_B), 32) == 18 &&
          kv_row_bytes((kv_fmt)(KV_INT8 | KV_ROT_H), 64) == 66, "q4_0+rot at 192 = 6 blocks; q4_0+roth = q4_0r; int8+roth 66");
    CHECK(kv_fmt_check((kv_fmt)(KV_Q8_0 | KV_ROT_B), 48, err, sizeof err) == -1 && strstr(err, "q8_0+rot") &&
          strstr(err, "multiple of 32"), "kv_fmt_check(q8_0+rot, 48) names the base's rule: %s", err);
    CHECK(kv_fmt_check(f16b, 96, err, sizeof err) == -1 && strstr(err, "f16+rot") && strstr(err, "multiple of 64") &&
          strstr(err, "96"), "kv_fmt_check(f16+rot, 96): %s", err);
    CHECK(kv_fmt_check(f16h, 192, err, sizeof err) == -1 && strstr(err, "f16+roth") && strstr(err, "power of two"),
          "kv_fmt_check(f16+roth, 192): %s", err);
    CHECK(kv_fmt_check(KV_Q8_0, 128, err, sizeof err) == 0, "kv_fmt_check(q8_0, 128) passes");
    CHECK(kv_fmt_check(KV_NVFP4, 40, err, sizeof err) == -1 && strstr(err, "nvfp4") && strstr(err, "16") &&
          strstr(err, "40"), "kv_fmt_check(nvfp4, 40): %s", err);
    CHECK(kv_fmt_check(KV_IQ4_NL, 48, err, sizeof err) == -1 && strstr(err, "iq4_nl") && strstr(err, "32"),
          "kv_fmt_check(iq4_nl, 48): %s", err);

    float x[96] = {0};
    uint8_t row[400];
    memset(row, 0xaa, sizeof row);
    CHECK(kv_quantize(KV_INT8, x, row, 96) == -1 && row[0] == 0xaa, "kv_quantize refuses int8 h=96, writes nothing");
    CHECK(kv_dequantize(KV_Q4_0, row, x, 80) == -1 && x[0] == 0.0f, "kv_dequantize refuses q4_0 h=80");
}

/* ---- int8 --------------------------------------------------------------------------------- */

/* quantise x[h] as int8 and compare with want[]; also checks the dequantised values q*s. */
static void int8_case(const char *what, const float *x, int h, const uint8_t *want) {
    uint8_t row[300];
    float y[256];
    size_t nb = kv_row_bytes(KV_INT8, h);
    CHECK(kv_quantize(KV_INT8, x, row, h) == 0 && same_bytes(row, want, nb, what), "int8 %s: bytes", what);
    kv_dequantize(KV_INT8, row, y, h);
    int g = h < 64 ? h : 64, ok = 1;
    for (int i = 0; i < h; i++) {
        float s = fp16_to_f32((uint16_t)(want[h + 2 * (i / g)] | want[h + 2 * (i / g) + 1] << 8));
        if (!same_float_bits(y[i], (float)(int8_t)want[i] * s)) ok = 0;
    }
    CHECK(ok, "int8 %s: dequantised = q * s", what);
}

static void test_int8(void) {
    /* all zero: s = 0, q = 0, value +0 */
    {
        float x[8] = {0};
        uint8_t want[10] = {0};
        int8_case("zero group", x, 8, want);
    }
    /* max 127 -> s = 1 (fp16 0x3c00); +-127; rint ties to even: 2.5->2 3.5->4 -2.5->-2 -0.5->0
     * 1.5->2 126.5->126 */
    {
        float x[8] = {127.0f, -127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 1.5f, 126.5f};
        uint8_t want[10] = {0x7f, 0x81, 0x02, 0x04, 0xfe, 0x00, 0x02, 0x7e, 0x00, 0x3c};
        int8_case("s=1, +-127 and ties", x, 8, want);
    }
    /* max 100: s_f32 = 100/127 = 0.78740156; fp16 rounds it to 1613/2048 = 0.78759765625 (0x3a4d).
     * 79.15/s_f32 = 100.52 would give 101, but the stored s gives 79.15/0.7875977 = 100.495 -> 100.
     * 100/0.7875977 = 126.97 -> 127. k.5 * s_stored ties: 1.5 s -> 2, 2.5 s -> 2, -1.5 s -> -2. */
    {
        float x[8] = {100.0f, 79.15f, -79.15f, 0.0f, 0.78759765625f, 1.181396484375f, 1.968994140625f,
                      -1.181396484375f};
        uint8_t want[10] = {0x7f, 0x64, 0x9c, 0x00, 0x01, 0x02, 0x02, 0xfe, 0x4d, 0x3a};
        int8_case("fp16-rounded scale decides q", x, 8, want);
        uint8_t row[10];
        float y[8];
        kv_quantize(KV_INT8, x, row, 8);
        kv_dequantize(KV_INT8, row, y, 8);
        CHECK(y[1] == 78.759765625f && y[0] == 100.02490234375f, "int8: value = q * s_fp16 (100 * 0.78759765625)");
    }
    /* subnormal fp16 scale: max = 158.75 * 2^-24, s_f32 = 1.25 * 2^-24 -> fp16 0x0001 = 2^-24.
     * q = x / 2^-24: 158.75 -> 159 -> clamp 127; -> -127; 3; 2.5 -> 2; 3.5 -> 4; -2.5 -> -2; 0;
     * 0.5 -> 0. */
    {
        const float u = 5.9604644775390625e-08f; /* 2^-24 */
        float x[8] = {158.75f * u, -158.75f * u, 3.0f * u, 2.5f * u, 3.5f * u, -2.5f * u, 0.0f, 0.5f * u};
        uint8_t want[10] = {0x7f, 0x81, 0x03, 0x02, 0x04, 0xfe, 0x00, 0x00, 0x01, 0x00};
        int8_case("clamp at +-127 (subnormal scale)", x, 8, want);
    }
    /* scale beyond fp16: max = 1e7, 1e7/127 = 78740 > 65504 -> saturates to 0x7bff = 65504;
     * q = rint(1e7 / 65504) = 153 -> 127; 65504 -> 1; -131008 -> -2. */
    {
        float x[8] = {1e7f, 65504.0f, -131008.0f, 0, 0, 0, 0, 0};
        uint8_t want[10] = {0x7f, 0x01, 0xfe, 0, 0, 0, 0, 0, 0xff, 0x7b};
        int8_case("scale saturates to 65504", x, 8, want);
    }
    /* h = 16, one group: x[i] = (i - 8) / 2, x[15] = 31.75 -> s = 0.25 (0x3400), q = 4x */
    {
        float x[16];
        for (int i = 0; i < 15; i++) x[i] = (float)(i - 8) * 0.5f;
        x[15] = 31.75f;
        uint8_t want[18] = {0xf0, 0xf2, 0xf4, 0xf6, 0xf8, 0xfa, 0xfc, 0xfe,
                            0x00, 0x02, 0x04, 0x06, 0x08, 0x0a, 0x0c, 0x7f, 0x00, 0x34};
        int8_case("h=16", x, 16, want);
    }
    /* h = 32, one group: x[i] = (i - 16) / 4, x[31] = -63.5 -> s = 0.5 (0x3800), q = rint(2x),
     * half the values are ties */
    {
        float x[32];
        for (int i = 0; i < 31; i++) x[i] = (float)(i - 16) * 0.25f;
        x[31] = -63.5f;
        const int8_t q[32] = {-8, -8, -7, -6, -6, -6, -5, -4, -4, -4, -3, -2, -2, -2, -1, 0,
                              0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7, -127};
        uint8_t want[34];
        for (int i = 0; i < 32; i++) want[i] = (uint8_t)q[i];
        want[32] = 0x00;
        want[33] = 0x38;
        int8_case("h=32", x, 32, want);
    }
    /* h = 128: group 0 = 1.0 with x[5] = 127 -> s = 1, q = 1 / 127; group 1 = 3.0 with
     * x[64] = -254 -> s = 2 (0x4000), q = rint(1.5) = 2, q[64] = -127. Scales after the values. */
    {
        float x[128];
        uint8_t want[132];
        for (int i = 0; i < 64; i++) { x[i] = 1.0f; want[i] = 1; }
        x[5] = 127.0f; want[5] = 0x7f;
        for (int i = 64; i < 128; i++) { x[i] = 3.0f; want[i] = 2; }
        x[64] = -254.0f; want[64] = 0x81;
        want[128] = 0x00; want[129] = 0x3c; want[130] = 0x00; want[131] = 0x40;
        int8_case("h=128 (two groups)", x, 128, want);
    }
    /* h = 256: g0: 127 then -1.5 / 0.5 alternating (s = 1: -2, 0); g1: 5.0 with 254 last
     * (s = 2: rint(2.5) = 2, 127); g2: -508 first then 10.0 (s = 4: rint(2.5) = 2, -127);
     * g3: zeros (s = 0). */
    {
        float x[256];
        uint8_t want[264];
        for (int i = 0; i < 64; i++) {
            x[i] = (i % 2) ? 0.5f : -1.5f;
            want[i] = (i % 2) ? 0x00 : 0xfe;
        }
        x[0] = 127.0f; want[0] = 0x7f;
        for (int i = 64; i < 128; i++) { x[i] = 5.0f; want[i] = 2; }
        x[127] = 254.0f; want[127] = 0x7f;
        for (int i = 128; i < 192; i++) { x[i] = 10.0f; want[i] = 2; }
        x[128] = -508.0f; want[128] = 0x81;
        for (int i = 192; i < 256; i++) { x[i] = 0.0f; want[i] = 0; }
        const uint8_t scales[8] = {0x00, 0x3c, 0x00, 0x40, 0x00, 0x44, 0x00, 0x00};
        memcpy(want + 256, scales, 8);
        int8_case("h=256 (four groups)", x, 256, want);
    }
    /* random data: the stored scale is fp16(max/127) within fp16 rounding, and every element is
     * within s/2 of its value (rint with the stored s; the slack covers the f32 division/product). */
    {
        uint64_t rs = 1;
        const int hs[5] = {8, 32, 64, 128, 256};
        int ok_s = 1, ok_err = 1;
        for (int t = 0; t < 400; t++) {
            int h = hs[t % 5], g = h < 64 ? h : 64;
            float x[256], y[256];
            uint8_t row[264];
            rng_vector(&rs, x, h);
            kv_quantize(KV_INT8, x, row, h);
            kv_dequantize(KV_INT8, row, y, h);
            for (int gi = 0; gi < h / g; gi++) {
                float m = 0.0f;
                for (int j = 0; j < g; j++) m = fmaxf(m, fabsf(x[gi * g + j]));
                float s = fp16_to_f32((uint16_t)(row[h + 2 * gi] | row[h + 2 * gi + 1] << 8));
                if (fabs((double)s - m / 127.0) > m / 127.0 / 2048.0 + 3e-8) ok_s = 0;
                for (int j = 0; j < g; j++) {
                    double e = fabs((double)x[gi * g + j] - (double)y[gi * g + j]);
                    if (e > s / 2.0 * (1.0 + 1e-6) + 1e-30) {
                        if (ok_err) printf("  h=%d i=%d x=%g y=%g s=%g\n", h, gi * g + j, x[gi * g + j],
                                           y[gi * g + j], s);
                        ok_err = 0;
                    }
                }
            }
        }
        CHECK(ok_s, "int8 random: stored scale = max|x|/127 to fp16 precision");
        CHECK(ok_err, "int8 random: |x - deq(x)| <= s/2 for every element");
    }
}

/* ---- q8_0 --------------------------------------------------------------------------------- */

static void test_q8_0(void) {
    /* h = 96, three blocks.
     * block 0: max 127 -> d = 1 (0x3c00), id = 1; roundf is half AWAY from zero:
     *   2.5->3 -2.5->-3 0.5->1 -0.5->-1 1.4->1 -1.6->-2 126.5->127.
     * block 1: max 1 -> d = f32(1/127) -> fp16 0x2008, id = f32(1/d) = 127. ggml multiplies by id:
     *   0x1.224488p-5 * 127 = 4.4999998 -> 4 (x/d would be 4.5 -> 5);
     *   0x1.60c182p-1 * 127 = 87.4999... -> 87 (x/d would give 88).
     * block 2: max 100 -> d = 0.78740156 (fp16 0x3a4d), id = 1.27; q uses the f32 id:
     *   79.15 * 1.27 = 100.52 -> 101 (int8, with the stored s, gives 100). */
    float x[96] = {0};
    const float b0[9] = {127.0f, -127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.4f, -1.6f, 126.5f};
    memcpy(x, b0, sizeof b0);
    x[32] = 1.0f; x[33] = -1.0f; x[34] = 0x1.224488p-5f; x[35] = 0x1.60c182p-1f;
    x[64] = 100.0f; x[65] = 79.15f; x[66] = -79.15f;
    uint8_t want[3 * 34] = {0};
    const uint8_t w0[11] = {0x00, 0x3c, 0x7f, 0x81, 0x03, 0xfd, 0x01, 0xff, 0x01, 0xfe, 0x7f};
    const uint8_t w1[6] = {0x08, 0x20, 0x7f, 0x81, 0x04, 0x57};
    const uint8_t w2[5] = {0x4d, 0x3a, 0x7f, 0x65, 0x9b};
    memcpy(want, w0, sizeof w0);
    memcpy(want + 34, w1, sizeof w1);
    memcpy(want + 68, w2, sizeof w2);
    uint8_t row[3 * 34];
    float y[96];
    CHECK(kv_quantize(KV_Q8_0, x, row, 96) == 0 && same_bytes(row, want, sizeof want, "q8_0"),
          "q8_0: hand-worked blocks (round half away, f32 reciprocal, fp16 d)");
    kv_dequantize(KV_Q8_0, row, y, 96);
    CHECK(y[0] == 127.0f && y[2] == 3.0f && y[65] == 79.54736328125f && y[66] == -79.54736328125f &&
          y[40] == 0.0f, "q8_0: value = q * fp16(d) (101 * 0.78759765625)");

    /* all-zero block: d = 0, id = 0, q = 0 */
    float z[32] = {0};
    uint8_t zrow[34], zwant[34] = {0};
    kv_quantize(KV_Q8_0, z, zrow, 32);
    CHECK(same_bytes(zrow, zwant, 34, "q8_0 zero"), "q8_0: zero block is all zero bytes");

    /* random: |x - q*d16| <= d/2 + 127 |d - d16|, |d - d16| <= max(d/2048, 2^-25) (fp16 rounding,
     * subnormal d included), plus f32 slack */
    uint64_t rs = 2;
    int ok = 1;
    for (int t = 0; t < 300; t++) {
        float xr[256], yr[256];
        uint8_t r[8 * 34];
        rng_vector(&rs, xr, 256);
        kv_quantize(KV_Q8_0, xr, r, 256);
        kv_dequantize(KV_Q8_0, r, yr, 256);
        for (int b = 0; b < 8; b++) {
            float m = 0.0f;
            for (int j = 0; j < 32; j++) m = fmaxf(m, fabsf(xr[32 * b + j]));
            double d = m / 127.0, dd = fmax(d / 2048.0, 0x1p-25); /* |d - fp16(d)|, subnormal too */
            for (int j = 0; j < 32; j++)
                if (fabs((double)xr[32 * b + j] - yr[32 * b + j]) > d * (0.5 + 1e-4) + 127.0 * dd + 1e-30)
                    ok = 0;
        }
    }
    CHECK(ok, "q8_0 random: |x - deq(x)| <= d/2 + 127 |d - fp16(d)|");
}

/* ---- q4_0 --------------------------------------------------------------------------------- */

static void test_q4_0(void) {
    /* h = 128, four blocks. q = min(15, trunc(x*id + 8.5)), byte j = q[j] | q[j+16] << 4.
     * block 0: x[3] = -8 comes before x[10] = +8, so m = -8, d = 1 (0x3c00), id = 1:
     *   q = 8 15 15 0 8 9 4 10 0 9 15 7 8 8 8 8 | 11 5 15 2 8 ... 8 1
     *   (0->8, 7->15, 7.9->16->15, -8->0, -0.5->8, 0.5->9, -3.7->4, 2.49->10, -7.6->0, 1->9,
     *    8->16->15, -1->7; 3->11, -3->5, 6.5->15, -6.5->2, -7.5->1)
     * block 1: m = +4 -> d = -0.5 (0xb800), id = -2:
     *   4->0, -4->16->15, 1->6, -1->10, 0.25->8, -0.3->9 | 3->2, -3.9->15; zeros -> 8
     * block 2: all zero: m = 0, d = 0 / -8 = -0.0 (fp16 0x8000, as ggml stores it), id = 0, q = 8.
     * block 3: m = 3 -> d = -0.375 (0xb600), id = f32(1/d); ggml multiplies by id:
     *   0x1.500002p+0 -> 4 (x/d would give 5), -0x1.4ffffcp+0 -> 12 (x/d: 11). */
    float x[128] = {0};
    const float b0[20] = {0, 7, 7.9f, -8, -0.5f, 0.5f, -3.7f, 2.49f, -7.6f, 1, 8, -1, 0, 0, 0, 0,
                          3, -3, 6.5f, -6.5f};
    memcpy(x, b0, sizeof b0);
    x[31] = -7.5f;
    x[32] = 4; x[33] = -4; x[34] = 1; x[35] = -1; x[36] = 0.25f; x[37] = -0.3f;
    x[48] = 3; x[49] = -3.9f;
    x[96] = 3; x[97] = 0x1.500002p+0f; x[98] = -0x1.4ffffcp+0f;
    uint8_t want[4 * 18];
    memset(want, 0x88, sizeof want);
    const uint8_t w0[18] = {0x00, 0x3c, 0xb8, 0x5f, 0xff, 0x20, 0x88, 0x89, 0x84, 0x8a,
                            0x80, 0x89, 0x8f, 0x87, 0x88, 0x88, 0x88, 0x18};
    const uint8_t w1[8] = {0x00, 0xb8, 0x20, 0xff, 0x86, 0x8a, 0x88, 0x89};
    const uint8_t w3[5] = {0x00, 0xb6, 0x80, 0x84, 0x8c};
    memcpy(want, w0, sizeof w0);
    memcpy(want + 18, w1, sizeof w1);
    want[36] = 0x00; want[37] = 0x80;                       /* d = 0 / -8 = -0.0: fp16 0x8000 */
    memcpy(want + 54, w3, sizeof w3);
    uint8_t row[4 * 18];
    float y[128];
    CHECK(kv_quantize(KV_Q4_0, x, row, 128) == 0 && same_bytes(row, want, sizeof want, "q4_0"),
          "q4_0: hand-worked blocks (d = m/-8, clamp at 15, nibble order, f32 reciprocal)");
    kv_dequantize(KV_Q4_0, row, y, 128);
    CHECK(y[3] == -8.0f && y[10] == 7.0f && y[0] == 0.0f && y[31] == -7.0f, "q4_0: value = (q-8) d, d = 1");
    CHECK(y[32] == 4.0f && y[33] == -3.5f && y[34] == 1.0f && y[48] == 3.0f && y[64] == 0.0f,
          "q4_0: negative d maps q=0 back to +m (sign convention)");

    /* random: |x - (q-8) d16| <= |d|/2 + 8 |d - d16| unclamped; |d| + 8 |d - d16| where x/d > 7 */
    uint64_t rs = 3;
    int ok = 1;
    for (int t = 0; t < 300; t++) {
        float xr[256], yr[256];
        uint8_t r[8 * 18];
        rng_vector(&rs, xr, 256);
        kv_quantize(KV_Q4_0, xr, r, 256);
        kv_dequantize(KV_Q4_0, r, yr, 256);
        for (int b = 0; b < 8; b++) {
            float am = 0.0f, m = 0.0f;
            for (int j = 0; j < 32; j++)
                if (am < fabsf(xr[32 * b + j])) { am = fabsf(xr[32 * b + j]); m = xr[32 * b + j]; }
            double d = m / -8.0, dd = fmax(fabs(d) / 2048.0, 0x1p-25);
            for (int j = 0; j < 32; j++) {
                double xd = xr[32 * b + j], lim = (xd / d > 7.0 ? 1.0 : 0.5) + 1e-5;
                if (fabs(xd - yr[32 * b + j]) > fabs(d) * lim + 8.0 * dd + 1e-30) ok = 0;
            }
        }
    }
    CHECK(ok, "q4_0 random: |x - deq(x)| <= |d|/2 (|d| for the clamped side)");
}

/* ---- q4_0r and the Hadamard transform ----------------------------------------------------- */

static double dot_d(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void test_q4_0r(void) {
    /* H4 rows (1 1 1 1) (1 -1 1 -1) (1 1 -1 -1) (1 -1 -1 1): H4 (1 2 3 4) = (10 -2 -4 0), / 2 */
    float v4[4] = {1, 2, 3, 4};
    kv_hadamard(v4, 4);
    CHECK(v4[0] == 5.0f && v4[1] == -1.0f && v4[2] == -2.0f && v4[3] == 0.0f, "hadamard h=4 of (1 2 3 4) = (5 -1 -2 0)");
    float v2[2] = {1, 0};
    kv_hadamard(v2, 2);
    CHECK(fabsf(v2[0] - 0.70710678f) < 1e-7f && fabsf(v2[1] - 0.70710678f) < 1e-7f, "hadamard h=2 of e0 = (1 1)/sqrt2");
    /* columns of H8 / sqrt(8): entry i of H e_k is (-1)^popcount(i & k) / sqrt(8) */
    int ok = 1;
    const float r8 = (float)(1.0 / sqrt(8.0));
    for (int k = 0; k < 8; k++) {
        float e[8] = {0};
        e[k] = 1.0f;
        kv_hadamard(e, 8);
        for (int i = 0; i < 8; i++)
            if (e[i] != (__builtin_popcount((unsigned)(i & k)) % 2 ? -r8 : r8)) ok = 0;
    }
    CHECK(ok, "hadamard h=8: H e_k = (-1)^popcount(i&k) / sqrt(8)");

    /* orthonormal, self-inverse, dot-invariant on random vectors */
    uint64_t rs = 4;
    int ok_inv = 1, ok_norm = 1, ok_dot = 1;
    for (int t = 0; t < 50; t++) {
        int h = 32 << (t % 4);
        float a[256], b[256], ha[256], hb[256];
        for (int i = 0; i < h; i++) { a[i] = rng_unit(&rs); b[i] = rng_unit(&rs); }
        memcpy(ha, a, sizeof(float) * h);
        memcpy(hb, b, sizeof(float) * h);
        kv_hadamard(ha, h);
        kv_hadamard(hb, h);
        if (fabs(dot_d(ha, ha, h) - dot_d(a, a, h)) > 1e-5 * dot_d(a, a, h)) ok_norm = 0;
        if (fabs(dot_d(ha, hb, h) - dot_d(a, b, h)) > 1e-5 * sqrt(dot_d(a, a, h) * dot_d(b, b, h))) ok_dot = 0;
        kv_hadamard(ha, h);
        for (int i = 0; i < h; i++)
            if (fabsf(ha[i] - a[i]) > 1e-6f) ok_inv = 0;
    }
    CHECK(ok_norm, "hadamard keeps the norm");
    CHECK(ok_dot, "dot(Hq, Hk) = dot(q, k)");
    CHECK(ok_inv, "H H x = x within 1e-6");

    /* q4_0r = q4_0 of the rotated vector; dequantize gives the rotated domain; the attention
     * recipe (rotate q, kv_dot; kv_axpy, rotate back) matches the model-domain computation. */
    int ok_bytes = 1, ok_round = 1, ok_att = 1, ok_out = 1;
    for (int t = 0; t < 40; t++) {
        int h = 32 << (t % 4);
        float k[256], v[256], q[256], qr[256], hk[256], yk[256], yv[256], o[256] = {0};
        uint8_t rk[144], rk2[144], rv[144];
        rng_vector(&rs, k, h);
        rng_vector(&rs, v, h);
        for (int i = 0; i < h; i++) q[i] = rng_unit(&rs);
        memcpy(hk, k, sizeof(float) * h);
        kv_hadamard(hk, h);
        kv_quantize(KV_Q4_0R, k, rk, h);
        kv_quantize(KV_Q4_0, hk, rk2, h);
        if (memcmp(rk, rk2, kv_row_bytes(KV_Q4_0, h)) != 0) ok_bytes = 0;
        /* model-domain reconstruction: H deq(row) is close to k (error norm <= |d| per element) */
        kv_dequantize(KV_Q4_0R, rk, yk, h);
        double bound = 0;
        for (int b = 0; b < h / 32; b++) {
            float d = fabsf(fp16_to_f32((uint16_t)(rk[18 * b] | rk[18 * b + 1] << 8)));
            bound += 32.0 * d * d;
        }
        kv_hadamard(yk, h);                                 /* now model domain */
        double err = 0;
        for (int i = 0; i < h; i++) err += ((double)k[i] - yk[i]) * ((double)k[i] - yk[i]);
        if (err > bound * 1.03 + 1e-30) ok_round = 0;
        /* scores: kv_dot(row, H q) = q . (H deq(row)) */
        memcpy(qr, q, sizeof(float) * h);
        kv_hadamard(qr, h);
        double s1 = kv_dot(KV_Q4_0R, rk, qr, h), s2 = dot_d(q, yk, h);
        if (fabs(s1 - s2) > 1e-5 * (sqrt(dot_d(q, q, h) * dot_d(yk, yk, h)) + 1e-30)) ok_att = 0;
        /* output: H (w * deq(v_row)) = w * (H deq(v_row)) */
        kv_quantize(KV_Q4_0R, v, rv, h);
        kv_axpy(KV_Q4_0R, rv, 0.75f, o, h);
        kv_hadamard(o, h);
        kv_dequantize(KV_Q4_0R, rv, yv, h);
        kv_hadamard(yv, h);
        for (int i = 0; i < h; i++)
            if (fabs(o[i] - 0.75 * yv[i]) > 1e-5 * sqrt(dot_d(yv, yv, h) / h) + 1e-30) ok_out = 0;
    }
    CHECK(ok_bytes, "q4_0r bytes = q4_0 bytes of kv_hadamard(x)");
    CHECK(ok_round, "q4_0r: |x - H deq|^2 <= sum 32 d^2 (rotate back to the model domain)");
    CHECK(ok_att, "q4_0r: kv_dot(row, H q) = q . (H deq(row))");
    CHECK(ok_out, "q4_0r: H (w deq(v)) = w H deq(v) (output rotated back)");
}

/* ---- the rotation modifiers: any format + rot / roth ---------------------------------------- */

/* kv_rotate against the float64 block-diagonal Hadamard matrix, and the byte-level definition
 * F+r(x) = F(R x) for every rotated format at several h; the attention recipe in the rotated
 * domain; q4_0r = q4_0+roth byte for byte. */
static void test_rotations(void) {
    uint64_t rs = 41;
    /* R x in float64: entry i of block B is sum_k (-1)^popcount(i & k) x[B + k] / sqrt(b) */
    static const int hs[7] = {8, 64, 128, 192, 256, 320, 384};
    static const int mods[3] = { KV_ROT_B, KV_ROT_H, KV_ROT_P };
    int ok_ref = 1, ok_self = 1;
    for (int r = 0; r < 3; r++)
        for (int hi = 0; hi < 7; hi++) {
            int h = hs[hi];
            kv_fmt f = (kv_fmt)(KV_F32 | mods[r]);
            int b = kv_rot_block(f, h);
            if (b == 0) { ok_ref &= r == 1 && h % 64 == 0 && (h & (h - 1)); continue; }   /* roth: 192, 320, 384 */
            if (r == 2 && b != (h & -h)) ok_ref = 0;
            float x[384], y[384];
            rng_vector(&rs, x, h);
            memcpy(y, x, sizeof(float) * h);
            kv_rotate(f, y, h);
            double amax = 0;
            for (int i = 0; i < h; i++) amax = fmax(amax, fabs(x[i]));
            for (int i = 0; i < h; i++) {
                int B = i / b * b;
                double want = 0;
                for (int k = 0; k < b; k++)
                    want += (__builtin_popcount((unsigned)((i - B) & k)) % 2 ? -1.0 : 1.0) * x[B + k];
                want /= sqrt((double)b);
                if (fabs(y[i] - want) > 1e-6 * amax * sqrt((double)b)) ok_ref = 0;
            }
            kv_rotate(f, y, h);
            for (int i = 0; i < h; i++)
                if (fabsf(y[i] - x[i]) > 1e-6f * (float)amax) ok_self = 0;
        }
    CHECK(ok_ref, "kv_rotate (+rot blocks of min(64, h), +roth whole head, +rotp blocks of h & -h) = the float64 "
          "Hadamard product, h 8..384");
    CHECK(ok_self, "kv_rotate twice = identity within 1e-6");

    int ok_def = 1, ok_deq = 1, ok_dot = 1, ok_axpy = 1, n = 0;
    for (int f = 0; f < KV_NFMT; f++)
        for (int r = 0; r < 3; r++) {
            kv_fmt fr = (kv_fmt)(f | mods[r]);
            if (!kv_fmt_valid(fr)) continue;
            for (int hi = 0; hi < 7; hi++) {
                int h = hs[hi];
                if (kv_row_bytes(fr, h) == 0) continue;
                float x[384], xr[384], y1[384], y2[384], q[384], qr[384], o1[384] = {0}, o2[384] = {0};
                uint8_t a[1600], b[1600];
                rng_vector(&rs, x, h);
                for (int i = 0; i < h; i++) q[i] = rng_unit(&rs);
                memcpy(xr, x, sizeof(float) * h);
                kv_rotate(fr, xr, h);
                kv_quantize(fr, x, a, h);
                kv_quantize((kv_fmt)f, xr, b, h);
                size_t rb = kv_row_bytes(fr, h);
                ok_def &= rb == kv_row_bytes((kv_fmt)f, h) && memcmp(a, b, rb) == 0;
                kv_dequantize(fr, a, y1, h);
                kv_dequantize((kv_fmt)f, a, y2, h);
                ok_deq &= memcmp(y1, y2, sizeof(float) * h) == 0;
                /* scores: kv_dot(row, R q) close to q . (R deq(row)) (model domain) */
                memcpy(qr, q, sizeof(float) * h);
                kv_rotate(fr, qr, h);
                kv_rotate(fr, y2, h);                       /* y2 now in the model domain */
                double s1 = kv_dot(fr, a, qr, h), s2 = dot_d(q, y2, h);
                if (fabs(s1 - s2) > 1e-5 * (sqrt(dot_d(q, q, h) * dot_d(y2, y2, h)) + 1e-30)) ok_dot = 0;
                /* output: R (w deq(row)) = w (R deq(row)) */
                kv_axpy(fr, a, 0.75f, o1, h);
                kv_rotate(fr, o1, h);
                for (int i = 0; i < h; i++) o2[i] = 0.75f * y2[i];
                if (sqrt(fmax(0, dot_d(o1, o1, h) - 2 * dot_d(o1, o2, h) + dot_d(o2, o2, h))) >
                    1e-5 * sqrt(dot_d(o2, o2, h)) + 1e-30) ok_axpy = 0;
                n++;
            }
        }
    CHECK(ok_def && n > 100, "every F+rot / F+roth / F+rotp: kv_quantize(F+r, x) = kv_quantize(F, kv_rotate(x)) byte for byte "
          "(%d format x h cases)", n);
    CHECK(ok_deq, "every rotated format decodes as its base (the stored, rotated domain)");
    CHECK(ok_dot, "every rotated format: kv_dot(row, R q) = q . R deq(row)");
    CHECK(ok_axpy, "every rotated format: R kv_axpy(row) = w R deq(row)");

    /* q4_0r is one spelling of q4_0+roth */
    int same = 1;
    for (int t = 0; t < 40; t++) {
        int h = 32 << (t % 6);
        float x[1024];
        uint8_t a[600], b[600];
        rng_vector(&rs, x, h);
        kv_quantize(KV_Q4_0R, x, a, h);
        kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_H), x, b, h);
        same &= kv_row_bytes(KV_Q4_0R, h) == kv_row_bytes((kv_fmt)(KV_Q4_0 | KV_ROT_H), h) &&
                memcmp(a, b, kv_row_bytes(KV_Q4_0R, h)) == 0;
    }
    CHECK(same, "q4_0r bytes = q4_0+roth bytes, h 32..1024");
    /* +rot and +roth differ above 64 */
    float x[128];
    uint8_t a[72], b[72];
    rng_vector(&rs, x, 128);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_B), x, a, 128);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_H), x, b, 128);
    CHECK(memcmp(a, b, 72) != 0, "q4_0+rot and q4_0+roth store different bytes at h = 128");
    /* +rotp is +roth at a power of two and +rot at 192; at 384 (3 x 128) it is neither */
    float x3[384];
    uint8_t p1[216], p2[216];
    rng_vector(&rs, x3, 384);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_P), x, a, 128);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_H), x, b, 128);
    int same_h = memcmp(a, b, 72) == 0;
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_P), x3, p1, 192);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_B), x3, p2, 192);
    int same_b = memcmp(p1, p2, 108) == 0;
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_P), x3, p1, 384);
    kv_quantize((kv_fmt)(KV_Q4_0 | KV_ROT_B), x3, p2, 384);
    CHECK(same_h && same_b && memcmp(p1, p2, 216) != 0,
          "q4_0+rotp = q4_0+roth at 128, = q4_0+rot at 192, differs from q4_0+rot at 384");
}

/* ---- fp8 ---------------------------------------------------------------------------------- */

static void test_fp8(void) {
    const float p9 = 0.001953125f;                      /* 2^-9, smallest subnormal */
    struct { float x; uint8_t b; const char *what; } c[] = {
        {0.0f, 0x00, "+0"}, {-0.0f, 0x80, "-0"}, {1.0f, 0x38, "1 = 2^0 (e=7)"}, {0.5f, 0x30, "0.5"},
        {-1.0f, 0xb8, "-1"}, {448.0f, 0x7e, "448 = 1.75 * 2^8"}, {-448.0f, 0xfe, "-448"},
        {p9, 0x01, "2^-9"}, {7 * p9, 0x07, "7 * 2^-9 (largest subnormal)"}, {0.015625f, 0x08, "2^-6 (smallest normal)"},
        {0.5f * p9, 0x00, "2^-10: tie -> 0 (even)"}, {1.5f * p9, 0x02, "1.5 * 2^-9: tie -> 2"},
        {0.25f * p9, 0x00, "2^-11 -> 0"}, {0.5f * p9 * 1.0001f, 0x01, "just above 2^-10 -> 2^-9"},
        {7.5f * p9, 0x08, "7.5 * 2^-9: tie -> 2^-6 (carry into the exponent)"},
        {1.0625f, 0x38, "1 + 1/16: tie -> 1 (even)"}, {1.1875f, 0x3a, "1 + 3/16: tie -> 1.25 (even)"},
        {1.07f, 0x39, "1.07 -> 1.125"}, {1.9375f, 0x40, "1.9375: tie -> 2"},
        {424.0f, 0x7d, "424 -> 416"}, {432.0f, 0x7e, "432: tie -> 448 (even)"}, {440.0f, 0x7e, "440 -> 448"},
        {449.0f, 0x7e, "449 saturates"}, {500.0f, 0x7e, "500 saturates"}, {1e30f, 0x7e, "1e30 saturates"},
        {-1e9f, 0xfe, "-1e9 saturates"}, {INFINITY, 0x7e, "+inf saturates"}, {-INFINITY, 0xfe, "-inf saturates"},
        {NAN, 0x7f, "NaN"}, {3.0f, 0x44, "3 = 1.5 * 2^1"}, {-0.09375f, 0x9c, "-0.09375 = -1.5 * 2^-4"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint8_t got = kv_fp8_from_f32(c[i].x);
        CHECK(got == c[i].b, "fp8 encode %s: 0x%02x (got 0x%02x)", c[i].what, c[i].b, got);
    }
    CHECK(kv_fp8_from_f32(-NAN) == 0xff, "fp8 encode -NaN = 0xff");
    CHECK(isnan(kv_fp8_to_f32(0x7f)) && isnan(kv_fp8_to_f32(0xff)), "fp8 0x7f / 0xff decode to NaN");
    CHECK(kv_fp8_to_f32(0x7e) == 448.0f && kv_fp8_to_f32(0xfe) == -448.0f && kv_fp8_to_f32(0x01) == p9 &&
          kv_fp8_to_f32(0x38) == 1.0f && kv_fp8_to_f32(0x0f) == 0.029296875f && kv_fp8_to_f32(0x78) == 256.0f &&
          kv_fp8_to_f32(0x77) == 240.0f && signbit(kv_fp8_to_f32(0x80)) && kv_fp8_to_f32(0x80) == 0.0f,
          "fp8 decode: 448, -448, 2^-9, 1, 1.875*2^-6, 256, 240, -0");
    int ok_rt = 1, ok_mono = 1;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f) continue;
        if (kv_fp8_from_f32(kv_fp8_to_f32((uint8_t)b)) != b) ok_rt = 0;
        if ((b & 0x7f) > 0 && !(fabsf(kv_fp8_to_f32((uint8_t)b)) > fabsf(kv_fp8_to_f32((uint8_t)(b - 1)))))
            ok_mono = 0;
    }
    CHECK(ok_rt, "fp8: encode(decode(b)) = b for all 254 non-NaN codes");
    CHECK(ok_mono, "fp8: magnitudes strictly increase with the code");
    /* row form: h bytes, one per value */
    float x[4] = {1.0f, -448.0f, 1000.0f, p9};
    uint8_t row[4], want[4] = {0x38, 0xfe, 0x7e, 0x01};
    float y[4];
    CHECK(kv_quantize(KV_FP8, x, row, 4) == 0 && same_bytes(row, want, 4, "fp8 row"), "fp8 row bytes");
    kv_dequantize(KV_FP8, row, y, 4);
    CHECK(y[0] == 1.0f && y[1] == -448.0f && y[2] == 448.0f && y[3] == p9, "fp8 row dequantises");
}

/* ---- q4_1 q5_0 q5_1 iq4_nl (llama.cpp's cache types) -------------------------------------- */

/* quantise x[h] as f, compare with want[kv_row_bytes(f, h)]; then the decoded values with y_want[h]
 * (NULL: skip). */
static void bytes_case(kv_fmt f, const char *what, const float *x, int h, const uint8_t *want, const float *y_want) {
    uint8_t row[1100];
    float y[256];
    size_t nb = kv_row_bytes(f, h);
    memset(row, 0xaa, sizeof row);
    CHECK(nb > 0 && kv_quantize(f, x, row, h) == 0 && same_bytes(row, want, nb, what) && row[nb] == 0xaa,
          "%s %s: bytes (%zu)", kv_fmt_name(f), what, nb);
    if (!y_want) return;
    kv_dequantize(f, want, y, h);
    int ok = 1;
    for (int i = 0; i < h; i++)
        if (!same_float_bits(y[i], y_want[i])) {
            if (ok) printf("  %s %s: value %d is %a, want %a\n", kv_fmt_name(f), what, i, y[i], y_want[i]);
            ok = 0;
        }
    CHECK(ok, "%s %s: decoded values", kv_fmt_name(f), what);
}

static void test_ggml_types(void) {
    /* q4_1, h = 64. Block 0: x = u - 2 with u[0] = 0 (min), u[1] = 15 (max): min = -2, d = 15/15 = 1
     * (0x3c00), m = -2 (0xc000), id = 1; q = trunc(u + 0.5): 0.5 -> 1, 1.49 -> 1, 14.6 -> 15,
     * 7.5 -> 8 (half up), 3 -> 3; u[16] = 2.5 -> 3, u[17] = 0.49 -> 0, 5 -> 5 (x - min is exact).
     * qs[j] = q[j] | q[j + 16] << 4. Block 1: constant 3: d = 0, m = 3 (0x4200), q = 0: decodes
     * to exactly 3 (unlike q4_0). */
    {
        float x[64], y[64];
        const float u0[6] = {0, 15, 0.5f, 1.49f, 14.6f, 7.5f};
        for (int j = 0; j < 16; j++) x[j] = (j < 6 ? u0[j] : 3.0f) - 2.0f;
        for (int j = 16; j < 32; j++) x[j] = (j == 16 ? 2.5f : j == 17 ? 0.49f : 5.0f) - 2.0f;
        for (int j = 32; j < 64; j++) x[j] = 3.0f;
        uint8_t want[40] = {0x00, 0x3c, 0x00, 0xc0, 0x30, 0x0f, 0x51, 0x51, 0x5f, 0x58};
        for (int j = 10; j < 20; j++) want[j] = 0x53;
        want[20] = 0x00; want[21] = 0x00; want[22] = 0x00; want[23] = 0x42;   /* d = 0, m = 3 */
        const int q[32] = {0, 15, 1, 1, 15, 8, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] - 2.0f;
        for (int j = 32; j < 64; j++) y[j] = 3.0f;
        bytes_case(KV_Q4_1, "hand-worked (d = 1, m = -2; constant block)", x, 64, want, y);
    }
    /* q5_0, h = 32: m = x[0] = -16 -> d = -16 / -16 = 1, id = 1, q = min(31, trunc(x + 16.5)):
     * -16 -> 0, 15 -> 31, 15.5 -> 32 -> 31, -0.5 -> 16, 0.49 -> 16, 0.5 -> 17, -15.5 -> 1, 0 -> 16;
     * x[16] = 7 -> 23, x[17] = -7 -> 9. qs = low nibbles; qh bit i = bit 4 of q[i]:
     * 0 1 1 1 1 1 0 1 | 1 x 8 | 1 0 1 1 1 1 1 1 | 1 x 8 -> be ff fd ff. */
    {
        float x[32] = {-16, 15, 15.5f, -0.5f, 0.49f, 0.5f, -15.5f};
        x[16] = 7; x[17] = -7;
        uint8_t want[22] = {0x00, 0x3c, 0xbe, 0xff, 0xfd, 0xff, 0x70, 0x9f, 0x0f, 0x00, 0x00, 0x01, 0x01};
        float y[32];
        const int q[32] = {0, 31, 31, 16, 16, 17, 1, 16, 16, 16, 16, 16, 16, 16, 16, 16, 23, 9};
        for (int j = 0; j < 32; j++) y[j] = (float)((j < 18 ? q[j] : 16) - 16);
        bytes_case(KV_Q5_0, "hand-worked (m = -16, d = 1)", x, 32, want, y);
        /* the first of +m / -m decides the sign of d: 3 before -3 -> d = 3/-16 (fp16 0xb200) */
        float x2[32] = {3, -3};
        uint8_t row[22];
        kv_quantize(KV_Q5_0, x2, row, 32);
        CHECK(row[0] == 0x00 && row[1] == 0xb2, "q5_0: +3 before -3 gives d = -0.1875 (0xb200)");
        float x3[32] = {-3, 3};
        kv_quantize(KV_Q5_0, x3, row, 32);
        CHECK(row[0] == 0x00 && row[1] == 0x32, "q5_0: -3 before +3 gives d = +0.1875 (0x3200)");
    }
    /* q5_1, h = 32: min 0, max 31 -> d = 1, m = 0; q = trunc(x + 0.5): 16.5 -> 17, 30.7 -> 31,
     * 0.49 -> 0, 20 -> 20, 1 -> 1. qh: 0 1 1 1 0 1 1 1 | ff | 0 1 1 1 1 1 1 1 | ff. */
    {
        float x[32];
        for (int j = 0; j < 32; j++) x[j] = 20.0f;
        x[0] = 0; x[1] = 31; x[2] = 16.5f; x[3] = 30.7f; x[4] = 0.49f; x[16] = 1.0f;
        uint8_t want[24] = {0x00, 0x3c, 0x00, 0x00, 0xee, 0xff, 0xfe, 0xff, 0x10, 0x4f, 0x41, 0x4f, 0x40};
        for (int j = 13; j < 24; j++) want[j] = 0x44;
        float y[32];
        for (int j = 0; j < 32; j++) y[j] = 20.0f;
        y[0] = 0; y[1] = 31; y[2] = 17; y[3] = 31; y[4] = 0; y[16] = 1;
        bytes_case(KV_Q5_1, "hand-worked (d = 1, m = 0)", x, 32, want, y);
    }
    /* iq4_nl (no scale search, as llama.cpp's cache): a block whose values are the grid itself
     * (x[j] = K[j % 16], so m = K[0] = -127 comes first): d0 = m / K[0] = 1, the indices of x / 1
     * are j % 16, sumqx = sumq2 = sum x^4, d = 1 (0x3c00); qs[j] = j | j << 4. At half the size
     * every product is halved exactly: d0 = d = 0.5 (0x3800), same qs. */
    {
        static const float K[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        float x[64], y[64];
        uint8_t want[36];
        for (int j = 0; j < 32; j++) { x[j] = K[j % 16]; x[32 + j] = 0.5f * K[j % 16]; }
        want[0] = 0x00; want[1] = 0x3c; want[18] = 0x00; want[19] = 0x38;
        for (int j = 0; j < 16; j++) want[2 + j] = want[20 + j] = (uint8_t)(j | j << 4);
        for (int j = 0; j < 64; j++) y[j] = x[j];
        bytes_case(KV_IQ4_NL, "grid values at scale 1 and 1/2", x, 64, want, y);
        /* all zero (amax < 1e-15): d = 0, q = the index of 0 = 8 (1 - 0 < 0 - -10 fails: upper) */
        float z[32] = {0};
        z[3] = 1e-16f;
        uint8_t wz[18] = {0, 0};
        for (int j = 0; j < 16; j++) wz[2 + j] = 0x88;
        bytes_case(KV_IQ4_NL, "amax < 1e-15 -> d = 0, q = 8", z, 32, wz, NULL);
        /* one value 1, the rest 0: m = 1, d0 = 1 / -127, x * (1 / d0) = -127 -> q 0, the zeros
         * -> -0 -> q 8 (the upper of -10 / 1 on no tie: 1 is nearer); sumqx = 1 * -127 * 1,
         * sumq2 = 1 * 127^2 (the zeros weigh 0): d = -1/127, fp16 0xa008. The 7-step search of the
         * model-file quantiser would store d = 1/113 (0x2088) and q 15 instead (the first fit
         * maps 1 to 113; no trial beats it strictly). */
        float e[32] = {1};
        uint8_t we[18] = {0x08, 0xa0, 0x80};
        for (int j = 1; j < 16; j++) we[2 + j] = 0x88;
        float ye[32];
        float de = -0x1.02p-7f;                             /* fp16 0xa008 */
        ye[0] = de * -127.0f;
        for (int j = 1; j < 32; j++) ye[j] = de;
        bytes_case(KV_IQ4_NL, "one value 1: d = -1/127, no scale search", e, 32, we, ye);
    }
}

/* ---- e5m2 and E2M1 ------------------------------------------------------------------------ */

static void test_e5m2_e2m1(void) {
    const float p16 = 0x1p-16f;                         /* smallest e5m2 subnormal */
    struct { float x; uint8_t b; const char *what; } c[] = {
        {0.0f, 0x00, "+0"}, {-0.0f, 0x80, "-0"}, {1.0f, 0x3c, "1 (e = 15)"}, {-2.0f, 0xc0, "-2"},
        {3.0f, 0x42, "3 = 1.5 * 2^1"}, {448.0f, 0x5f, "448 = 1.75 * 2^8"}, {0.1f, 0x2e, "0.1 -> 0.09375"},
        {1.125f, 0x3c, "1.125: tie -> 1 (even)"}, {1.375f, 0x3e, "1.375: tie -> 1.5 (even)"},
        {1.126f, 0x3d, "1.126 -> 1.25"}, {1.875f, 0x40, "1.875: tie -> 2 (carry into e)"},
        {57344.0f, 0x7b, "57344 = 1.75 * 2^15 (largest)"}, {61439.0f, 0x7b, "61439 -> 57344"},
        {61440.0f, 0x7b, "61440: tie with 2^16 saturates"}, {1e9f, 0x7b, "1e9 saturates"},
        {-1e30f, 0xfb, "-1e30 saturates"}, {INFINITY, 0x7b, "+inf saturates"}, {-INFINITY, 0xfb, "-inf saturates"},
        {NAN, 0x7f, "NaN"}, {p16, 0x01, "2^-16"}, {0.5f * p16, 0x00, "2^-17: tie -> 0"},
        {1.5f * p16, 0x02, "1.5 * 2^-16: tie -> 2"}, {3.5f * p16, 0x04, "3.5 * 2^-16: tie -> 2^-14 (normal)"},
        {0x1p-14f, 0x04, "2^-14 (smallest normal)"}, {3.0f * p16, 0x03, "3 * 2^-16 (largest subnormal)"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint8_t got = kv_e5m2_from_f32(c[i].x);
        CHECK(got == c[i].b, "e5m2 encode %s: 0x%02x (got 0x%02x)", c[i].what, c[i].b, got);
    }
    int ok_dec = 1, ok_rt = 1;
    for (int b = 0; b < 256; b++) {
        float v = kv_e5m2_to_f32((uint8_t)b), want = fp16_to_f32((uint16_t)(b << 8));
        if (!same_float_bits(v, want)) ok_dec = 0;
        if ((b & 0x7f) < 0x7c && kv_e5m2_from_f32(v) != b) ok_rt = 0;
    }
    CHECK(ok_dec, "e5m2 decode = the half with these 8 high bits, all 256 codes");
    CHECK(ok_rt, "e5m2: encode(decode(b)) = b for all 248 finite codes");
    CHECK(isinf(kv_e5m2_to_f32(0x7c)) && isnan(kv_e5m2_to_f32(0x7d)) && kv_e5m2_to_f32(0x7b) == 57344.0f,
          "e5m2 decode: 0x7c inf, 0x7d NaN, 0x7b 57344");
    float x[4] = {1.0f, -57344.0f, 1e6f, p16}, y[4];
    uint8_t row[4], want[4] = {0x3c, 0xfb, 0x7b, 0x01};
    CHECK(kv_quantize(KV_E5M2, x, row, 4) == 0 && same_bytes(row, want, 4, "e5m2 row"), "e5m2 row bytes");
    kv_dequantize(KV_E5M2, row, y, 4);
    CHECK(y[0] == 1.0f && y[1] == -57344.0f && y[2] == 57344.0f && y[3] == p16, "e5m2 row dequantises");

    /* E2M1: 0 0.5 1 1.5 2 3 4 6; the midpoints tie to the even code (0 2 4 6) */
    struct { float x; uint8_t q; } e[] = {
        {0.0f, 0}, {-0.0f, 8}, {0.25f, 0}, {0.2500001f, 1}, {-0.25f, 8}, {-0.3f, 9}, {0.5f, 1}, {0.75f, 2},
        {0.7499999f, 1}, {1.25f, 2}, {1.2500001f, 3}, {1.75f, 4}, {2.5f, 4}, {2.5000002f, 5}, {3.5f, 6},
        {5.0f, 6}, {5.0000005f, 7}, {6.0f, 7}, {7.9f, 7}, {1e30f, 7}, {INFINITY, 7}, {-INFINITY, 15},
        {NAN, 7}, {-3.0f, 13}, {-6.5f, 15}, {1e-30f, 0},
    };
    int ok_e = 1;
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        if (kv_e2m1_from_f32(e[i].x) != e[i].q) {
            printf("  e2m1(%a) = %d, want %d\n", e[i].x, kv_e2m1_from_f32(e[i].x), e[i].q);
            ok_e = 0;
        }
    CHECK(ok_e, "e2m1 encode: RNE at the 7 midpoints, saturation at 6, sign kept (%d cases)", (int)(sizeof e / sizeof e[0]));
    const float vals[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    int ok_d = 1;
    for (int q = 0; q < 16; q++) {
        float v = kv_e2m1_to_f32((uint8_t)q);
        if (!same_float_bits(v, q < 8 ? vals[q] : -vals[q - 8]) || kv_e2m1_from_f32(v) != q) ok_d = 0;
    }
    CHECK(ok_d, "e2m1 decode: the 16 codes (-0 included) and encode(decode(q)) = q");
}

/* ---- e4m3s / e5m2s ------------------------------------------------------------------------ */

static void test_scaled_fp8(void) {
    /* amax 448 -> s = 1: the fp8 codes of x, then s = 1.0f (00 00 80 3f) */
    {
        float x[4] = {448.0f, -1.0f, 0.5f, 0.0f}, y[4] = {448.0f, -1.0f, 0.5f, 0.0f};
        uint8_t want[8] = {0x7e, 0xb8, 0x30, 0x00, 0x00, 0x00, 0x80, 0x3f};
        bytes_case(KV_E4M3S, "amax 448 -> s = 1", x, 4, want, y);
    }
    /* amax 2 -> s = f32(2/448); x / s: 2 -> 448 (0x7e), 1 -> 224 (1.75 * 2^7: 0x76), -0.25 -> -56
     * (0xe6), 1/64 -> 3.5 (0x46); value = code * s */
    {
        float x[4] = {2.0f, 1.0f, -0.25f, 0.015625f}, s = 2.0f / 448.0f, y[4];
        uint8_t want[8] = {0x7e, 0x76, 0xe6, 0x46};
        uint32_t sb = fp16_f32_bits(s);
        for (int k = 0; k < 4; k++) want[4 + k] = (uint8_t)(sb >> (8 * k));
        y[0] = 448.0f * s; y[1] = 224.0f * s; y[2] = -56.0f * s; y[3] = 3.5f * s;
        bytes_case(KV_E4M3S, "amax 2 -> s = 2/448", x, 4, want, y);
    }
    /* all zero: s = 0, codes 0 */
    {
        float x[5] = {0}, y[5] = {0};
        uint8_t want[9] = {0};
        bytes_case(KV_E4M3S, "all zero -> s = 0", x, 5, want, y);
        bytes_case(KV_E5M2S, "all zero -> s = 0", x, 5, want, y);
    }
    /* e5m2s: amax 57344 -> s = 1; 1.125 ties to 1 */
    {
        float x[4] = {57344.0f, -1.0f, 1.125f, 0.0f}, y[4] = {57344.0f, -1.0f, 1.0f, 0.0f};
        uint8_t want[8] = {0x7b, 0xbc, 0x3c, 0x00, 0x00, 0x00, 0x80, 0x3f};
        bytes_case(KV_E5M2S, "amax 57344 -> s = 1", x, 4, want, y);
    }
    /* random rows: relative error of the scaled element <= 2^-4 (e4m3) / 2^-3 (e5m2) of |x| for the
     * normal range, and the largest element maps to the format's maximum */
    uint64_t rs = 6;
    int ok4 = 1, ok5 = 1, okmax = 1;
    for (int t = 0; t < 200; t++) {
        int h = 64 << (t % 3);
        float x[256], y[256];
        uint8_t row[260];
        rng_vector(&rs, x, h);
        for (int e5 = 0; e5 < 2; e5++) {
            kv_fmt f = e5 ? KV_E5M2S : KV_E4M3S;
            kv_quantize(f, x, row, h);
            kv_dequantize(f, row, y, h);
            float amax = 0, s;
            int imax = 0;
            for (int i = 0; i < h; i++) if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); imax = i; }
            memcpy(&s, row + h, 4);
            if (s != amax / (e5 ? 57344.0f : 448.0f) || (row[imax] & 0x7f) != (e5 ? 0x7b : 0x7e)) okmax = 0;
            for (int i = 0; i < h; i++) {
                double err = fabs((double)x[i] - y[i]), lim = (e5 ? 0x1p-3 : 0x1p-4) * fabs(x[i]) * 1.0001 +
                             (e5 ? 0x1p-17 : 0x1p-10) * s + 1e-30;
                if (err > lim) { if (e5) ok5 = 0; else ok4 = 0; }
            }
        }
    }
    CHECK(ok4, "e4m3s random: |x - deq| <= 2^-4 |x| (+ half a subnormal step of s)");
    CHECK(ok5, "e5m2s random: |x - deq| <= 2^-3 |x| (+ half a subnormal step of s)");
    CHECK(okmax, "e4m3s / e5m2s: s = amax / max finite (f32), the largest element gets the largest code");
}

/* ---- nvfp4 / mxfp4 ------------------------------------------------------------------------ */

static void test_fp4(void) {
    /* nvfp4, h = 80 (5 blocks of 16). qs[j] = q[j] | q[j + 8] << 4.
     * block 0: amax 6 -> s = e4m3(6/6 = 1) = 0x38; the midpoints tie to even codes:
     *   6 .25 .75 1.25 1.75 2.5 3.5 5 -> 7 0 2 2 4 4 6 6; negated -> 15 8 10 10 12 12 14 14.
     * block 1: amax 0.375 -> s = 2^-4 (0x18); x / s: 6 -> 7, 0.5 -> 1, -1.6 -> 11 (-1.5), 0.25 -> 0.
     * block 2: amax 6.375 -> amax / 6 = 1.0625, an e4m3 tie -> 1.0 (0x38): 6.375 saturates to 6 (7).
     * block 3: all zero -> s = 0, codes 0.
     * block 4: amax 6 * 2^-11 -> amax / 6 = 2^-11 rounds to e4m3 0 -> s = 0: everything flushes. */
    {
        float x[80] = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -6, -.25f, -.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5};
        x[16] = 0.375f; x[17] = 0.03125f; x[18] = -0.1f; x[19] = 0.015625f;
        x[32] = 6.375f;
        x[64] = 6.0f * 0x1p-11f; x[65] = -0.001f;
        uint8_t want[45] = {0x38, 0xf7, 0x80, 0xa2, 0xa2, 0xc4, 0xc4, 0xe6, 0xe6,
                            0x18, 0x07, 0x01, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00,
                            0x38, 0x07};
        float y[80] = {6, 0, 1, 1, 2, 2, 4, 4, -6, -0.0f, -1, -1, -2, -2, -4, -4};
        y[16] = 0.375f; y[17] = 0.03125f; y[18] = -0.09375f; y[19] = 0.0f;
        y[32] = 6.0f;
        bytes_case(KV_NVFP4, "hand-worked (ties, scale rounding, saturation, flush)", x, 80, want, y);
    }
    /* mxfp4, h = 128 (4 blocks of 32). qs[j] = q[j] | q[j + 16] << 4.
     * block 0: amax 7.9 -> floor(log2) = 2, E = 0 (X = 127 = 0x7f); the nvfp4 block 0 values, then
     *   -0 -> 8, 0.1 -> 0, -0.3 -> 9, 7.9 -> 7 (saturated).
     * block 1: amax 0x1.fffffep+3 (just below 16): floor(log2) = 3 exactly (a rounded log2f would
     *   say 4), E = 1 (0x80); x / 2: 7.99999 -> 7, 3 -> 1.5 (3), -5 -> -2.5 tie -> -2 (12), 0.5 -> 0.25 tie -> 0.
     * block 2: all zero -> E = -127 (0x00), codes 0.
     * block 3: amax 2^-126 -> E = -128 clamps to -127: x * 2^127: 2^-126 -> 2 (4), -2^-127 -> -1 (10). */
    {
        float x[128] = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -6, -.25f, -.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5,
                        -0.0f, 0.1f, -0.3f, 7.9f};
        x[32] = 0x1.fffffep+3f; x[33] = 3.0f; x[34] = -5.0f; x[35] = 0.5f;
        x[96] = 0x1p-126f; x[97] = -0x1p-127f;
        uint8_t want[68] = {0x7f, 0x87, 0x00, 0x92, 0x72, 0x04, 0x04, 0x06, 0x06, 0x0f, 0x08, 0x0a, 0x0a, 0x0c, 0x0c, 0x0e, 0x0e,
                            0x80, 0x07, 0x03, 0x0c};
        want[51] = 0x00; want[52] = 0x04; want[53] = 0x0a;
        float y[128] = {6, 0, 1, 1, 2, 2, 4, 4, -6, -0.0f, -1, -1, -2, -2, -4, -4, -0.0f, 0, -0.5f, 6};
        y[32] = 12.0f; y[33] = 3.0f; y[34] = -4.0f; y[35] = 0.0f;
        y[96] = 0x1p-126f; y[97] = -0x1p-127f;
        bytes_case(KV_MXFP4, "hand-worked (ties, exact floor(log2), clamped exponent)", x, 128, want, y);
    }
    /* random: every element is within half a step of its scaled grid, or saturated */
    uint64_t rs = 7;
    int ok_nv = 1, ok_mx = 1;
    for (int t = 0; t < 200; t++) {
        float x[128], y[128];
        uint8_t row[128];
        rng_vector(&rs, x, 128);
        kv_quantize(KV_NVFP4, x, row, 128);
        kv_dequantize(KV_NVFP4, row, y, 128);
        for (int b = 0; b < 8; b++) {
            float s = kv_fp8_to_f32(row[9 * b]);
            for (int j = 0; j < 16; j++) {
                double a = fabs(x[16 * b + j]) / s, err = fabs((double)x[16 * b + j] - y[16 * b + j]) / s;
                double step = a < 2 ? 0.5 : a < 4 ? 1 : 2;
                if (s > 0 && !(err <= step / 2 * 1.000001 || (a > 6 && fabs(y[16 * b + j]) == 6 * s))) ok_nv = 0;
            }
        }
        kv_quantize(KV_MXFP4, x, row, 128);
        kv_dequantize(KV_MXFP4, row, y, 128);
        for (int b = 0; b < 4; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
            double s = ldexp(1.0, row[17 * b] - 127);
            if (!(amax >= 4 * s && amax < 8 * s)) ok_mx = 0;   /* 2^E = 2^floor(log2 amax) / 4 */
            for (int j = 0; j < 32; j++) {
                double a = fabs(x[32 * b + j]) / s, err = fabs((double)x[32 * b + j] - y[32 * b + j]) / s;
                double step = a < 2 ? 0.5 : a < 4 ? 1 : 2;
                if (!(err <= step / 2 || (a > 6 && fabs(y[32 * b + j]) == 6 * s))) ok_mx = 0;
            }
        }
    }
    CHECK(ok_nv, "nvfp4 random: each value within half an E2M1 step of s, or saturated at 6 s");
    CHECK(ok_mx, "mxfp4 random: 4 * 2^E <= amax < 8 * 2^E, each value within half a step, or saturated");
}

/* ---- fixtures: tests/fixtures/kv, made by tests/ref/make_kv_fixtures.py ------------------- */

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) { free(buf); buf = NULL; }
    fclose(f);
    *n = buf ? (size_t)len : 0;
    return buf;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* The quantisers against fixture files (STRATA_KV_FIXTURES or tests/fixtures/kv): an input file
 * (SKVI: h, rows, then rows x h f32) and FMT.bin for each of fmts[n_fmt] (SKVQ: h, rows, row bytes,
 * then every row's bytes and its decoded values), made by tests/ref/make_kv_fixtures.py with the
 * gguf package's quantisers where it has them and its own reference ones otherwise (the rotated
 * formats with its own float32 transform, checked there against float64; tq3 / tq4 with its own
 * Lloyd-Max tables and quantiser). Checks kv_quantize's bytes and kv_dequantize's values (NaN = NaN). */
static void fixtures_check(const char *input, int want_h, int min_rows, const kv_fmt *fmts, size_t n_fmt) {
    const char *dir = getenv("STRATA_KV_FIXTURES");
    if (!dir) dir = "tests/fixtures/kv";
    char path[512];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, input);
    uint8_t *in = read_all(path, &n);
    CHECK(in && n >= 12 && !memcmp(in, "SKVI", 4), "fixture %s readable", path);
    if (!in || n < 12) { free(in); return; }
    int h = (int)rd32(in + 4), rows = (int)rd32(in + 8);
    CHECK(n == 12 + (size_t)rows * h * 4 && h == want_h && rows >= min_rows, "%s: %d rows of h = %d", input, rows, h);
    if (n != 12 + (size_t)rows * h * 4 || h != want_h || h > 384) { free(in); return; }
    const float *x = (const float *)(void *)(in + 12);   /* [rows][h] */
    for (size_t fi = 0; fi < n_fmt; fi++) {
        kv_fmt f = fmts[fi];
        size_t rb = kv_row_bytes(f, h), m;
        snprintf(path, sizeof path, "%s/%s.bin", dir, kv_fmt_name(f));
        uint8_t *q = read_all(path, &m);
        int ok_hdr = q && m == 16 + (size_t)rows * (rb + 4 * (size_t)h) && !memcmp(q, "SKVQ", 4) &&
                     (int)rd32(q + 4) == h && (int)rd32(q + 8) == rows && rd32(q + 12) == rb;
        CHECK(ok_hdr, "fixture %s: %d rows of %zu bytes", path, rows, rb);
        if (!ok_hdr) { free(q); continue; }
        const uint8_t *want = q + 16;                                /* [rows][rb] */
        const float *yw = (const float *)(void *)(q + 16 + (size_t)rows * rb);
        int same = 0, same_deq = 0;
        for (int r = 0; r < rows; r++) {
            uint8_t row[600];                                        /* rb <= 408 (q8_0 at 384) */
            float y[384];                                            /* [h] */
            kv_quantize(f, x + (size_t)r * h, row, h);
            if (!memcmp(row, want + (size_t)r * rb, rb)) same++;
            else if (same == r) {
                size_t i = 0;
                while (row[i] == want[(size_t)r * rb + i]) i++;
                printf("  %s row %d: byte %zu is 0x%02x, want 0x%02x\n", kv_fmt_name(f), r, i, row[i], want[(size_t)r * rb + i]);
            }
            kv_dequantize(f, want + (size_t)r * rb, y, h);
            int ok = 1;
            for (int i = 0; i < h; i++) {
                float a = y[i], b;
                memcpy(&b, yw + (size_t)r * h + i, 4);
                if (!same_float_bits(a, b) && !(isnan(a) && isnan(b))) ok = 0;
            }
            same_deq += ok;
        }
        CHECK(same == rows, "%s: kv_quantize = the fixture's bytes for %d of %d rows of %d", kv_fmt_name(f), same, rows, h);
        CHECK(same_deq == rows, "%s: kv_dequantize of the fixture's bytes = its decoded values, %d of %d rows",
              kv_fmt_name(f), same_deq, rows);
        free(q);
    }
    free(in);
}

static void test_fixtures(void) {
    static const kv_fmt fmts[] = {KV_Q8_0, KV_Q4_0, KV_Q4_1, KV_Q5_0, KV_Q5_1, KV_IQ4_NL, KV_E5M2, KV_E4M3S, KV_E5M2S, KV_NVFP4, KV_MXFP4};
    fixtures_check("input.bin", 64, 160, fmts, sizeof fmts / sizeof fmts[0]);
}

static void test_fixtures_rot(void) {
    static const kv_fmt rot[] = {
        KV_Q8_0 | KV_ROT_B, KV_Q4_0 | KV_ROT_B, KV_Q4_0 | KV_ROT_H, KV_Q4_1 | KV_ROT_H, KV_Q5_1 | KV_ROT_B,
        KV_NVFP4 | KV_ROT_B, KV_E4M3S | KV_ROT_H, KV_MXFP4 | KV_ROT_H, KV_TQ3, KV_TQ4,
    };
    fixtures_check("rot-input.bin", 128, 61, rot, sizeof rot / sizeof rot[0]);
    /* +rotp at h = 384 = 3 x 128: blocks of 128 (llama.cpp's K rotation for such a head) */
    static const kv_fmt rotp[] = { KV_Q8_0 | KV_ROT_P, KV_Q4_0 | KV_ROT_P };
    fixtures_check("rotp-input.bin", 384, 20, rotp, sizeof rotp / sizeof rotp[0]);
}

/* ---- KIVI-style kivi2 / kivi4 (kivi.h) ---------------------------------------------------- */

static void test_kivi(void) {
    kv_fmt f = KV_F16;
    char name[40], err[300] = "";
    CHECK(kv_fmt_parse("kivi4", &f) == 0 && kivi_bits(f) == 4 && kivi_group(f) == 32 && kivi_residual(f) == 128 &&
          kv_fmt_is_kivi(f) && kv_fmt_valid(f) && !strcmp(kv_fmt_name(f), "kivi4"), "kivi4: 4 bits, G 32, R 128");
    kv_fmt_format(f, name, sizeof name);
    CHECK(!strcmp(name, "kivi4"), "kv_fmt_format(kivi4) = %s", name);
    CHECK(kv_fmt_parse("kivi2-g8-r16", &f) == 0 && kivi_bits(f) == 2 && kivi_group(f) == 8 && kivi_residual(f) == 16,
          "kivi2-g8-r16: 2 bits, G 8, R 16");
    kv_fmt_format(f, name, sizeof name);
    CHECK(!strcmp(name, "kivi2-g8-r16") && !strcmp(kv_fmt_name(f), "kivi2"), "kv_fmt_format round-trips: %s", name);
    CHECK(kv_fmt_parse("kivi4-r0", &f) == 0 && kivi_residual(f) == 0 && kivi_group(f) == 32 &&
          kv_fmt_parse("kivi2-g256", &f) == 0 && kivi_group(f) == 256 && kivi_residual(f) == 128,
          "kivi4-r0 and kivi2-g256 parse");
    const char *bad[] = {"kivi3", "kivi4-g12", "kivi4-g4", "kivi4-g512", "kivi4-r5000", "kivi4-r16-g8", "kivi4+rot",
                         "kivi4-g", "kivi4-", "kivi4-g16-", "kivi", "KIVI4"};
    int ok = 1;
    kv_fmt keep = KV_F16;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) ok &= kv_fmt_parse(bad[i], &keep) == -1 && keep == KV_F16;
    CHECK(ok, "kivi names refused: kivi3, -g12, -g4, -g512, -r5000, -r before -g, +rot, empty parameters");
    kv_mix m;
    CHECK(kv_mix_parse("kivi4+rot", &m, err, sizeof err) == -1 && strstr(err, "no rotation"), "mix kivi4+rot: %s", err);
    kv_fmt C[4];
    CHECK(kv_mix_parse("kivi2-g8-r16+f16@h1", &m, err, sizeof err) == 0 && kv_mix_cells(&m, 2, 2, C, err, sizeof err) == 0 &&
          kv_fmt_is_kivi(C[0]) && kivi_group(C[2]) == 8 && C[1] == KV_F16, "kivi in a per-head mix (%s)", err);
    kv_fmt_parse("kivi4", &f);
    CHECK(kv_fmt_check(f, 8, err, sizeof err) == 0 && kv_fmt_check(f, 96, err, sizeof err) == 0 &&
          kv_row_bytes(f, 64) == 0, "kivi4 fits h 8 and 96; it is no row format (kv_row_bytes 0)");
    CHECK(kv_fmt_check(f, 40, err, sizeof err) == -1 && strstr(err, "kivi4") && strstr(err, "40"), "kivi4 at h 40: %s", err);
    kv_fmt_parse("kivi4-g64", &f);
    CHECK(kv_fmt_check(f, 8, err, sizeof err) == -1 && strstr(err, "divides"), "kivi4-g64 at h 8: %s", err);
    /* boundaries: G 32, R 128 */
    kv_fmt_parse("kivi4", &f);
    CHECK(kivi_boundary(f, 0) == 0 && kivi_boundary(f, 158) == 0 && kivi_boundary(f, 159) == 32 &&
          kivi_boundary(f, 190) == 32 && kivi_boundary(f, 191) == 64, "kivi4 boundary: 0 until p 159, then 32, 64 at 191");
    /* bytes: kivi4 h 64: K group 32 x 64 x 4 / 8 + 256 = 1280 (40 a token), V 32 + 2 x 4 = 40; kivi2: 768 (24), 24 */
    kv_fmt f2;
    kv_fmt_parse("kivi2", &f2);
    CHECK(kivi_k_group_bytes(f, 64) == 1280 && kv_token_bytes(f, 64, 0) == 40 && kv_token_bytes(f, 64, 1) == 40 &&
          kivi_k_group_bytes(f2, 64) == 768 && kv_token_bytes(f2, 64, 0) == 24 && kv_token_bytes(f2, 64, 1) == 24 &&
          kv_token_bytes(f, 8, 1) == 4 + 4 && kv_reserve_bytes(f, 64, 0) == 128 + 40,
          "kivi bytes: kivi4 h 64 K 40 / V 40 a token, kivi2 24 / 24, kivi4 h 8 V 8; reserved f16 + quantised");
    /* by hand: kivi2, G 8, h 4; channel c of token t = t * (c + 1) * 0.5 - c: min -c, max 3.5 (c + 1) - c,
     * d = 3.5 (c + 1) / 3; channel 0: x = 0 0.5 .. 3.5, trunc(x * 3 / 3.5 + 0.5) = 0 0 1 1 2 2 3 3 */
    kv_fmt_parse("kivi2-g8-r0", &f);
    uint8_t rows[8][8], grp[8 * 4 * 2 / 8 + 16];
    for (int t = 0; t < 8; t++) {
        float x[4];
        for (int c = 0; c < 4; c++) x[c] = (float)t * (float)(c + 1) * 0.5f - (float)c;
        kv_quantize(KV_F16, x, rows[t], 4);
    }
    kivi_quant_k_group(f, rows[0], 8, 4, grp);
    static const unsigned want0[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    ok = 1;
    for (int t = 0; t < 8; t++) ok &= ((grp[t] >> 0) & 3u) == want0[t];   /* code (t, 0) = bit 8t of the codes */
    float y[8 * 4];
    kivi_dequant_k_rows(f, grp, 4, 0, 8, y);
    float d0 = fp16_to_f32(fp16_from_f32(3.5f / 3.0f));
    ok &= y[0] == 0.0f && y[4 * 7] == 3.0f * d0 && y[4 * 2] == d0;
    CHECK(ok, "kivi2 by hand: channel 0 codes 0 0 1 1 2 2 3 3, values q x fp16(3.5 / 3)");

    /* the fixtures: kivi{2,4}-g16.k.bin, kivi{2,4}.v.bin from the f16 values of input rows 0..79 */
    const char *dir = getenv("STRATA_KV_FIXTURES");
    if (!dir) dir = "tests/fixtures/kv";
    char path[512];
    size_t n;
    snprintf(path, sizeof path, "%s/input.bin", dir);
    uint8_t *in = read_all(path, &n);
    if (!in || n < 12 + 80 * 64 * 4 || rd32(in + 4) != 64) { CHECK(0, "kivi: %s readable with h 64", path); free(in); return; }
    const float *x = (const float *)(void *)(in + 12);
    static uint8_t r16[80][128];                                   /* [80][2h] the f16 rows */
    for (int r = 0; r < 80; r++) kv_quantize(KV_F16, x + (size_t)r * 64, r16[r], 64);
    for (int b = 2; b <= 4; b += 2)
        for (int v = 0; v < 2; v++) {
            char fname[40];
            snprintf(fname, sizeof fname, "kivi%d%s", b, v ? "" : "-g16-r0");
            kv_fmt_parse(fname, &f);
            snprintf(path, sizeof path, "%s/kivi%d%s.bin", dir, b, v ? ".v" : "-g16.k");
            size_t m;
            uint8_t *q = read_all(path, &m);
            int units = v ? 80 : 5, per = v ? 1 : 16;
            size_t ub = v ? kivi_v_row_bytes(f, 64) : kivi_k_group_bytes(f, 64);
            int ok_hdr = q && m == 16 + units * (ub + 4 * 64 * (size_t)per) && !memcmp(q, "SKVQ", 4) &&
                         rd32(q + 4) == 64 && (int)rd32(q + 8) == units && rd32(q + 12) == ub;
            CHECK(ok_hdr, "fixture %s: %d %s of %zu bytes", path, units, v ? "V rows" : "K groups", ub);
            if (!ok_hdr) { free(q); continue; }
            int same = 0, same_deq = 0;
            for (int u = 0; u < units; u++) {
                uint8_t got[1300];
                float yy[16 * 64];
                if (v) kivi_quant_v_row(f, r16[u], 64, got);
                else kivi_quant_k_group(f, r16[16 * u], 128, 64, got);
                same += !memcmp(got, q + 16 + (size_t)u * ub, ub);
                if (v) kivi_dequant_v_rows(f, q + 16 + (size_t)u * ub, ub, 1, 64, yy);
                else kivi_dequant_k_rows(f, q + 16 + (size_t)u * ub, 64, 0, 16, yy);
                same_deq += !memcmp(yy, q + 16 + (size_t)units * ub + (size_t)u * per * 64 * 4, sizeof(float) * 64 * (size_t)per);
            }
            CHECK(same == units, "kivi%d %s: bytes = the fixture's for %d of %d", b, v ? "V rows" : "K groups (G 16)", same, units);
            CHECK(same_deq == units, "kivi%d %s: decoded values = the fixture's for %d of %d", b, v ? "V" : "K", same_deq, units);
            free(q);
        }
    free(in);
}

/* ---- per-layer mixes ---------------------------------------------------------------------- */

static void test_mix(void) {
    kv_mix m;
    kv_fmt L[30];
    char err[300] = "";
    /* first and last layers f16, the rest int8, two ways */
    int ok = kv_mix_parse("int8+f16@0+f16@-1", &m, err, sizeof err) == 0 && m.n == 3 &&
             kv_mix_cells(&m, 30, 1, L, err, sizeof err) == 0;
    for (int l = 0; ok && l < 30; l++) ok = L[l] == (l == 0 || l == 29 ? KV_F16 : KV_INT8);
    CHECK(ok, "mix int8+f16@0+f16@-1 on 30 layers: f16 at 0 and 29, int8 elsewhere (%s)", err);
    ok = kv_mix_parse("int8@1-28+f16@0+f16@29", &m, err, sizeof err) == 0 && kv_mix_cells(&m, 30, 1, L, err, sizeof err) == 0;
    for (int l = 0; ok && l < 30; l++) ok = L[l] == (l == 0 || l == 29 ? KV_F16 : KV_INT8);
    CHECK(ok, "mix int8@1-28+f16@0+f16@29: the same layers (%s)", err);
    ok = kv_mix_parse("q4_1@0-1+nvfp4@2+e4m3s@-2-3", &m, err, sizeof err) == -1;
    CHECK(ok && strstr(err, "-2-3"), "mix: a range from the end is refused: %s", err);
    ok = kv_mix_parse("q4_1@0-1+nvfp4@2+e4m3s@-2+mxfp4@-1", &m, err, sizeof err) == 0 && kv_mix_cells(&m, 5, 1, L, err, sizeof err) == 0 &&
         L[0] == KV_Q4_1 && L[1] == KV_Q4_1 && L[2] == KV_NVFP4 && L[3] == KV_E4M3S && L[4] == KV_MXFP4;
    CHECK(ok, "mix without a default item covering all 5 layers: q4_1 q4_1 nvfp4 e4m3s mxfp4 (%s)", err);
    ok = kv_mix_parse("f32", &m, err, sizeof err) == 0 && m.n == 1 && m.it[0].rest && kv_mix_cells(&m, 3, 1, L, err, sizeof err) == 0 &&
         L[0] == KV_F32 && L[2] == KV_F32;
    CHECK(ok, "a plain name is a mix of one default item");
    struct { const char *spec; int n_layer; const char *want; } bad[] = {
        {"int8+f16@0+f16@0", 4, "twice"}, {"int8@0-2+f16@2", 4, "twice"}, {"int8@0-2", 4, "layer 3 KV head 0 has no format"},
        {"int8+f16@4", 4, "past"}, {"int8+f16@-5", 4, "past"}, {"int8+f16@2-9", 4, "past"},
        {"int8+f16", 4, "two default"}, {"int8+f16@", 4, "bad place"}, {"int8+f16@3-1", 4, "bad place"},
        {"int8+f16@x", 4, "bad place"}, {"int8+f16@-0", 4, "bad place"}, {"int8+f16@1-", 4, "bad place"},
        {"int8+int9@1", 4, "unknown KV format 'int9'"}, {"int8++f16@1", 4, "unknown"}, {"", 4, "empty"},
        {"@1", 4, "unknown"}, {"int8+f16@1234567", 4, "bad place"}, {"int8 +f16@1", 4, "unknown"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = kv_mix_parse(bad[i].spec, &m, err, sizeof err);
        if (rc == 0) rc = kv_mix_cells(&m, bad[i].n_layer, 1, L, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].want), "mix '%s' on %d layers is refused: %s", bad[i].spec, bad[i].n_layer, err);
    }
    /* per KV head, and rotation modifiers */
    kv_fmt C[5 * 4];   /* [5 layers][4 KV heads] */
    ok = kv_mix_parse("int8+f16@h0", &m, err, sizeof err) == 0 && kv_mix_cells(&m, 5, 4, C, err, sizeof err) == 0;
    for (int c = 0; ok && c < 20; c++) ok = C[c] == (c % 4 == 0 ? KV_F16 : KV_INT8);
    CHECK(ok, "mix int8+f16@h0 on 5 layers x 4 KV heads: head 0 f16 in every layer (%s)", err);
    ok = kv_mix_parse("q4_0+rot@1-3+f16+int8+roth@-1:h-1+q8_0@0:h1-2", &m, err, sizeof err) == 0 && m.n == 4 &&
         kv_mix_cells(&m, 5, 4, C, err, sizeof err) == 0;
    for (int c = 0; ok && c < 20; c++) {
        int l = c / 4, g = c % 4;
        kv_fmt want = l >= 1 && l <= 3 ? (kv_fmt)(KV_Q4_0 | KV_ROT_B) : l == 4 && g == 3 ? (kv_fmt)(KV_INT8 | KV_ROT_H)
                    : l == 0 && (g == 1 || g == 2) ? KV_Q8_0 : KV_F16;
        ok = C[c] == want;
    }
    CHECK(ok, "mix q4_0+rot@1-3+f16+int8+roth@-1:h-1+q8_0@0:h1-2: every cell as written (%s)", err);
    kv_fmt C2[20];
    ok = kv_mix_parse("q4_0@1-3+rot+f16+int8@-1:h-1+roth+q8_0@0:h1-2", &m, err, sizeof err) == 0 &&
         kv_mix_cells(&m, 5, 4, C2, err, sizeof err) == 0 && memcmp(C, C2, sizeof C) == 0;
    CHECK(ok, "the modifier before or after the place: the same cells (%s)", err);
    ok = kv_mix_parse("q4_0r+f16@h1", &m, err, sizeof err) == 0 && kv_mix_cells(&m, 2, 2, C, err, sizeof err) == 0 &&
         C[0] == KV_Q4_0R && C[1] == KV_F16 && C[2] == KV_Q4_0R && C[3] == KV_F16;
    CHECK(ok, "q4_0r in a mix with a per-head item (%s)", err);
    struct { const char *spec; int n_layer, n_kv; const char *want; } badh[] = {
        {"int8+f16@h4", 5, 4, "KV head 4 is past the model's 4 KV heads (0..3)"},
        {"int8+f16@h-5", 5, 4, "KV head -5 is past"}, {"int8+f16@0:h1-7", 5, 4, "KV head 7 is past"},
        {"int8+f16@h0+f16@0", 5, 4, "layer 0 KV head 0 is given twice"},
        {"int8@h0-2", 5, 4, "layer 0 KV head 3 has no format"},
        {"rot+int8", 5, 4, "'rot' in KV format mix 'rot+int8' has no format before it"},
        {"int8+rot+roth", 5, 4, "rotates int8+rot, which is rotated already"},
        {"q4_0r+roth", 5, 4, "rotates q4_0r"}, {"int8@1+rot@2+f16", 5, 4, "two places"},
        {"int8+f16@h", 5, 4, "bad place"}, {"int8+f16@0:", 5, 4, "bad place"}, {"int8+f16@:h0", 5, 4, "bad place"},
        {"int8+f16@0h0", 5, 4, "bad place"}, {"int8+f16@h0:1", 5, 4, "bad place"}, {"int8+f16@0:0", 5, 4, "bad place"},
        {"int8+f16@h2-1", 5, 4, "bad place"}, {"int8+f16@H0", 5, 4, "bad place"},
        {"int8+roth+f16+rot", 5, 4, "two default items (int8+roth and f16+rot)"},
    };
    for (size_t i = 0; i < sizeof badh / sizeof badh[0]; i++) {
        err[0] = 0;
        int rc = kv_mix_parse(badh[i].spec, &m, err, sizeof err);
        if (rc == 0) rc = kv_mix_cells(&m, badh[i].n_layer, badh[i].n_kv, C, err, sizeof err);
        CHECK(rc == -1 && strstr(err, badh[i].want), "mix '%s' on %d x %d is refused: %s", badh[i].spec, badh[i].n_layer,
              badh[i].n_kv, err);
    }
    char many[400] = "f16";
    for (int i = 0; i < KV_MIX_ITEMS; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "+int8@%d", i);
    CHECK(kv_mix_parse(many, &m, err, sizeof err) == -1 && strstr(err, "more than"), "mix with %d items is refused: %s",
          KV_MIX_ITEMS + 1, err);
}

/* ---- f16 / bf16 / f32 --------------------------------------------------------------------- */

static void test_f16_bf16(void) {
    /* f16: 1 -> 3c00; 65504 -> 7bff; 1 + 2^-11 tie -> 3c00; 1 + 3*2^-11 tie -> 3c02; 2^-24 -> 0001;
     * -2 -> c000; 65520 (tie with 2^16) -> 7c00 (inf); 1/3 -> 3555 */
    float x[8] = {1.0f, 65504.0f, 1.00048828125f, 1.00146484375f, 5.9604644775390625e-08f, -2.0f, 65520.0f,
                  1.0f / 3.0f};
    uint8_t want[16] = {0x00, 0x3c, 0xff, 0x7b, 0x00, 0x3c, 0x02, 0x3c, 0x01, 0x00, 0x00, 0xc0, 0x00, 0x7c,
                        0x55, 0x35};
    uint8_t row[16];
    float y[8];
    CHECK(kv_quantize(KV_F16, x, row, 8) == 0 && same_bytes(row, want, 16, "f16"), "f16 row: exact bits incl. ties");
    kv_dequantize(KV_F16, row, y, 8);
    CHECK(y[2] == 1.0f && y[3] == 1.001953125f && y[4] == 5.9604644775390625e-08f && isinf(y[6]) &&
          y[7] == 0.333251953125f, "f16 row dequantises exactly");
    /* bf16: 1 -> 3f80; 1 + 2^-8 tie -> 3f80; 1 + 3*2^-8 tie -> 3f82; 1 + 2^-8 + 2^-20 -> 3f81;
     * -2 -> c000; 3 -> 4040; 1/3 = 0x3eaaaaab -> 3eab */
    float xb[7] = {1.0f, 1.00390625f, 1.01171875f, 1.00390625f + 9.5367431640625e-07f, -2.0f, 3.0f, 1.0f / 3.0f};
    uint8_t wantb[14] = {0x80, 0x3f, 0x80, 0x3f, 0x82, 0x3f, 0x81, 0x3f, 0x00, 0xc0, 0x40, 0x40, 0xab, 0x3e};
    uint8_t rowb[14];
    CHECK(kv_quantize(KV_BF16, xb, rowb, 7) == 0 && same_bytes(rowb, wantb, 14, "bf16"), "bf16 row: exact bits incl. ties");
    kv_dequantize(KV_BF16, rowb, y, 7);
    CHECK(y[1] == 1.0f && y[2] == 1.015625f && y[3] == 1.0078125f && y[6] == 0.333984375f, "bf16 row dequantises exactly");
    /* f32: the bytes are the floats, little-endian */
    float xf[3] = {1.0f, -0.1f, 3e-40f};
    uint8_t rowf[12], wantf[12] = {0x00, 0x00, 0x80, 0x3f, 0xcd, 0xcc, 0xcc, 0xbd, 0, 0, 0, 0};
    uint32_t sub = fp16_f32_bits(3e-40f);
    for (int i = 0; i < 4; i++) wantf[8 + i] = (uint8_t)(sub >> (8 * i));
    kv_quantize(KV_F32, xf, rowf, 3);
    kv_dequantize(KV_F32, rowf, y, 3);
    CHECK(same_bytes(rowf, wantf, 12, "f32") && memcmp(y, xf, sizeof xf) == 0, "f32 row is exact");
}

/* ---- the row decoders against the scalar conversions, every code -------------------------- */

static void test_decoders_exhaustive(void) {
    /* f16 rows go through kv.c's own branch-free decoder: it must equal fp16_to_f32 for all 65536
     * bit patterns (NaN payloads included), in full 32-value chunks (h = 32) and tails (h = 8). */
    int ok32 = 1, ok8 = 1;
    for (uint32_t base = 0; base < 65536; base += 32) {
        uint8_t row[64];
        float y[32];
        for (int j = 0; j < 32; j++) {
            row[2 * j] = (uint8_t)((base + j) & 0xff);
            row[2 * j + 1] = (uint8_t)((base + j) >> 8);
        }
        kv_dequantize(KV_F16, row, y, 32);
        for (int j = 0; j < 32; j++)
            if (!same_float_bits(y[j], fp16_to_f32((uint16_t)(base + j)))) ok32 = 0;
        kv_dequantize(KV_F16, row + 16, y, 8);
        for (int j = 0; j < 8; j++)
            if (!same_float_bits(y[j], fp16_to_f32((uint16_t)(base + 8 + j)))) ok8 = 0;
    }
    CHECK(ok32, "f16 rows: all 65536 codes decode as fp16_to_f32 (full chunks)");
    CHECK(ok8, "f16 rows: all 65536 codes decode as fp16_to_f32 (tail loop)");
    int ok_fp8 = 1;
    for (int base = 0; base < 256; base += 32) {
        uint8_t row[32];
        float y[32], y8[8];
        for (int j = 0; j < 32; j++) row[j] = (uint8_t)(base + j);
        kv_dequantize(KV_FP8, row, y, 32);
        kv_dequantize(KV_FP8, row + 8, y8, 8);
        for (int j = 0; j < 32; j++)
            if (!same_float_bits(y[j], kv_fp8_to_f32((uint8_t)(base + j)))) ok_fp8 = 0;
        for (int j = 0; j < 8; j++)
            if (!same_float_bits(y8[j], kv_fp8_to_f32((uint8_t)(base + 8 + j)))) ok_fp8 = 0;
    }
    CHECK(ok_fp8, "fp8 rows: all 256 codes decode as kv_fp8_to_f32 (chunks and tails)");
    /* bf16: every code, through the row decoder */
    int ok_bf = 1;
    for (uint32_t base = 0; base < 65536; base += 32) {
        uint8_t row[64];
        float y[32];
        for (int j = 0; j < 32; j++) {
            row[2 * j] = (uint8_t)((base + j) & 0xff);
            row[2 * j + 1] = (uint8_t)((base + j) >> 8);
        }
        kv_dequantize(KV_BF16, row, y, 32);
        for (int j = 0; j < 32; j++)
            if (fp16_f32_bits(y[j]) != (base + (uint32_t)j) << 16) ok_bf = 0;
    }
    CHECK(ok_bf, "bf16 rows: all 65536 codes decode to the top half of the f32 bits");
}

/* kv_dequantize_rows / _cols (attention's readers, with fast paths of their own for f16, int8, q8_0,
 * q4_0 and q4_1) against kv_dequantize row by row, bit for bit: every base format, rows of random
 * bytes (any scale: NaN, inf and subnormal ones included) and every column range [d0, d1) the
 * header allows. */
static void test_cols_readers(void) {
    uint64_t rs = 11;
    const int hs[4] = {32, 64, 96, 128};
    for (int f = 0; f < KV_NFMT; f++) {
        int ok = 1, n = 0;
        for (int hi = 0; hi < 4; hi++) {
            int h = hs[hi];
            size_t rb = kv_row_bytes((kv_fmt)f, h);
            if (rb == 0) continue;
            enum { ROWS = 5 };
            uint8_t rows[ROWS * 1024];                  /* [ROWS][rb] */
            float want[ROWS * 128], got[ROWS * 128];    /* [ROWS][h] */
            for (size_t i = 0; i < ROWS * rb; i++) rows[i] = (uint8_t)(rng_next(&rs) >> 56);
            for (int r = 0; r < ROWS; r++) kv_dequantize((kv_fmt)f, rows + r * rb, want + r * h, h);
            for (int d0 = 0; d0 < h; d0 += KV_CHUNK)
                for (int d1 = d0 + KV_CHUNK; d1 <= h; d1 += KV_CHUNK, n++) {
                    int w = d1 - d0;
                    kv_dequantize_cols((kv_fmt)f, rows, rb, ROWS, got, h, d0, d1);
                    for (int r = 0; r < ROWS; r++)
                        if (memcmp(got + r * w, want + r * h + d0, sizeof(float) * (size_t)w) != 0) ok = 0;
                }
            kv_dequantize_rows((kv_fmt)f, rows, rb, ROWS, got, h);
            if (memcmp(got, want, sizeof(float) * (size_t)(ROWS * h)) != 0) ok = 0;
        }
        CHECK(ok && n > 0, "kv_dequantize_cols / _rows (%s) = kv_dequantize, bit for bit (%d column ranges of random rows)",
              kv_fmt_name((kv_fmt)f), n);
    }
}

/* ---- the fused kernels -------------------------------------------------------------------- */

static void test_fused(void) {
    uint64_t rs = 5;
    const int hs[6] = {8, 40, 64, 96, 128, 256};
    for (int f = 0; f < KV_NFMT; f++) {
        int ok_dot = 1, ok_axpy = 1, n = 0;
        for (int hi = 0; hi < 6; hi++) {
            int h = hs[hi];
            if (kv_row_bytes((kv_fmt)f, h) == 0) continue;
            for (int t = 0; t < 20; t++, n++) {
                float x[256], q[256], y[256], acc[256], acc2[256];
                uint8_t row[1024];
                rng_vector(&rs, x, h);
                for (int i = 0; i < h; i++) { q[i] = rng_unit(&rs); acc[i] = acc2[i] = rng_unit(&rs); }
                kv_quantize((kv_fmt)f, x, row, h);
                kv_dequantize((kv_fmt)f, row, y, h);
                /* the order kv.h documents: 8 lanes, lane i % 8, then a fixed pairwise tree */
                float l[8] = {0};
                for (int i = 0; i < h; i++) l[i % 8] += y[i] * q[i];
                float want = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
                if (!same_float_bits(kv_dot((kv_fmt)f, row, q, h), want)) ok_dot = 0;
                float w = rng_unit(&rs);
                for (int i = 0; i < h; i++) acc[i] += w * y[i];
                kv_axpy((kv_fmt)f, row, w, acc2, h);
                if (memcmp(acc, acc2, sizeof(float) * h) != 0) ok_axpy = 0;
            }
        }
        CHECK(ok_dot && n > 0, "kv_dot(%s) bit-identical to dequantise + documented order (%d rows)",
              kv_fmt_name((kv_fmt)f), n);
        CHECK(ok_axpy && n > 0, "kv_axpy(%s) bit-identical to dequantise + y += w*v", kv_fmt_name((kv_fmt)f));
    }
}

int main(void) {
    test_names();
    test_row_bytes();
    test_int8();
    test_q8_0();
    test_q4_0();
    test_q4_0r();
    test_rotations();
    test_fp8();
    test_ggml_types();
    test_e5m2_e2m1();
    test_scaled_fp8();
    test_fp4();
    test_fixtures();
    test_fixtures_rot();
    test_kivi();
    test_mix();
    test_f16_bf16();
    test_decoders_exhaustive();
    test_fused();
    test_cols_readers();
    return check_done();
}
