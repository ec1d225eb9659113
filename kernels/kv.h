/* kv.h — KV-cache storage formats: one token's vector of one KV head (head dim h) <-> bytes.
 *
 * The formats are docs/DESIGN.md §3.3 (§3.3.10: the newer ones). Every function here is pure: no
 * allocation, no state, no output besides its arguments. Rows are byte arrays of kv_row_bytes(f, h)
 * bytes with no alignment requirement; multi-byte fields are little-endian.
 *
 * Row layouts (h = head dim):
 *   f32    h x f32                                                      4h bytes
 *   bf16   h x bf16, round to nearest even                              2h bytes
 *   f16    h x IEEE half, round to nearest even                         2h bytes
 *   int8   h x int8 values, THEN h/g fp16 scales (g = min(64, h))       h + 2h/g bytes
 *          group i = values [i*g, (i+1)*g) with scale i.
 *          s = fp16(max|x| / 127) (f32 division, then RNE to fp16; a scale above the fp16 range
 *          saturates to 65504 instead of becoming inf); q = clamp(rint(x / s), -127, 127) with the
 *          STORED s (f32 division, ties to even); s = 0 => q = 0. value = q * s.
 *          h <= 64: any h >= 1 (one group); h > 64: h must be a multiple of 64.
 *   q8_0   h/32 blocks of { fp16 d; int8 q[32] }                        34 bytes per 32 values
 *          bit-identical to ggml's reference quantiser: d = max|x| / 127, id = d ? 1/d : 0,
 *          q = roundf(x * id) (half away from zero, with the f32 id), d stored as fp16.
 *          value = q * d.  h % 32 == 0.
 *   q4_0   h/32 blocks of { fp16 d; uint8 qs[16] }                      18 bytes per 32 values
 *          bit-identical to ggml's reference quantiser: m = the signed value of largest magnitude
 *          (the first one on ties), d = m / -8, id = d ? 1/d : 0,
 *          q = min(15, trunc(x * id + 8.5)); qs[j] = q[j] | q[j + 16] << 4 (first 16 values in
 *          the low nibbles). value = (q - 8) * d.  h % 32 == 0. An all-zero block stores
 *          d = 0 / -8 = -0.0 (fp16 0x8000) and q = 8, exactly as ggml does.
 *   (q8_0, q4_0 and the four below) A block whose 1/d overflows to inf (d < 2^-128: all values
 *          tiny f32 subnormals) stores q = 0 wherever x * id is not finite: what llama.cpp does on
 *          x86-64 (its float -> int8 conversion is undefined in C there). Such blocks decode to
 *          about 0 either way (d is 0 in fp16).
 *   q4_0r  the same format as q4_0+roth (below): q4_0 of the rotated vector. h a power of two,
 *          32 <= h <= KV_HADAMARD_MAX.
 *   fp8    h x e4m3fn (sign, 4 exponent bits with bias 7, 3 mantissa bits; no inf; NaN = 0x7f /
 *          0xff; largest finite 448), per-tensor scale 1.0: stored = e4m3(x), round to nearest
 *          even, |x| > 448 and +-inf SATURATE to +-448 (not NaN).                 h bytes
 *
 * The llama.cpp cache types below are bit-identical to ggml's reference quantisers
 * (quantize_row_*_ref, ISO C f32 arithmetic without contraction); tests/fixtures/kv holds bytes
 * made by the gguf package and by llama.cpp itself (tests/ref/make_kv_fixtures.py). fp16 fields
 * are RNE, overflow to inf (as ggml). h % 32 == 0 for all four.
 *   q4_1   h/32 blocks of { fp16 d; fp16 m; uint8 qs[16] }              20 bytes per 32 (5.0 bits)
 *          min / max of the block (f32), d = (max - min) / 15, id = d ? 1/d : 0,
 *          q = min(15, trunc((x - min) * id + 0.5)); d and m = min stored as fp16;
 *          qs[j] = q[j] | q[j + 16] << 4. value = q * d + m (f32 product, then add).
 *   q5_0   h/32 blocks of { fp16 d; uint8 qh[4]; uint8 qs[16] }        22 bytes per 32 (5.5 bits)
 *          m = the signed value of largest magnitude (first on ties), d = m / -16, id = d ? 1/d : 0,
 *          q = min(31, trunc(x * id + 16.5)); qs[j] = (q[j] & 15) | (q[j + 16] & 15) << 4;
 *          bit i of the little-endian uint32 qh = bit 4 of q[i]. value = (q - 16) * d.
 *   q5_1   h/32 blocks of { fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16] } 24 bytes per 32 (6.0 bits)
 *          as q4_1 with 31 levels: d = (max - min) / 31, q = min(31, trunc((x - min) * id + 0.5)),
 *          qh / qs as q5_0. value = q * d + m.
 *   iq4_nl h/32 blocks of { fp16 d; uint8 qs[16] }                      18 bytes per 32 (4.5 bits)
 *          q indexes the non-linear grid K = {-127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69
 *          89 113}; value = d * K[q]; qs as q4_0. As llama.cpp's CPU cache stores it (ggml's
 *          quantize_row_iq4_nl_ref, NO scale search): q from d0 = m / -127, d = their weighted
 *          least-squares scale (weights x^2, see quant_iq4_nl in kv.c); amax < 1e-15 => d = 0, q = 8.
 *
 * Scaled 8-bit floats and 4-bit microscaling formats (bit-exact to the definitions below; checked
 * against a float64 Python implementation of them, tests/ref/make_kv_fixtures.py). "x / s" is the
 * IEEE f32 division, then rounded once to the element format (round to nearest, ties to even).
 *   e5m2   h x e5m2 (sign, 5 exponent bits with bias 15, 2 mantissa bits: the top byte of an IEEE
 *          half; largest finite 57344; 0x7c inf, 0x7d..0x7f NaN), per-tensor scale 1.0:
 *          stored = e5m2(x), RNE; |x| > 57344 and +-inf saturate to +-57344 (0x7b / 0xfb);
 *          NaN -> 0x7f (0xff with the sign bit).                             h bytes (8 bits)
 *   e4m3s  h x e4m3fn (as fp8), THEN one f32 scale s per token per KV head:   h + 4 bytes
 *          s = amax / 448 (f32, amax = max |x|); q = fp8(x / s) (saturating, as fp8); s == 0
 *          (all-zero row, or amax / 448 underflows) => every q = 0. value = fp8 value(q) * s.
 *   e5m2s  as e4m3s with e5m2 elements: s = amax / 57344.                   h + 4 bytes
 *   nvfp4  h/16 blocks of { uint8 e4m3 scale; uint8 qs[8] }                9 bytes per 16 (4.5 bits)
 *          elements E2M1 (sign, 2 exponent bits with bias 1, 1 mantissa bit: 0 0.5 1 1.5 2 3 4 6);
 *          per-tensor FP32 scale fixed at 1.0 (so representable |x| is 2^-10 .. 2688); block scale
 *          s = fp8(amax / 6) (e4m3, RNE, saturating at 448), q = e2m1(x / s) with RNE and
 *          saturation to +-6 (sign kept, also for zero); s == 0 => every q = 0.
 *          qs[j] = q[j] | q[j + 8] << 4. value = e2m1(q) * s (exact). h % 16 == 0.
 *   mxfp4  h/32 blocks of { uint8 e8m0 X; uint8 qs[16] }                 17 bytes per 32 (4.25 bits)
 *          OCP MX v1.0: shared scale 2^E, E = floor(log2(amax)) - 2 (exact, from the f32 exponent;
 *          emax of E2M1 = 2), clamped to [-127, 127], stored as E + 127 (amax == 0 => E = -127);
 *          q = e2m1(x * 2^-E) (exact scaling), RNE, saturating to +-6, sign kept.
 *          qs[j] = q[j] | q[j + 16] << 4. value = e2m1(q) * 2^E (exact). X = 0xff (NaN) is never
 *          written and decodes to NaN. h % 32 == 0.
 *
 * Rotation + Lloyd-Max codebook (TurboQuant-style, without the QJL residual), rotated like q4_0r
 * (the whole-head Hadamard transform, below; h a power of two, 8 <= h <= KV_HADAMARD_MAX):
 *   tq3    { f32 s; codes[h] of 3 bits }                               4 + 3h/8 bytes (3 + 32/h bits)
 *   tq4    { f32 s; codes[h] of 4 bits }                               4 + h/2 bytes  (4 + 32/h bits)
 *          of y = H x: s = sqrtf((sum_i y_i * y_i) / h) (f32, i ascending); code i = the number of
 *          thresholds t_k with y_i / s > t_k (f32 division; NaN -> 0), t = the midpoints of the
 *          Lloyd-Max centroids c of N(0, 1) with 8 / 16 levels (f32 constants, kv.c); codes packed
 *          3 / 4 bits each from bit 0 of the first code byte upwards (a 3-bit code may straddle two
 *          bytes). value_i = c[code_i] * s (in the rotated domain).
 *
 * Rotated formats: any format F + a rotation modifier (kvfmt.h): F+rot, F+roth, and q4_0r (=
 * q4_0+roth). The row is F's bytes of R x, R the rotation (kv_rotate): +roth the normalised
 * Hadamard transform of the whole head (h a power of two <= KV_HADAMARD_MAX), +rot the same
 * transform on each block of b = min(KV_ROT_BLOCK, h) values (h a power of two below 64, or a
 * multiple of 64 up to KV_HADAMARD_MAX), +rotp on each block of b = h & -h values (the largest
 * power of two dividing h: llama.cpp's K rotation; the same h as +rot). R is orthonormal, symmetric and its own inverse. Bytes
 * per row: F's. kv_fmt_rotated() says whether a format is rotated.
 *   - kv_quantize(rotated F, x) takes the vector in the MODEL's domain and rotates it itself
 *     (stores F(R x)); the caller does not rotate K or V before storing.
 *   - kv_dequantize / kv_dot / kv_axpy work in the STORED (rotated) domain: kv_dequantize
 *     returns ~R x, not ~x.
 *   - Attention with a rotated K format: rotate each query head vector once, q' = R q
 *     (kv_rotate(f, q, h) on a copy), then score = kv_dot(f, k_row, q', h); this equals q . x_k
 *     up to rounding because R is orthogonal.
 *   - Attention with a rotated V format: accumulate o' = sum_t w_t * v_row_t with kv_axpy (in the
 *     rotated domain), then rotate back once, o = R o' (kv_rotate(f, o', h)), since R R = I.
 *   K and V formats are independent: rotate q only if K's format is rotated, o only if V's is
 *   (each with its own rotation).
 */
