/* ops.h — CPU kernels of the forward pass: dot products, weight matmul, norms, RoPE, activations,
 * a vectorised exp.
 *
 * Batch invariance (docs/DESIGN.md §2) rests on one rule: every output element is computed by the same
 * sequence of floating-point operations whatever the batch, chunk or thread split. The canonical
 * dot product of n values is:
 *     acc[l] = fma(a[i+l], b[i+l], acc[l])  for i = 0, 16, 32, ... (16 lanes, l = 0..15)
 *     s[l] = acc[l] + acc[l+8] (l = 0..7); s = ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7))
 *     s = fma(a[i], b[i], s) for the n % 16 tail
 * ops_dot_ref is that loop in plain C; the vector paths (ops_dot, the matmul micro-kernels: one
 * 512-bit register with AVX-512, two 256-bit halves with AVX2) do the same operations in registers
 * and are bit-identical to it (tests/test_model.c checks).
 * Nothing here allocates, except ops_matmul when its caller passes no scratch.
 */
#ifndef STRATA_OPS_H
#define STRATA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend_types.h"
#include "kernels/pool.h"

float ops_dot_ref(const float *a, const float *b, int n);
float ops_dot(const float *a, const float *b, int n);

/* y[t][r] = dot(W[r], x[t]) for t < T, r < W->rows. x [T][cols], y [T][rows] (row stride ldy).
 * Weight rows are dequantised to f32 once per call and reused for all T tokens; for T = 1 each
 * row goes straight into the dot product (quant_dot_rows) where the type has a fused kernel.
 * scratch: ops_matmul_scratch_floats(pool_threads(p), W->cols) floats on a 64-byte boundary,
 * allocated once by the caller (the backend, at create); NULL: allocated for this call and freed
 * before it returns (tests). Returns 0, or -1 when NULL scratch cannot be allocated. */
int ops_matmul(pool *p, const backend_weight *w, const float *x, float *y, int T, int ldy, float *scratch);
size_t ops_matmul_scratch_floats(int threads, int cols);

/* Several matmuls of the same x in one pool run (Q, K and V; gate and up): the same results as
 * one ops_matmul each, with one thread hand-off instead of n (a decode step makes hundreds).
 * All weights must have the same cols. Returns 0, or -1 (nothing run) when n is not in
 * 1..OPS_MM_MAX, the cols differ, or scratch cannot be allocated. */
#define OPS_MM_MAX 4
typedef struct {
    const backend_weight *w;
    float *y;             /* [T][ldy] */
    int ldy;
} ops_mm;
int ops_matmul_many(pool *p, const ops_mm *jobs, int n, const float *x, int T, float *scratch);

/* Dequantises row r of W into out[cols]. */
void ops_weight_row(const backend_weight *w, int r, float *out);

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; x and out [n] may alias. Sum of squares in the
 * canonical dot order (f32), so it is identical per token whatever the batch. */
void ops_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* RoPE on one head vector x[hd] at position pos, rotating the first n_rot dims.
 * neox = 0: pairs (2i, 2i+1) (llama); neox = 1: pairs (i, i + n_rot/2) (qwen2/3, gemma3).
 * cs = the (cos, sin) table for this position: [n_rot/2][2], from ops_rope_table. */
void ops_rope(float *x, const float *cs, int n_rot, int neox);

/* Fills cs[n_rot/2][2] for position pos: theta_i = p * base^(-2i/n_rot) with p = pos * freq_scale
 * (linear scaling); with YaRN (ext_factor > 0) the theta blend and the magnitude scale mscale of
 * the YaRN paper (backend_rope: kernels/backend_types.h). Two evaluations (docs/DESIGN.md §3.2):
 *   ops_rope_table_f64  the default: angles exact to ~1e-16 relative (each frequency from pow,
 *                       times pos, in double; cos and sin in double, rounded once to f32): no
 *                       drift with depth
 *   ops_rope_table_f32  angles in f32 as llama.cpp computes them (theta *= powf(base, -2/n_rot)
 *                       per pair, cosf / sinf): f32 parity with llama.cpp at depth; its angle
 *                       error grows with the position (half an ulp of pos: 0.008 rad at 240,000),
 *                       and so does the logits' drift from float64
 * ops_rope_table picks one by cfg->f32_angles (the worker's --rope-angles). Both are plain C:
 * every ISA build gives the same table. */
void ops_rope_table(float *cs, int pos, int n_rot, const backend_rope *cfg);
void ops_rope_table_f32(float *cs, int pos, int n_rot, const backend_rope *cfg);
void ops_rope_table_f64(float *cs, int pos, int n_rot, const backend_rope *cfg);

/* Activations, elementwise in place on x[n] (gate) times up[n]:
 * swiglu: x = silu(x) * up;  geglu: x = gelu_tanh(x) * up, as v / (1 + expf(-2z)) (see ops.c). */
void ops_swiglu(float *x, const float *up, int n);
void ops_geglu(float *x, const float *up, int n);
/* gpt-oss's clamped SwiGLU: c = min(x, limit), x = c / (1 + exp(-alpha c)) * (clamp(up, -limit,
 * limit) + 1) (llama.cpp's swiglu_oai; alpha 1.702, limit 7 there). */
void ops_swiglu_oai(float *x, const float *up, int n, float alpha, float limit);
/* The plain C references: the same formulas one value at a time with libm's expf (the fast forms
 * above compute the same bits 16 lanes at a time: tests/test_simd.c). */
void ops_swiglu_ref(float *x, const float *up, int n);
void ops_geglu_ref(float *x, const float *up, int n);
void ops_swiglu_oai_ref(float *x, const float *up, int n, float alpha, float limit);

/* exp(x) for x <= 0 by range reduction and a polynomial (max error ~2 ulp); scalar and AVX2
 * versions bit-identical. Returns 0 for x < -87.3 (and -inf), NaN for NaN, +inf for x > ~88.7
 * (and +inf): defined for every input, the same bits in every path. */
float ops_expf(float x);
/* y[i] = ops_expf(x[i] - m); returns the sum of y in ops_sum8 order (8 lanes, their fixed
 * reduction, then the tail; f32). x, y [n] may alias. */
float ops_exp_sub_sum(float *y, const float *x, float m, int n);
/* The sum ops_exp_sub_sum returns, in its order (8 lanes from y[0], reduce8, then the tail), of
 * values y[n] already computed: split attention computes the weights in pieces, sums them whole. */
float ops_sum8(const float *y, int n);

#endif
