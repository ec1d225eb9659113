/* cache.c — KV cache storage: reservation, storing rows in their formats, reading rows back as a
 * query at a position sees them. See cache.h; the attention that reads it is kernels/attn.c. */
#include "kernels/cache.h"
#include "kernels/errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kivi.h"

int cache_create_heads(cache *c, const kv_fmt *fk, const kv_fmt *fv, int n_layer, int n_kv, int hd,
                       int n_ctx, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (n_layer < 1 || n_kv < 1) return errmsg_set(err, errlen, -1, "a KV cache needs at least one layer and KV head");
    size_t n_cells = (size_t)n_layer * n_kv;
    for (size_t i = 0; i < n_cells; i++)
        if (kv_fmt_check(fk[i], hd, err, errlen) || kv_fmt_check(fv[i], hd, err, errlen)) return -1;
    c->H = calloc(n_cells, sizeof *c->H);
    if (!c->H) return errmsg_set(err, errlen, -1, "out of memory");
    c->n_layer = n_layer; c->n_kv = n_kv; c->hd = hd; c->n_ctx = n_ctx;
    for (size_t i = 0; i < n_cells; i++) {
        cache_head *H = &c->H[i];
        H->fk = fk[i]; H->fv = fv[i];
        /* a KIVI cell keeps the f16 row of every token in k / v, its quantised form in kq / vq */
        H->k_row_bytes = kv_fmt_is_kivi(fk[i]) ? 2 * (size_t)hd : kv_row_bytes(fk[i], hd);
        H->v_row_bytes = kv_fmt_is_kivi(fv[i]) ? 2 * (size_t)hd : kv_row_bytes(fv[i], hd);
        H->koff = c->k_bytes;
        H->voff = c->v_bytes;
        H->kqoff = c->kq_bytes;
        H->vqoff = c->vq_bytes;
        c->k_bytes += (size_t)n_ctx * H->k_row_bytes;
        c->v_bytes += (size_t)n_ctx * H->v_row_bytes;
        if (kv_fmt_is_kivi(fk[i]))
            c->kq_bytes += (size_t)((n_ctx + kivi_group(fk[i]) - 1) / kivi_group(fk[i])) * kivi_k_group_bytes(fk[i], hd);
        if (kv_fmt_is_kivi(fv[i])) c->vq_bytes += (size_t)n_ctx * kivi_v_row_bytes(fv[i], hd);
    }
    void *m[4] = { MAP_FAILED, MAP_FAILED, MAP_FAILED, MAP_FAILED };   /* k, v, kq, vq */
    size_t len[4] = { c->k_bytes, c->v_bytes, c->kq_bytes, c->vq_bytes };
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        if (len[i] == 0) continue;
        m[i] = mmap(NULL, len[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        ok &= m[i] != MAP_FAILED;
    }
    if (!ok) {
        errmsg_set(err, errlen, -1, "cannot reserve a KV cache of %.1f GiB for %d tokens",
                   (double)(c->k_bytes + c->v_bytes + c->kq_bytes + c->vq_bytes) / (1 << 30), n_ctx);
        for (int i = 0; i < 4; i++)
            if (m[i] != MAP_FAILED) munmap(m[i], len[i]);
        free(c->H);
        memset(c, 0, sizeof *c);
        return -1;
    }
    c->k = m[0];
    c->v = m[1];
    c->kq = m[2] == MAP_FAILED ? NULL : m[2];
    c->vq = m[3] == MAP_FAILED ? NULL : m[3];
    return 0;
}

int cache_create(cache *c, kv_fmt fk, kv_fmt fv, int n_layer, int n_kv, int hd, int n_ctx,
                 char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (n_layer < 1 || n_kv < 1) return errmsg_set(err, errlen, -1, "a KV cache needs at least one layer and KV head");
    size_t n_cells = (size_t)n_layer * n_kv;
    kv_fmt *f = malloc(sizeof *f * 2 * n_cells);   /* [2][n_layer][n_kv] */
    if (!f) return errmsg_set(err, errlen, -1, "out of memory");
    for (size_t i = 0; i < n_cells; i++) { f[i] = fk; f[n_cells + i] = fv; }
    int rc = cache_create_heads(c, f, f + n_cells, n_layer, n_kv, hd, n_ctx, err, errlen);
    free(f);
    return rc;
}

void cache_free(cache *c) {
    if (c->k) munmap(c->k, c->k_bytes);
    if (c->v) munmap(c->v, c->v_bytes);
    if (c->kq) munmap(c->kq, c->kq_bytes);
    if (c->vq) munmap(c->vq, c->vq_bytes);
    free(c->H);
    memset(c, 0, sizeof *c);
}

size_t cache_bytes_per_token(const cache *c) {
    size_t b = 0;
    for (size_t i = 0; i < (size_t)c->n_layer * c->n_kv; i++)
        b += kv_token_bytes(c->H[i].fk, c->hd, 0) + kv_token_bytes(c->H[i].fv, c->hd, 1);
    return b;
}
void cache_store(cache *c, int layer, int pos, const float *k, const float *v) {
    int hd = c->hd;
    for (int g = 0; g < c->n_kv; g++) {
        const cache_head *H = cache_head_at(c, layer, g);
        if (!kv_fmt_is_kivi(H->fk)) {
            kv_quantize(H->fk, k + (size_t)g * hd, (void *)cache_k_row(c, layer, pos, g), hd);
        } else {
            /* the f16 row; then the group this token makes readable, if any (kivi.h) */
            kv_quantize(KV_F16, k + (size_t)g * hd, (void *)cache_k_row(c, layer, pos, g), hd);
            int G = kivi_group(H->fk), n = pos + 1 - kivi_residual(H->fk);
            if (n >= G && n % G == 0) {
                int gi = n / G - 1;
                kivi_quant_k_group(H->fk, cache_k_row(c, layer, gi * G, g), H->k_row_bytes, hd,
                                   c->kq + H->kqoff + (size_t)gi * kivi_k_group_bytes(H->fk, hd));
            }
        }
        kv_quantize(kv_fmt_is_kivi(H->fv) ? KV_F16 : H->fv, v + (size_t)g * hd, (void *)cache_v_row(c, layer, pos, g), hd);
        if (kv_fmt_is_kivi(H->fv))
            kivi_quant_v_row(H->fv, cache_v_row(c, layer, pos, g), hd,
                             c->vq + H->vqoff + (size_t)pos * kivi_v_row_bytes(H->fv, hd));
    }
}

/* Keys j0 .. j0 + n - 1 of KV head g's K as the query at position p reads them, into y[n][hd]: the
 * stored rows, or for a KIVI cell the quantised group rows below its boundary and f16 rows from
 * there (kivi.h). */
void cache_k_rows(const cache *c, int layer, int g, int p, int j0, int n, float *y) {
    const cache_head *H = cache_head_at(c, layer, g);
    int hd = c->hd;
    if (!kv_fmt_is_kivi(H->fk)) { kv_dequantize_rows(H->fk, cache_k_row(c, layer, j0, g), H->k_row_bytes, n, y, hd); return; }
    int G = kivi_group(H->fk), b = kivi_boundary(H->fk, p);
    int nq = b - j0 < 0 ? 0 : b - j0 < n ? b - j0 : n;   /* rows read quantised */
    size_t gb = kivi_k_group_bytes(H->fk, hd);
    for (int j = j0; j < j0 + nq;) {
        int t0 = j % G, cnt = G - t0 < j0 + nq - j ? G - t0 : j0 + nq - j;
        kivi_dequant_k_rows(H->fk, c->kq + H->kqoff + (size_t)(j / G) * gb, hd, t0, cnt, y + (size_t)(j - j0) * hd);
        j += cnt;
    }
    if (nq < n) kv_dequantize_rows(KV_F16, cache_k_row(c, layer, j0 + nq, g), H->k_row_bytes, n - nq, y + (size_t)nq * hd, hd);
}

/* The same for V: y[n][hd]. */
void cache_v_rows(const cache *c, int layer, int g, int p, int j0, int n, float *y) {
    const cache_head *H = cache_head_at(c, layer, g);
    int hd = c->hd;
    if (!kv_fmt_is_kivi(H->fv)) { kv_dequantize_rows(H->fv, cache_v_row(c, layer, j0, g), H->v_row_bytes, n, y, hd); return; }
    int b = kivi_boundary(H->fv, p);
    int nq = b - j0 < 0 ? 0 : b - j0 < n ? b - j0 : n;
    size_t rb = kivi_v_row_bytes(H->fv, hd);
    if (nq > 0) kivi_dequant_v_rows(H->fv, c->vq + H->vqoff + (size_t)j0 * rb, rb, nq, hd, y);
    if (nq < n) kv_dequantize_rows(KV_F16, cache_v_row(c, layer, j0 + nq, g), H->v_row_bytes, n - nq, y + (size_t)nq * hd, hd);
}

/* 1 if some KIVI cell of the layer reads a different boundary at position p than at p - 1 */
int cache_kivi_step(const cache *c, int layer, int p) {
    for (int g = 0; g < c->n_kv; g++) {
        const cache_head *H = cache_head_at(c, layer, g);
        if (kv_fmt_is_kivi(H->fk) && kivi_boundary(H->fk, p) != kivi_boundary(H->fk, p - 1)) return 1;
        if (kv_fmt_is_kivi(H->fv) && kivi_boundary(H->fv, p) != kivi_boundary(H->fv, p - 1)) return 1;
    }
    return 0;
}