#ifndef STRATA_KV_H
#define STRATA_KV_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kvfmt.h"   /* kv_fmt, its names, the mix syntax */

/* Largest head dim a rotated format accepts (kv_quantize rotates in a stack buffer of this many
 * floats). */
#define KV_HADAMARD_MAX 1024
#define KV_ROT_BLOCK 64      /* +rot's block (for h >= 64) */

/* 1 if the format stores rotated vectors (+rot, +roth, q4_0r), else 0. See the notes above. */
int kv_fmt_rotated(kv_fmt f);

/* The block of f's rotation at head dim h: h for +roth and q4_0r, min(KV_ROT_BLOCK, h) for +rot,
 * h & -h for +rotp;
 * 0 if f is not rotated or h does not fit the rotation (see above). */
int kv_rot_block(kv_fmt f, int h);

/* In place x[h] <- R x for f's rotation: kv_hadamard of each block of kv_rot_block(f, h) values,
 * blocks in order; nothing for an unrotated format (or an h the rotation does not fit). R is its
 * own inverse, so the same call rotates back. */
void kv_rotate(kv_fmt f, float *x, int h);

/* Bytes to store one token's vector of one KV head, head dim h (a rotated format: its base's). 0 if
 * the format does not support h (h < 1; int8 with h > 64 not a multiple of 64; q8_0 q4_0 q4_1 q5_0
 * q5_1 iq4_nl mxfp4 with h % 32 != 0; nvfp4 with h % 16 != 0; a rotation that does not fit h, see
 * above: q4_0r needs a power of two in [32, KV_HADAMARD_MAX]) or f is not a format. */
