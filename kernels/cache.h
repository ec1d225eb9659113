/* cache.h — the KV cache (one arm's K and V for every layer, position and KV head, in their stored
 * formats). The attention that reads it is kernels/attn.h.
 *
 * Storage: K and V of layer l, KV head g, position p at k + H[l][g].koff + p * H[l][g].k_row_bytes
 * (k_row_bytes = the bytes of one row in that head's format; koff = the sum of the (layer, head)
 * cells before it, layers outer, heads inner): one head's keys are contiguous, as attention reads
 * them (V alike with voff, v_row_bytes). Each
 * layer and KV head has its own K and V format (a "mix", kvfmt.h); a plain cache has the same two
 * formats everywhere.
 * The arrays are anonymous mappings of the full context, so only the pages written are committed:
 * a 240K-token reservation costs nothing until it is used.
 */
#ifndef STRATA_CACHE_H
#define STRATA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kv.h"

typedef struct {
    kv_fmt fk, fv;          /* the K and V formats of one KV head of one layer */
    size_t k_row_bytes;     /* bytes per stored row in k (a KIVI format: its f16 row, 2 hd) */
    size_t v_row_bytes;     /* the same in v */
    size_t koff, voff;      /* where its n_ctx rows start in k and v */
    size_t kqoff, vqoff;    /* KIVI K / V: where its quantised K groups / V rows start in kq / vq */
} cache_head;

typedef struct {
    int n_layer, n_kv, hd, n_ctx;
    cache_head *H;          /* [n_layer][n_kv]: H[l * n_kv + g] */
    uint8_t *k, *v;         /* per layer l, KV head g: [n_ctx][H.k_row_bytes] at k + H.koff (V alike),
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

/* Rows are stored [layer][group][pos]: attention streams one group's keys contiguously. These
 * return the stored bytes (borrowed, inside c->k / c->v). */
static inline const cache_head *cache_head_at(const cache *c, int layer, int g) {
    return &c->H[(size_t)layer * c->n_kv + g];
}
static inline const uint8_t *cache_k_row(const cache *c, int layer, int pos, int g) {
    const cache_head *H = cache_head_at(c, layer, g);
    return c->k + H->koff + (size_t)pos * H->k_row_bytes;
}
static inline const uint8_t *cache_v_row(const cache *c, int layer, int pos, int g) {
    const cache_head *H = cache_head_at(c, layer, g);
    return c->v + H->voff + (size_t)pos * H->v_row_bytes;
}

/* Keys j0 .. j0 + n - 1 of KV head g's K as the query at position p reads them, into y[n][hd]
 * (caller's buffer): the stored rows dequantised, or for a KIVI cell the quantised group rows
 * below its boundary and f16 rows from there (kivi.h). cache_v_rows: the same for V. */
void cache_k_rows(const cache *c, int layer, int g, int p, int j0, int n, float *y);
void cache_v_rows(const cache *c, int layer, int g, int p, int j0, int n, float *y);

/* 1 if some KIVI cell of the layer reads a different boundary at position p than at p - 1. */
int cache_kivi_step(const cache *c, int layer, int p);

#endif
