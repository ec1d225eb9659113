/* attn.h — attention over the KV cache (kernels/cache.h): T queries against the stored keys and
 * values of one layer, in their stored formats.
 *
 * Attention (attn_run) reads K and V back from the cache in their stored format, including
 * the positions of the chunk being prefilled (store first, then attend). For each query position
 * p and head h (KV head g = h / (n_head / n_kv)), over keys j in [lo, p] (lo = 0, or p - window + 1
 * for a sliding-window layer):
 *     s_j = scale * (q . k_j)      q . k_j = sequential fma over d = 0..hd-1 in f32
 *     w_j = exp(s_j - max s)       (ops_exp_sub_sum: lanes of 8 from j = lo, fixed reduction)
 *     o   = (sum_j w_j v_j) / sum_j w_j   (sequential fma over j ascending, per output element)
 * With attention sinks (a learned logit z_h per head, gpt-oss), z_h joins the max and the
 * denominator but brings no value: m = max(max s, z_h), w_j = exp(s_j - m), and the sum is
 * (ops_exp_sub_sum of the w_j) + ops_expf(z_h - m), in that order; o = (sum_j w_j v_j) / sum. The
 * sink is not scaled (it is a logit of the softmax, not a dot product).
 * Every quantity depends only on (p, h) and the cache, never on the chunk or thread split: that is
 * the batch invariance of docs/DESIGN.md §2. Rotated formats (kv.h) rotate q before (K's rotation)
 * and o after (V's rotation). A KV head is attended with its own formats; nothing else depends on
 * the layer or head. KIVI cells (kivi.h): the query at p reads keys below kivi_boundary(f, p) from
 * the quantised groups / rows and the others from the f16 rows; attn_run splits a call into
 * runs of queries with the same boundaries (each query's result is the same either way).
 */
#ifndef STRATA_ATTN_H
#define STRATA_ATTN_H

#include <stddef.h>

#include "kernels/cache.h"
#include "kernels/pool.h"

typedef struct {
    int layer;
    int T;              /* queries in this call, at positions pos0 .. pos0 + T - 1 */
    int pos0;
    int n_head;
    int window;         /* 0 = full causal attention; else keys p - window < j <= p */
    float scale;        /* score multiplier, e.g. 1/sqrt(hd) */
    const float *q;     /* [T][n_head][hd] */
    float *out;         /* [T][n_head][hd] */
    const float *sinks; /* [n_head] each head's sink logit (gpt-oss), or NULL: none (the top of this
                         * file); borrowed */
} attn_args;

/* Decode (T = 1) over at least this many keys splits the keys, then the output columns, across
 * threads (three pool runs, same results): a step otherwise has one work item per KV head (SmolLM2:
 * 3 items on 2 threads). 256, not 1024, since kernels/NOTES.md change 27. */
#define ATTN_SPLIT_MIN_KEYS 256

/* Attention of T queries over the cached keys (see the top of this file). Positions up to
 * pos0 + T - 1 must be stored. attn_run_ws works in scratch[n_scratch] (floats, allocated
 * once by the caller: the backend, at create); attn_run allocates per-call scratch and frees
 * it before returning (tests, benchmarks). Returns 0, or -1 when scratch cannot be allocated or
 * n_scratch is less than this call needs. */
int attn_run(pool *p, const cache *c, const attn_args *a);
int attn_run_ws(pool *p, const cache *c, const attn_args *a, float *scratch, size_t n_scratch);

/* Floats of scratch that covers every attn_run call on c with n_head query heads, T <=
 * max_T, window <= max_window (0: none) and `threads` pool threads. */
size_t attn_scratch_floats(const cache *c, int n_head, int max_T, int max_window, int threads);

/* The plain reference of the same computation, one query at a time, no tiling, no intrinsics:
 * bit-identical to attn_run (tests check). attn_run_ref_ws works in the caller's scratch
 * [n_scratch] floats, at least attn_ref_scratch_floats(c) (the ref backend's, allocated at
 * create); attn_run_ref allocates per call. Returns 0, or -1 when scratch cannot be allocated or
 * is too small. */
int attn_run_ref(const cache *c, const attn_args *a);
int attn_run_ref_ws(const cache *c, const attn_args *a, float *scratch, size_t n_scratch);
size_t attn_ref_scratch_floats(const cache *c);

#endif