size_t kv_row_bytes(kv_fmt f, int h);

/* The format's bytes per token of one KV head (the handshake's measure): kv_row_bytes, or for a
 * KIVI format (kivi.h, not a row format) its K group's share per token (is_v 0) or its V row. 0 if
 * the format does not fit h. */
size_t kv_token_bytes(kv_fmt f, int h, int is_v);

/* The bytes per token of one KV head the cache reserves: kv_row_bytes, or for a KIVI format the f16
 * row of every token plus the quantised form (the K group's share rounded up). 0 if it does not
 * fit h. */
size_t kv_reserve_bytes(kv_fmt f, int h, int is_v);

/* 0 if kv_row_bytes(f, h) != 0, or f is a KIVI format that fits h (kivi_check). Else -1 and one
 * line in err[errlen] naming the format, h and the rule, e.g. "kv format q4_0 needs a head dim that
 * is a multiple of 32 (got 80)". */
int kv_fmt_check(kv_fmt f, int h, char *err, size_t errlen);

/* Quantise one head vector x[h] (model domain) into dst[kv_row_bytes(f, h)].
 * 0 on success; -1 (nothing written) if kv_row_bytes(f, h) == 0. */
int kv_quantize(kv_fmt f, const float *x, void *dst, int h);

/* Dequantise src[kv_row_bytes(f, h)] into y[h] (stored domain: rotated for rotated formats).
 * 0 on success; -1 (nothing written) if kv_row_bytes(f, h) == 0. */
