/* kv_internal.h — what the two halves of the KV formats share: kernels/kv.c (row geometry, the
 * scalar conversions, the rotations and the quantisers) and kernels/kv_decode.c (the decoder:
 * kv_dequantize, kv_dequantize_rows / _cols, kv_dot, kv_axpy), and kernels/kv_vec.h (the inline
 * 16-value decoder both the decoder and attention use); no other file includes it. kv.h stays the
 * one interface. Constants only: nothing here allocates or keeps state.
 */
#ifndef STRATA_KV_INTERNAL_H
#define STRATA_KV_INTERNAL_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kv.c and kv_decode.c store and load f32 / fp16 fields with memcpy and assume a little-endian host"
#endif

/* int8 group size g = min(64, h) (kv.h). */
static inline int kv_int8_group(int h) { return h < 64 ? h : 64; }

/* E2M1 values by code [16] (kv.c): sign bit 3, then 2 exponent bits (bias 1) and 1 mantissa bit. */
extern const float kv_e2m1_values[16];

/* iq4_nl's values by code [16] (kv.c; ggml's kvalues_iq4nl). */
extern const float kv_iq4nl_values[16];

/* 2^(X - 127) for an E8M0 byte X, exact; 0xff is NaN (mxfp4's block scale). */
static inline float kv_e8m0_to_f32(uint8_t x) {
    uint32_t b = x == 0xff ? 0x7fc00000u : x ? (uint32_t)x << 23 : 0x00400000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* tq3 / tq4 Lloyd-Max centroids of N(0, 1) [8] / [16] (kv.c, beside the thresholds the quantiser
 * uses). */
extern const float kv_tq3_c[8];
extern const float kv_tq4_c[16];

#endif
