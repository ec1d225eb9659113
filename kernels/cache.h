/* cache.h — the KV cache (one arm's K and V for every layer, position and KV head, in their stored
 * formats) and the attention that reads it.
 *
 * Storage: K and V of layer l, KV head g, position p at k + H[l][g].koff + p * H[l][g].kb
 * (kb = the bytes of one row in that head's format; koff = the sum of the (layer, head) cells before
 * it, layers outer, heads inner): one head's keys are contiguous, as attention reads them. Each
 * layer and KV head has its own K and V format (a "mix", kvfmt.h); a plain cache has the same two
 * formats everywhere.
 * The arrays are anonymous mappings of the full context, so only the pages written are committed:
 * a 240K-token reservation costs nothing until it is used.
 *
 * Attention (cache_attend) reads K and V back from the cache in their stored format, including
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
 * the quantised groups / rows and the others from the f16 rows; cache_attend splits a call into
 * runs of queries with the same boundaries (each query's result is the same either way).
 */
#ifndef STRATA_CACHE_H
#define STRATA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/pool.h"
#include "kernels/kv.h"

typedef struct {
    kv_fmt fk, fv;          /* the K and V formats of one KV head of one layer */
    size_t kb, vb;          /* bytes per row in k and v (a KIVI format: its f16 row, 2 hd) */
    size_t koff, voff;      /* where its n_ctx rows start in k and v */
    size_t kqoff, vqoff;    /* KIVI K / V: where its quantised K groups / V rows start in kq / vq */
} cache_head;

typedef struct {
    int n_layer, n_kv, hd, n_ctx;
    cache_head *H;          /* [n_layer][n_kv]: H[l * n_kv + g] */
    uint8_t *k, *v;         /* per layer l, KV head g: [n_ctx][H.kb] at k + H.koff (V alike),
                             * anonymous mappings */
    size_t k_bytes, v_bytes;
    uint8_t *kq, *vq;       /* KIVI cells (kivi.h): K [ceil(n_ctx / G)][group bytes] at kq + H.kqoff,
                             * V [n_ctx][quantised row bytes] at vq + H.vqoff; NULL when none */
    size_t kq_bytes, vq_bytes;
} cache;

/* Reserves the cache, formats fk / fv in every layer and head. Returns 0, or -1 with a message
 * (unsupported head dim for a format, or the reservation failed). Free with cache_free (safe on a
 * zeroed or failed cache). */
int cache_create(cache *c, kv_fmt fk, kv_fmt fv, int n_layer, int n_kv, int hd, int n_ctx,
                 char *err, size_t errlen);

/* The same with each layer's and KV head's formats: fk, fv [n_layer][n_kv] (copied). */
int cache_create_heads(cache *c, const kv_fmt *fk, const kv_fmt *fv, int n_layer, int n_kv, int hd,
                       int n_ctx, char *err, size_t errlen);
void cache_free(cache *c);

/* The formats' bytes per token over all layers (K + V; kv_token_bytes: a KIVI cell counts its
 * quantised form, not the f16 copy the cache also keeps). */
size_t cache_bytes_per_token(const cache *c);

/* Quantises and stores k[n_kv][hd] and v[n_kv][hd] (model domain) at (layer, pos). Positions are
 * stored in increasing order from a truncation point (a KIVI K group is quantised when the token
 * that makes it readable is stored). */
void cache_store(cache *c, int layer, int pos, const float *k, const float *v);

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
} cache_attn;

/* Decode (T = 1) over at least this many keys splits the keys, then the output columns, across
 * threads (three pool runs, same results): a step otherwise has one work item per KV head (SmolLM2:
 * 3 items on 2 threads). 256, not 1024, since kernels/NOTES.md change 27. */
#define CACHE_SPLIT_MIN_KEYS 256

/* Attention of T queries over the cached keys (see the top of this file). Positions up to
 * pos0 + T - 1 must be stored. cache_attend_ws works in scratch[n_scratch] (floats, allocated
 * once by the caller: the backend, at create); cache_attend allocates per-call scratch and frees
 * it before returning (tests, benchmarks). Returns 0, or -1 when scratch cannot be allocated or
 * n_scratch is less than this call needs. */
int cache_attend(pool *p, const cache *c, const cache_attn *a);
int cache_attend_ws(pool *p, const cache *c, const cache_attn *a, float *scratch, size_t n_scratch);

/* Floats of scratch that covers every cache_attend call on c with n_head query heads, T <=
 * max_T, window <= max_window (0: none) and `threads` pool threads. */
size_t cache_attend_scratch_floats(const cache *c, int n_head, int max_T, int max_window, int threads);

/* The plain reference of the same computation, one query at a time, no tiling, no intrinsics:
 * bit-identical to cache_attend (tests check). */
int cache_attend_ref(const cache *c, const cache_attn *a);

#endif