int kv_dequantize(kv_fmt f, const void *src, float *y, int h);

/* n rows at src, src + stride, ... (stride in bytes) into y[n][h]: the same values as n calls of
 * kv_dequantize, with the format dispatch done once (the attention's inner loop). Precondition:
 * kv_row_bytes(f, h) != 0 (not checked: hot path). */
void kv_dequantize_rows(kv_fmt f, const void *src, size_t stride, int n, float *y, int h);

#define KV_CHUNK 32   /* values per decoded chunk = the q8_0 / q4_0 block size (two nvfp4 blocks) */

/* The same for values [d0, d1) of each row only, into y[n][d1 - d0]: d0 a multiple of KV_CHUNK,
 * d1 one too or h (decode attention splits a head's columns across threads). */
void kv_dequantize_cols(kv_fmt f, const void *src, size_t stride, int n, float *y, int h, int d0, int d1);

/* Reference dot / axpy over one stored row, used by tests/test_kv.c only (to check the rotated
 * formats' attention recipe below against the model domain): the attention itself (kernels/attn.c)
 * dequantises blocks of rows with kv_dequantize_rows / kv_dequantize_cols and computes in f32.
 * Precondition: kv_row_bytes(f, h) != 0 (not checked).
 *
 * kv_dot: with y = kv_dequantize(f, k), returns the f32 dot product y . q summed in this fixed
 * order: eight partial sums acc[j] (j = 0..7) start at +0 and take acc[i % 8] += y[i] * q[i] for
 * i = 0, 1, ..., h-1 (each product rounded to f32, then added); result =
 * ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])).
 * Bit-identical to dequantising and summing in that order (tests/test_kv.c checks it). */
float kv_dot(kv_fmt f, const void *k, const float *q, int h);

/* kv_axpy: y[i] = y[i] + w * v[i] for i in [0, h), v = kv_dequantize(f, v_row) (w * v[i] rounded
 * to f32, then added). Bit-identical to dequantising first. */
void kv_axpy(kv_fmt f, const void *v_row, float w, float *y, int h);

/* In-place normalised Hadamard transform of x[h]: x <- H x / sqrt(h) with H the Sylvester
 * Hadamard matrix (H[i][j] = (-1)^popcount(i & j)). Orthonormal, symmetric, self-inverse.
 * h must be a power of two >= 1 (not checked). */
void kv_hadamard(float *x, int h);

/* e4m3fn conversions, scale 1.0. kv_fp8_from_f32: round to nearest even; |x| > 448 and +-inf
 * saturate to +-448 (0x7e / 0xfe); NaN -> 0x7f (0xff if the NaN's sign bit is set); -0 -> 0x80.
 * kv_fp8_to_f32: exact; 0x7f / 0xff -> NaN. */
uint8_t kv_fp8_from_f32(float x);
float kv_fp8_to_f32(uint8_t b);

/* e5m2 conversions, scale 1.0. kv_e5m2_from_f32: round to nearest even; |x| > 57344 and +-inf
 * saturate to +-57344 (0x7b / 0xfb); NaN -> 0x7f (0xff with the sign bit); -0 -> 0x80.
 * kv_e5m2_to_f32: exact (0x7c inf, 0x7d..0x7f NaN). */
uint8_t kv_e5m2_from_f32(float x);
float kv_e5m2_to_f32(uint8_t b);

/* E2M1 (4-bit) conversions. kv_e2m1_from_f32: round to nearest even, |x| > 6 (inf too) saturates
 * to +-6, the sign is kept (-0.1 -> 0x8 = -0); NaN -> 0x7 | sign. kv_e2m1_to_f32: exact. */
uint8_t kv_e2m1_from_f32(float x);
float kv_e2m1_to_f32(uint8_t q);

#endif
