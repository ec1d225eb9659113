/* fp16.h — IEEE half and bfloat16 conversions (round to nearest even), header-only.
 *
 * Used by the weight dequantisers (F16/BF16 tensors, block scales), the KV formats and the
 * int8 scale. Pure functions, no allocation. Bit-exact with the hardware F16C conversion
 * (round-to-nearest-even, NaN kept quiet, overflow to inf). */
#ifndef STRATA_FP16_H
#define STRATA_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp16_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fp16_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* half -> float, exact. */
static inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return fp16_bits_f32(sign | 0x7f800000u | (man ? 0x400000u : 0) | (man << 13)); /* inf / quiet nan */
    if (exp == 0) {
        if (man == 0) return fp16_bits_f32(sign);                          /* +-0 */
        /* subnormal: man * 2^-24 is exact in f32 */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return fp16_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* float -> half, round to nearest even; overflow -> inf; NaN -> quiet NaN. */
static inline uint16_t fp16_from_f32(float f) {
    uint32_t u = fp16_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);                     /* overflow */
    if (e <= 0) {                                                          /* subnormal or zero */
        if (e < -10) return sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;         /* may carry into exp: ok */
    return (uint16_t)(sign | half);
}

/* bfloat16 -> float, exact. */
static inline float bf16_to_f32(uint16_t b) { return fp16_bits_f32((uint32_t)b << 16); }

/* float -> bfloat16, round to nearest even; NaN stays NaN. */
static inline uint16_t bf16_from_f32(float f) {
    uint32_t u = fp16_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
