/* backend_types.h — the plain descriptions the seam (kernels/backend.h's backend_model), the
 * kernels (kernels/ops.h) and every backend share: a weight matrix in host memory and a RoPE
 * configuration. A leaf: types only, no functions, no includes beyond stddef.h / stdint.h, nothing
 * CPU-specific, nothing allocated here (the model loader fills them; the weights point into its
 * file mapping, which the loader owns and frees).
 */
#ifndef STRATA_BACKEND_TYPES_H
#define STRATA_BACKEND_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* A weight matrix W [rows][cols] stored row-major in a GGUF tensor type; y = W x. */
typedef struct {
    uint32_t type;        /* GGUF_T_* */
    int rows, cols;
    size_t row_bytes;     /* bytes per row in type */
    const uint8_t *data;  /* [rows][row_bytes], into the model file mapping */
} backend_weight;

/* RoPE parameters of a model (one set for the global layers, one for gemma3's local ones). */
typedef struct {
    float base;           /* rope.freq_base */
    float freq_scale;     /* 1 / linear factor (1 = none) */
    float ext_factor;     /* YaRN: > 0 enables the ramp; 0 = off */
    float attn_factor;    /* YaRN magnitude multiplier (1 = none) */
    float beta_fast, beta_slow;
    int n_ctx_orig;       /* YaRN: original training context */
    int f32_angles;       /* 1: the angles in f32 as llama.cpp computes them (ops_rope_table_f32);
                           * 0 (the default): exact angles (ops_rope_table_f64) */
} backend_rope;

#endif
