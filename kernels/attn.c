/* attn.c — attention over the KV cache (see attn.h for the canonical order): the reference (one
 * query at a time), the tiled path (QT queries of one head per item, keys in blocks of KEY_BLOCK)
 * and split decode (keys, then output columns, across threads). Reads the cache through cache.h's
 * row readers. */
#include "kernels/attn.h"
#include "kernels/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vec16.h"
#include "kernels/kivi.h"
#include "kernels/kv_vec.h"
#include "kernels/prefetch.h"

#define QT 16   /* queries per work item */
#define KEY_BLOCK 64       /* keys per dequantised block in the tiled path: four 16-lane vectors of scores per query */
#define KEY_BLOCK_DEC 32   /* the same in split decode (measured: 64 there is 20 % slower from memory, 32 in
                     * the tiled path 5 % slower) */
#define MAX_HPI 8 /* most query heads per work item */

/* *view = layer `layer` of c as a one-layer cache (H at the layer's heads; the offsets in H are
 * from c->k / c->v, which the view keeps), *av = *a with layer 0. */
static void layer_view(const cache *c, const attn_args *a, cache *view, attn_args *av) {
    *view = *c;
    view->n_layer = 1;
    view->H = c->H + (size_t)a->layer * c->n_kv;
    *av = *a;
    av->layer = 0;
}

/* n rounded up to 16 floats: sub-buffers carved from one scratch start on 64-byte boundaries */
static size_t up16(size_t n) { return (n + 15) / 16 * 16; }

/* ---- attention sinks (cache.h): the same two steps in every path ----------------------------- */

/* The softmax max of head h: m, the max of its scaled scores, raised to the sink logit. */
static float sink_max(const attn_args *a, int h, float m) {
    return a->sinks && a->sinks[h] > m ? a->sinks[h] : m;
}

/* The denominator of head h: sum (of the weights, canonical order) plus the sink's weight. */
static float sink_sum(const attn_args *a, int h, float m, float sum) {
    return a->sinks ? sum + ops_expf(a->sinks[h] - m) : sum;
}

/* ---- reference: one query at a time ---------------------------------------------------------- */

static float seq_dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int d = 0; d < n; d++) s = fmaf(a[d], b[d], s);
    return s;
}

/* scratch: n_keys scores, then the query, one dequantised row and the accumulator, [hd] each;
 * NULL: allocated here and freed before returning. */
static int attend_ref(const cache *c, const attn_args *a, float *scratch, size_t n_scratch) {
    int hd = c->hd, group = a->n_head / c->n_kv;
    size_t n_keys = (size_t)(a->pos0 + a->T), need = n_keys + 3 * (size_t)hd;
    float *own = NULL;
    if (!scratch && !(scratch = own = malloc(sizeof(float) * need))) return -1;
    if (!own && n_scratch < need) return -1;
    float *s = scratch;                 /* [n_keys] scores, then weights */
    float *q = s + n_keys;              /* [hd] (rotated) query */
    float *kv = q + hd;                 /* [hd] one dequantised row */
    float *o = kv + hd;                 /* [hd] accumulator */
    for (int t = 0; t < a->T; t++) {
        int pos = a->pos0 + t;
        int lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        for (int h = 0; h < a->n_head; h++) {
            int g = h / group;
            const cache_head *H = cache_head_at(c, a->layer, g);
            memcpy(q, a->q + ((size_t)t * a->n_head + h) * hd, sizeof(float) * (size_t)hd);
            kv_rotate(H->fk, q, hd);                       /* nothing unless K is rotated */
            float m = -INFINITY;
            for (int j = lo; j <= pos; j++) {
                cache_k_rows(c, a->layer, g, pos, j, 1, kv);
                s[j - lo] = seq_dot(q, kv, hd) * a->scale;
                if (s[j - lo] > m) m = s[j - lo];
            }
            m = sink_max(a, h, m);
            float sum = sink_sum(a, h, m, ops_exp_sub_sum(s, s, m, pos - lo + 1));
            for (int d = 0; d < hd; d++) o[d] = 0.0f;
            for (int j = lo; j <= pos; j++) {
                cache_v_rows(c, a->layer, g, pos, j, 1, kv);
                for (int d = 0; d < hd; d++) o[d] = fmaf(s[j - lo], kv[d], o[d]);
            }
            for (int d = 0; d < hd; d++) o[d] = o[d] / sum;
            kv_rotate(H->fv, o, hd);                       /* back, when V is rotated */
            memcpy(a->out + ((size_t)t * a->n_head + h) * hd, o, sizeof(float) * (size_t)hd);
        }
    }
    free(own);
    return 0;
}

/* ---- tiled: QT queries of one head per item, keys in blocks of KEY_BLOCK ----------------------------- */

typedef struct {
    const cache *c;
    const attn_args *a;
    int n_tiles;
    int heads_per_item;     /* query heads of one KV group handled together (share K/V dequant) */
    size_t max_keys;        /* score row length per query */
    size_t rows;            /* query rows per item the scratch holds */
    float *scratch;         /* [n_threads][per_thread] */
    size_t per_thread;
} attn_ctx;

/* s[qi][j] = seq_dot(q[qi], k_j) for up to 4 queries and the nkeys (32 or 64) keys of kt [hd][nkeys]:
 * lanes are keys, the loop over d is each score's sequential fma chain. The tile (queries x
 * 16-key vectors) is sized to the register file and changes no result. */

/* The body for constant nq and nv (16 * nv keys from column j0 of kt), so the accumulators stay in
 * registers (called with literals). kreg: each key vector is loaded once into a register (v_reg)
 * and used by the nq fmas; 0: every fma loads it (a memory operand), which frees the registers
 * for 3 queries x 32 keys on AVX2. */
static inline __attribute__((always_inline)) void scores_nq(const float *qs, const int nq, const int nv, const int kreg,
                                                            const float *kt, int ldk, int hd, float *out, size_t ld) {
    vec16 acc[4][4];
    #pragma GCC unroll 4
    for (int qi = 0; qi < nq; qi++)
        #pragma GCC unroll 4
        for (int u = 0; u < nv; u++) acc[qi][u] = v_zero();
    for (int d = 0; d < hd; d++) {
        vec16 k[4];
        #pragma GCC unroll 4
        for (int u = 0; u < nv; u++) {
            k[u] = v_load(kt + (size_t)d * ldk + 16 * u);
            if (kreg) v_reg(&k[u]);
        }
        #pragma GCC unroll 4
        for (int qi = 0; qi < nq; qi++) {
            vec16 qv = v_set1(qs[(size_t)qi * hd + d]);
            #pragma GCC unroll 4
            for (int u = 0; u < nv; u++) acc[qi][u] = v_fma(qv, k[u], acc[qi][u]);
        }
    }
    #pragma GCC unroll 4
    for (int qi = 0; qi < nq; qi++)
        #pragma GCC unroll 4
        for (int u = 0; u < nv; u++) v_store(out + qi * ld + 16 * u, acc[qi][u]);
}

static inline __attribute__((always_inline)) void scores_nv(const float *qs, int nq, const int nv, const float *kt,
                                                            int ldk, int hd, float *out, size_t ld) {
    switch (nq) {
    case 4: scores_nq(qs, 4, nv, 1, kt, ldk, hd, out, ld); break;
    case 3: scores_nq(qs, 3, nv, 1, kt, ldk, hd, out, ld); break;
    case 2: scores_nq(qs, 2, nv, 1, kt, ldk, hd, out, ld); break;
    default: scores_nq(qs, 1, nv, 1, kt, ldk, hd, out, ld); break;
    }
}

static void scores_block(const float *qs, int nq, const float *kt, int nkeys, int hd, float *out, size_t ld) {
#if VEC16_REGS >= 32   /* up to 4 queries x 64 keys: 16 accumulators */
    if (nkeys == 64) scores_nv(qs, nq, 4, kt, nkeys, hd, out, ld);
    else scores_nv(qs, nq, 2, kt, nkeys, hd, out, ld);
#else                  /* 2 queries x 32 keys: 4 accumulators, 2 key vectors; 3 queries (SmolLM2's
                        * group) as 3 x 32 from memory operands, not 2 + 1 (one query's 2
                        * accumulators wait on the fma latency) */
    if (nq == 3) {
        for (int j0 = 0; j0 < nkeys; j0 += 32) scores_nq(qs, 3, 2, 0, kt + j0, nkeys, hd, out + j0, ld);
        return;
    }
    for (int q0 = 0; q0 < nq; q0 += 2)
        for (int j0 = 0; j0 < nkeys; j0 += 32)
            scores_nv(qs + (size_t)q0 * hd, nq - q0 < 2 ? nq - q0 : 2, 2, kt + j0, nkeys, hd, out + q0 * ld + j0, ld);
#endif
}

/* For nr (<= 4) query rows with the same key range: o[r][d] = fma(w[r][j], v[j][d], o[r][d]) for
 * j = 0..n-1 ascending — per element the reference's scalar loop; vectorised across d, the rows
 * share each V load. o [nr][hd], w rows ldw apart, v [n][hd]. */

/* V rows read where they are stored (kv.h's layout, h values each), for pv_block: row j at rows +
 * j * rb, its value column c0 + d0 + c read for output column d0 + c; for int8 the 16 * nv columns
 * lie in one scale group, for the one-table block formats they start a block (the caller's
 * condition: split_values, attn_item in decode) */
typedef struct {
    const uint8_t *rows;
    size_t rb;
    int h, c0;
} pv_rows;

/* 16 * nv outputs (nv = 2 or 4) of nr rows, from column d0 (nr and nv are constants at each call:
 * registers, not the stack); vreg as scores_nq's kreg. V from v [n][hd], or, with q (not NULL:
 * a literal at each call, so that the test folds), decoded from q's rows of format qf (a literal:
 * int8, or on AVX-512 f16, q4_0, q4_1, iq4_nl, mxfp4) in registers: the same values
 * kv_dequantize_cols gives, without storing them first (NOTES.md rows 41-44). */
static inline __attribute__((always_inline)) void pv_block(float *o, const float *w, size_t ldw, const int nr,
                                                          const int nv, const int vreg, const float *v, int n, int hd, int d0,
                                                          const kv_fmt qf, const pv_rows *q) {
    vec16 acc[4][4];
    #pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 4
        for (int u = 0; u < nv; u++) acc[r][u] = v_load(o + (size_t)r * hd + d0 + 16 * u);
    for (int j = 0; j < n; j++) {
        vec16 vv[4];
        if (q) {
            const uint8_t *rj = q->rows + (size_t)j * q->rb;
            int c = q->c0 + d0;
            if (qf == KV_INT8) {
                vec16 sc = kv_int8_scale(rj, q->h, c);
                #pragma GCC unroll 4
                for (int u = 0; u < nv; u++) vv[u] = kv_int8_vec16(rj, c + 16 * u, sc);
            }
#if VEC16_REGS >= 32
            else if (qf == KV_F16) {
                #pragma GCC unroll 4
                for (int u = 0; u < nv; u++) vv[u] = v_load_f16(rj + 2 * (size_t)(c + 16 * u));
            } else {   /* one table per block for its two halves */
                #pragma GCC unroll 2
                for (int u = 0; u < nv; u += 2) {
                    const uint8_t *b = rj + (size_t)kv_vec_block(qf) * (size_t)((c + 16 * u) / 32);
                    vec16 t = kv_vec_table(qf, b);
                    vv[u] = kv_vec_pick(qf, b, t, 0);
                    vv[u + 1] = kv_vec_pick(qf, b, t, 1);
                }
            }
#endif
        } else {
            const float *vj = v + (size_t)j * hd + d0;
            #pragma GCC unroll 4
            for (int u = 0; u < nv; u++) {
                vv[u] = v_load(vj + 16 * u);
                if (vreg) v_reg(&vv[u]);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            vec16 wr = v_set1(w[(size_t)r * ldw + j]);
            #pragma GCC unroll 4
            for (int u = 0; u < nv; u++) acc[r][u] = v_fma(wr, vv[u], acc[r][u]);
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 4
        for (int u = 0; u < nv; u++) v_store(o + (size_t)r * hd + d0 + 16 * u, acc[r][u]);
}

/* pv_block with nr as a literal (nr <= 4) */
static inline __attribute__((always_inline)) void pv_cols(float *o, const float *w, size_t ldw, int nr, const int nv,
                                                         const float *v, int n, int hd, int d0, const kv_fmt qf,
                                                         const pv_rows *q) {
    switch (nr) {
    case 4: pv_block(o, w, ldw, 4, nv, 1, v, n, hd, d0, qf, q); break;
    case 3: pv_block(o, w, ldw, 3, nv, 1, v, n, hd, d0, qf, q); break;
    case 2: pv_block(o, w, ldw, 2, nv, 1, v, n, hd, d0, qf, q); break;
    default: pv_block(o, w, ldw, 1, nv, 1, v, n, hd, d0, qf, q); break;
    }
}

/* 1 if decode (split_values, attn_item with one token) reads V rows of format f and head dim hd in
 * pv_block, 64 columns at a time (hd % 64 == 0): one int8 scale group, two whole blocks */
static int pv_stored_ok(kv_fmt f, int hd) {
#if VEC16_REGS >= 32
    return hd % 64 == 0 && (f == KV_INT8 || f == KV_F16 || kv_vec_block(f) != 0);
#else
    (void)f;
    (void)hd;
    return 0;
#endif
}

/* columns d0 .. d0 + 63 of o [nr][ldo] += w [nr][n] (rows ldw apart) times columns q->c0 + d0 ..
 * q->c0 + d0 + 63 of q's stored rows, of format f (pv_stored_ok), with f as a literal in pv_block */
static void pv_stored(kv_fmt f, float *o, int ldo, int d0, const float *w, size_t ldw, int nr, const pv_rows *q, int n) {
    switch (f) {
    case KV_INT8: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_INT8, q); break;
#if VEC16_REGS >= 32
    case KV_F16: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_F16, q); break;
    case KV_Q4_0: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_Q4_0, q); break;
    case KV_Q4_1: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_Q4_1, q); break;
    case KV_IQ4_NL: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_IQ4_NL, q); break;
    case KV_MXFP4: pv_cols(o, w, ldw, nr, 4, NULL, n, ldo, d0, KV_MXFP4, q); break;
#endif
    default: break;
    }
}

static void pv_accumulate(float *o, const float *w, size_t ldw, int nr, const float *v, int n, int hd) {
    int d0 = 0;
#if VEC16_REGS >= 32   /* up to 4 rows x 64 columns: 16 accumulators */
    for (; d0 + 64 <= hd; d0 += 64) pv_cols(o, w, ldw, nr, 4, v, n, hd, d0, KV_F32, NULL);
    for (; d0 + 32 <= hd; d0 += 32) pv_cols(o, w, ldw, nr, 2, v, n, hd, d0, KV_F32, NULL);
#else                  /* 2 rows x 32 columns: 4 accumulators, 2 V vectors; 3 rows as 3 x 32 from
                        * memory operands (as scores_block) */
    if (nr == 3)
        for (; d0 + 32 <= hd; d0 += 32) pv_block(o, w, ldw, 3, 2, 0, v, n, hd, d0, KV_F32, NULL);
    for (; d0 + 32 <= hd; d0 += 32)
        for (int r = 0; r < nr; r += 2)
            pv_cols(o + (size_t)r * hd, w + (size_t)r * ldw, ldw, nr - r < 2 ? nr - r : 2, 2, v, n, hd, d0, KV_F32, NULL);
#endif
    for (; d0 + 16 <= hd; d0 += 16)
        for (int r = 0; r < nr; r++) {
            vec16 acc = v_load(o + (size_t)r * hd + d0);
            for (int j = 0; j < n; j++) acc = v_fma(v_set1(w[(size_t)r * ldw + j]), v_load(v + (size_t)j * hd + d0), acc);
            v_store(o + (size_t)r * hd + d0, acc);
        }
    for (; d0 < hd; d0++)
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < n; j++) o[(size_t)r * hd + d0] = fmaf(w[(size_t)r * ldw + j], v[(size_t)j * hd + d0], o[(size_t)r * hd + d0]);
}

/* s[j] *= scale for j < n; returns max s[j] (the max is exact in any order). */
static float scale_max(float *s, int n, float scale) {
    float m = -INFINITY;
    int j = 0;
    vec16 vs = v_set1(scale), vm = v_set1(-INFINITY);
    for (; j + 16 <= n; j += 16) {
        vec16 v = v_mul(v_load(s + j), vs);
        v_store(s + j, v);
        vm = v_max(vm, v);
    }
    m = v_hmax(vm);
    for (; j < n; j++) {
        s[j] *= scale;
        if (s[j] > m) m = s[j];
    }
    return m;
}

/* kt[d][j] = vblk[j][d] for j < nk, 0 for nk <= j < nkeys (32 or 64). vblk [nkeys][hd] (rows nk.. are
 * overwritten with zeros), kt [hd][nkeys]. */
static void transpose_block(float *vblk, int nk, int hd, float *kt, int nkeys) {
    if (hd % 16 == 0) {   /* 16 x 16 tiles in registers */
        if (nk < nkeys) memset(vblk + (size_t)nk * hd, 0, sizeof(float) * (size_t)(nkeys - nk) * hd);
        for (int j0 = 0; j0 < nkeys; j0 += 16)
            for (int d0 = 0; d0 < hd; d0 += 16) v_transpose16(vblk + (size_t)j0 * hd + d0, (size_t)hd, kt + (size_t)d0 * nkeys + j0, (size_t)nkeys);
        return;
    }
    for (int j = 0; j < nk; j++)
        for (int d = 0; d < hd; d++) kt[(size_t)d * nkeys + j] = vblk[(size_t)j * hd + d];
    for (int j = nk; j < nkeys; j++)
        for (int d = 0; d < hd; d++) kt[(size_t)d * nkeys + j] = 0.0f;
}

/* k_block's register path for one format f (a literal at each call, so that kv_vec16 folds to its
 * case): keys [jt, jt + 16) x values [d0, d0 + 16) per tile, rows rb bytes apart from row; for the
 * one-table block formats in full blocks of keys, both tiles of a 32-value block from one table
 * per key (the same values). */
static inline __attribute__((always_inline)) void k_tiles(const kv_fmt f, const uint8_t *row, size_t rb, int hd,
                                                          int nk, float *kt, int nkeys) {
#if VEC16_REGS >= 32
    if (kv_vec_block(f) && nk == nkeys) {   /* one table per key and block, built once for both halves */
        size_t bb = (size_t)kv_vec_block(f);
        for (int jt = 0; jt < nkeys; jt += 16)
            for (int c = 0; c < hd / 32; c++) {
                const uint8_t *b = row + (size_t)jt * rb + bb * (size_t)c;   /* key jt's block c; key jt + i's is i * rb on */
                vec16 t[16], r[16];
                #pragma GCC unroll 16
                for (int i = 0; i < 16; i++) t[i] = kv_vec_table(f, b + (size_t)i * rb);
                for (int second = 0; second < 2; second++) {
                    #pragma GCC unroll 16
                    for (int i = 0; i < 16; i++) r[i] = kv_vec_pick(f, b + (size_t)i * rb, t[i], second);
                    v_transpose16r(r, kt + (size_t)(32 * c + 16 * second) * nkeys + jt, (size_t)nkeys);
                }
            }
        return;
    }
#endif
    for (int jt = 0; jt < nkeys; jt += 16)
        for (int d0 = 0; d0 < hd; d0 += 16) {
            vec16 r[16];
            if (jt + 16 <= nk) {
                #pragma GCC unroll 16
                for (int i = 0; i < 16; i++) r[i] = kv_vec16(f, row + (size_t)(jt + i) * rb, hd, d0);
            } else
                for (int i = 0; i < 16; i++) r[i] = jt + i < nk ? kv_vec16(f, row + (size_t)(jt + i) * rb, hd, d0) : v_zero();
            v_transpose16r(r, kt + (size_t)d0 * nkeys + jt, (size_t)nkeys);
        }
}

/* kt[d][j] = key j0 + j of KV head g as the query at position p reads it, for j < nk, and 0 for
 * nk <= j < nkeys (32 or 64): kt [hd][nkeys]. With 32 vector registers (AVX-512) the formats
 * kv_vec.h decodes go from the stored rows into registers and are transposed there, 16 x 16 at a
 * time; otherwise (a 16 x 16 tile does not fit 16 ymm: on AVX2 the register path was slower,
 * NOTES.md row 30) and for the other formats (KIVI, bf16, the fp8 and ternary ones) the rows are
 * dequantised into vblk [nkeys][hd] first. The same values either way. */
static void k_block(const cache *c, int layer, int g, int p, int j0, int nk, float *kt, int nkeys, float *vblk) {
    const cache_head *H = cache_head_at(c, layer, g);
    const uint8_t *row = cache_k_row(c, layer, j0, g);   /* [nk][k_row_bytes] */
    size_t rb = H->k_row_bytes;
    int hd = c->hd;
    kv_fmt f = kv_fmt_base(H->fk);   /* the stored bytes' codec (a KIVI format is itself: not kv_vec_ok) */
    if (VEC16_REGS < 32 || !kv_vec_ok(f, hd)) {
        cache_k_rows(c, layer, g, p, j0, nk, vblk);
        transpose_block(vblk, nk, hd, kt, nkeys);
        return;
    }
    KV_VEC_DISPATCH(f, k_tiles, row, rb, hd, nk, kt, nkeys);
}

/* Asks for the rows from p (one head's rows are contiguous) while the current block is used:
 * attention is otherwise bound by the latency of streaming the cache from memory. */
static inline __attribute__((always_inline)) void prefetch_block(const uint8_t *p, size_t row_bytes, int rows) {
    prefetch_l1(p, row_bytes * (size_t)rows);
}

static void attn_item(void *vctx, int item, int thread) {
    attn_ctx *x = vctx;
    const cache *c = x->c;
    const attn_args *a = x->a;
    int hd = c->hd, group = a->n_head / c->n_kv, hpi = x->heads_per_item;
    int hset = item / x->n_tiles, tile = item % x->n_tiles;
    int h0 = hset * hpi, g = h0 / group;
    const cache_head *H = cache_head_at(c, a->layer, g);   /* this KV head's formats */
    int t0 = tile * QT, t1 = t0 + QT < a->T ? t0 + QT : a->T, nt = t1 - t0;
    int nq = nt * hpi;      /* query rows: row i = (token t0 + i / hpi, head h0 + i % hpi) */
    float *base = x->scratch + (size_t)thread * x->per_thread;
    float *q = base;                               /* [rows][hd] queries, rotated if K is */
    float *o = q + x->rows * hd;                   /* [rows][hd] accumulators */
    float *kt = o + x->rows * hd;                  /* [hd][KEY_BLOCK] K block, transposed */
    float *vblk = kt + (size_t)hd * KEY_BLOCK;              /* [KEY_BLOCK][hd] V block */
    float *s = vblk + (size_t)KEY_BLOCK * hd;               /* [rows][max_keys] scores / weights */
    size_t ld = x->max_keys;
    int lo_q[QT * MAX_HPI] = {0}, hi_q[QT * MAX_HPI] = {0};
    float sum_q[QT * MAX_HPI] = {0};

    for (int i = 0; i < nq; i++) {
        int t = t0 + i / hpi, h = h0 + i % hpi, pos = a->pos0 + t;
        lo_q[i] = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        hi_q[i] = pos;
        memcpy(q + (size_t)i * hd, a->q + ((size_t)t * a->n_head + h) * hd, sizeof(float) * (size_t)hd);
        kv_rotate(H->fk, q + (size_t)i * hd, hd);
    }
    int lo = lo_q[0], hi = hi_q[nq - 1];

    /* scores: s[i][j - lo] */
    for (int j0 = lo; j0 <= hi; j0 += KEY_BLOCK) {
        int nk = hi - j0 + 1 < KEY_BLOCK ? hi - j0 + 1 : KEY_BLOCK;
        if (j0 + KEY_BLOCK <= hi) prefetch_block(cache_k_row(c, a->layer, j0 + KEY_BLOCK, g), H->k_row_bytes, hi - j0 - KEY_BLOCK + 1 < KEY_BLOCK ? hi - j0 - KEY_BLOCK + 1 : KEY_BLOCK);
        k_block(c, a->layer, g, a->pos0, j0, nk, kt, KEY_BLOCK, vblk);   /* one KIVI boundary per call (attn_run_ws); vblk is free again until the V pass */
        /* only queries whose range meets this block */
        int i0 = 0;
        while (i0 < nq && hi_q[i0] < j0) i0++;
        int i1 = nq;
        while (i1 > i0 && lo_q[i1 - 1] > j0 + KEY_BLOCK - 1) i1--;
        for (int i = i0; i < i1; i += 4) {
            int n4 = i1 - i < 4 ? i1 - i : 4;
            scores_block(q + (size_t)i * hd, n4, kt, KEY_BLOCK, hd, s + (size_t)i * ld + (j0 - lo), ld);
        }
    }
    /* softmax weights per query over its own range */
    for (int i = 0; i < nq; i++) {
        float *si = s + (size_t)i * ld + (lo_q[i] - lo);
        int n = hi_q[i] - lo_q[i] + 1;
        int h = h0 + i % hpi;
        float m = sink_max(a, h, scale_max(si, n, a->scale));
        sum_q[i] = sink_sum(a, h, m, ops_exp_sub_sum(si, si, m, n));
        for (int d = 0; d < hd; d++) o[(size_t)i * hd + d] = 0.0f;
    }
    /* weighted sum of V, keys ascending per query; in decode (one token, whose runs of up to 4
     * heads read each value once) V is decoded in registers where split_values does (NOTES.md
     * row 43) */
    int stored = a->T == 1 && pv_stored_ok(H->fv, hd);
    for (int j0 = lo; j0 <= hi; j0 += KEY_BLOCK) {
        int nk = hi - j0 + 1 < KEY_BLOCK ? hi - j0 + 1 : KEY_BLOCK;
        if (j0 + KEY_BLOCK <= hi) prefetch_block(cache_v_row(c, a->layer, j0 + KEY_BLOCK, g), H->v_row_bytes, hi - j0 - KEY_BLOCK + 1 < KEY_BLOCK ? hi - j0 - KEY_BLOCK + 1 : KEY_BLOCK);
        if (!stored) cache_v_rows(c, a->layer, g, a->pos0, j0, nk, vblk);
        for (int i = 0; i < nq;) {
            int nr = 1;   /* rows of one token (its heads) share the key range */
            while (nr < 4 && i + nr < nq && lo_q[i + nr] == lo_q[i] && hi_q[i + nr] == hi_q[i]) nr++;
            int jb = j0 > lo_q[i] ? j0 : lo_q[i];
            int je = j0 + nk - 1 < hi_q[i] ? j0 + nk - 1 : hi_q[i];
            const float *wi = s + (size_t)i * ld + (jb - lo);
            if (je >= jb && stored) {
                pv_rows vq = { cache_v_row(c, a->layer, jb, g), H->v_row_bytes, hd, 0 };
                for (int d0 = 0; d0 < hd; d0 += 64) pv_stored(H->fv, o + (size_t)i * hd, hd, d0, wi, ld, nr, &vq, je - jb + 1);
            } else if (je >= jb) {
                pv_accumulate(o + (size_t)i * hd, wi, ld, nr, vblk + (size_t)(jb - j0) * hd, je - jb + 1, hd);
            }
            i += nr;
        }
    }
    for (int i = 0; i < nq; i++) {
        float *oi = o + (size_t)i * hd;
        for (int d = 0; d < hd; d++) oi[d] = oi[d] / sum_q[i];
        kv_rotate(H->fv, oi, hd);
        int t = t0 + i / hpi, h = h0 + i % hpi;
        memcpy(a->out + ((size_t)t * a->n_head + h) * hd, oi, sizeof(float) * (size_t)hd);
    }
}

/* ---- decode over many keys: keys, then columns, split across threads ----------------------- */
/* One query position, n keys. Three pool runs: (A) scores of every head over ranges of keys,
 * (B) the weights exp(s - max) over the same ranges, (C) per KV head and a run of output columns
 * (split_cols), the sums of the weights and the weighted sum of V. Each value is the same
 * operation sequence as in attn_item: scores and weights are elementwise, max is exact in any
 * order, and the sum (ops_sum8) and each output element (sequential over keys) are computed whole
 * by one item. */

typedef struct {
    const cache *c;
    const attn_args *a;
    int lo, n;              /* keys lo .. lo + n - 1 */
    int group;              /* query heads per KV head */
    int range, n_ranges;    /* keys per item in A and B (a multiple of KEY_BLOCK_DEC) */
    int cols, n_colsets;    /* columns per item in C: a multiple of KV_CHUNK, or hd for rotated V */
    size_t ld;              /* score row stride: n rounded up to KEY_BLOCK_DEC */
    float *q;               /* [n_head][hd] queries, rotated if K is */
    float *s;               /* [n_head][ld] scores, then weights */
    float *pmax;            /* [n_head][n_ranges] max scaled score per range */
    float *scratch;         /* [n_threads][per_thread]: kt [hd][KEY_BLOCK_DEC], vblk [KEY_BLOCK_DEC][hd], o [group][hd] */
    size_t per_thread;
} split_ctx;

static void split_scores(void *vctx, int item, int thread) {
    split_ctx *x = vctx;
    const cache *c = x->c;
    int hd = c->hd, g = item / x->n_ranges, r = item % x->n_ranges;
    const cache_head *H = cache_head_at(c, x->a->layer, g);
    float *kt = x->scratch + (size_t)thread * x->per_thread, *vblk = kt + (size_t)hd * KEY_BLOCK_DEC;
    int jb = r * x->range, je = jb + x->range < x->n ? jb + x->range : x->n;   /* relative to lo */
    for (int j0 = jb; j0 < je; j0 += KEY_BLOCK_DEC) {
        int nk = je - j0 < KEY_BLOCK_DEC ? je - j0 : KEY_BLOCK_DEC;
        if (j0 + KEY_BLOCK_DEC < je) prefetch_block(cache_k_row(c, x->a->layer, x->lo + j0 + KEY_BLOCK_DEC, g), H->k_row_bytes, je - j0 - KEY_BLOCK_DEC < KEY_BLOCK_DEC ? je - j0 - KEY_BLOCK_DEC : KEY_BLOCK_DEC);
        k_block(c, x->a->layer, g, x->a->pos0, x->lo + j0, nk, kt, KEY_BLOCK_DEC, vblk);
        for (int h = 0; h < x->group; h += 4) {
            int nq = x->group - h < 4 ? x->group - h : 4;
            int h0 = g * x->group + h;
            scores_block(x->q + (size_t)h0 * hd, nq, kt, KEY_BLOCK_DEC, hd, x->s + (size_t)h0 * x->ld + j0, x->ld);
        }
    }
    for (int h = g * x->group; h < (g + 1) * x->group; h++)
        x->pmax[(size_t)h * x->n_ranges + r] = scale_max(x->s + (size_t)h * x->ld + jb, je - jb, x->a->scale);
}

/* The softmax max of head h: the max over its ranges' maxima, raised to the sink. */
static float split_head_max(const split_ctx *x, int h) {
    float m = -INFINITY;
    for (int i = 0; i < x->n_ranges; i++)
        if (x->pmax[(size_t)h * x->n_ranges + i] > m) m = x->pmax[(size_t)h * x->n_ranges + i];
    return sink_max(x->a, h, m);
}

static void split_weights(void *vctx, int item, int thread) {
    (void)thread;
    split_ctx *x = vctx;
    int h = item / x->n_ranges, r = item % x->n_ranges;
    float m = split_head_max(x, h);
    int jb = r * x->range, je = jb + x->range < x->n ? jb + x->range : x->n;
    float *sh = x->s + (size_t)h * x->ld + jb;
    ops_exp_sub_sum(sh, sh, m, je - jb);   /* the weights; their sum is taken whole in C */
}

static void split_values(void *vctx, int item, int thread) {
    split_ctx *x = vctx;
    const cache *c = x->c;
    const attn_args *a = x->a;
    int hd = c->hd, g = item / x->n_colsets, d0 = (item % x->n_colsets) * x->cols;
    const cache_head *H = cache_head_at(c, a->layer, g);
    int d1 = d0 + x->cols < hd ? d0 + x->cols : hd, w = d1 - d0;
    float *vblk = x->scratch + (size_t)thread * x->per_thread + (size_t)hd * KEY_BLOCK_DEC;   /* [KEY_BLOCK_DEC][w] */
    float *o = vblk + (size_t)KEY_BLOCK_DEC * hd;                                              /* [group][w] */
    const float *sg = x->s + (size_t)g * x->group * x->ld;
    int stored = pv_stored_ok(H->fv, hd) && w % 64 == 0 && d0 % 64 == 0;
    for (int i = 0; i < x->group * w; i++) o[i] = 0.0f;
    for (int j0 = 0; j0 < x->n; j0 += KEY_BLOCK_DEC) {
        int nk = x->n - j0 < KEY_BLOCK_DEC ? x->n - j0 : KEY_BLOCK_DEC;
        if (j0 + KEY_BLOCK_DEC < x->n) prefetch_block(cache_v_row(c, a->layer, x->lo + j0 + KEY_BLOCK_DEC, g), H->v_row_bytes, x->n - j0 - KEY_BLOCK_DEC < KEY_BLOCK_DEC ? x->n - j0 - KEY_BLOCK_DEC : KEY_BLOCK_DEC);
        if (stored) {   /* V decoded in registers (NOTES.md rows 41, 42 and 44) */
            pv_rows q = { cache_v_row(c, a->layer, x->lo + j0, g), H->v_row_bytes, hd, d0 };
            for (int h = 0; h < x->group; h += 4)
                for (int dc = 0; dc < w; dc += 64)
                    pv_stored(H->fv, o + (size_t)h * w, w, dc, sg + (size_t)h * x->ld + j0, x->ld, x->group - h < 4 ? x->group - h : 4, &q, nk);
            continue;
        }
        if (kv_fmt_is_kivi(H->fv)) cache_v_rows(c, a->layer, g, a->pos0, x->lo + j0, nk, vblk);   /* then w == hd */
        else kv_dequantize_cols(H->fv, cache_v_row(c, a->layer, x->lo + j0, g), H->v_row_bytes, nk, vblk, hd, d0, d1);
        for (int h = 0; h < x->group; h += 4) {
            int nr = x->group - h < 4 ? x->group - h : 4;
            pv_accumulate(o + (size_t)h * w, sg + (size_t)h * x->ld + j0, x->ld, nr, vblk, nk, w);
        }
    }
    for (int h = 0; h < x->group; h++) {
        int hq = g * x->group + h;
        float sum = sink_sum(a, hq, split_head_max(x, hq), ops_sum8(sg + (size_t)h * x->ld, x->n));
        float *oh = o + (size_t)h * w;
        for (int d = 0; d < w; d++) oh[d] = oh[d] / sum;
        kv_rotate(H->fv, oh, hd);   /* when V is rotated: then w == hd */
        memcpy(a->out + (size_t)(g * x->group + h) * hd + d0, oh, sizeof(float) * (size_t)w);
    }
}

/* Output columns per item of split_values: a multiple of KV_CHUNK, the one that makes the busiest
 * thread's share of the V bytes smallest, ties to the wider. An item is charged its run of each V
 * row (row_bytes for hd values) rounded up to 128 bytes, the pair of lines the hardware prefetches
 * together: narrower items of one row then pay for the same lines twice. Gemma 3 (one KV head of
 * 256, 2 threads) gets 2 items of 128 columns, not 8 of 32, which read the block formats' rows 2 to
 * 4 times over (NOTES.md row 32); SmolLM2 (3 heads of 64, rows of 128 bytes or less) 3 items of 64,
 * not 6 of 32 (row 33). */
static int split_cols(int hd, size_t row_bytes, int n_kv, int threads) {
    int best = KV_CHUNK;
    size_t best_cost = SIZE_MAX;
    for (int sets = 1; sets * KV_CHUNK < hd + KV_CHUNK; sets++) {
        int cols = ((hd + sets - 1) / sets + KV_CHUNK - 1) / KV_CHUNK * KV_CHUNK;
        size_t items = (size_t)n_kv * (size_t)((hd + cols - 1) / cols);
        size_t pairs = (row_bytes * (size_t)cols + (size_t)hd * 128 - 1) / ((size_t)hd * 128);   /* 128-byte runs per row and item */
        size_t cost = (items + (size_t)threads - 1) / (size_t)threads * pairs;                     /* on the busiest thread */
        if (cost < best_cost) { best_cost = cost; best = cols; }
    }
    return best;
}

static int attend_split(pool *p, const cache *c, const attn_args *a, float *scratch, size_t n_scratch) {
    int hd = c->hd, pos = a->pos0, threads = pool_threads(p);
    split_ctx x = { .c = c, .a = a, .group = a->n_head / c->n_kv };
    x.lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
    x.n = pos - x.lo + 1;
    x.ld = (size_t)(x.n + KEY_BLOCK_DEC - 1) / KEY_BLOCK_DEC * KEY_BLOCK_DEC;
    int want = (8 * threads + c->n_kv - 1) / c->n_kv;   /* ranges per KV head: >= 8 items per thread */
    x.range = (x.n + want - 1) / want;
    x.range = (x.range + KEY_BLOCK_DEC - 1) / KEY_BLOCK_DEC * KEY_BLOCK_DEC;
    x.n_ranges = (x.n + x.range - 1) / x.range;
    int v_rot = 0;          /* some KV head's V is rotated: its items need every column */
    size_t v_bytes = 0;     /* the widest V row of the layer's heads */
    for (int g = 0; g < c->n_kv; g++) {
        const cache_head *H = cache_head_at(c, a->layer, g);
        v_rot |= kv_fmt_rotated(H->fv) || kv_fmt_is_kivi(H->fv);
        if (H->v_row_bytes > v_bytes) v_bytes = H->v_row_bytes;
    }
    x.cols = v_rot ? hd : split_cols(hd, v_bytes, c->n_kv, threads);
    x.n_colsets = (hd + x.cols - 1) / x.cols;
    x.per_thread = (size_t)hd * KEY_BLOCK_DEC * 2 + (size_t)x.group * hd;
    size_t n_q = up16((size_t)a->n_head * hd), n_s = up16((size_t)a->n_head * x.ld);
    size_t n_pmax = up16((size_t)a->n_head * x.n_ranges), need = n_q + n_s + n_pmax + x.per_thread * (size_t)threads;
    float *own = NULL, *buf = scratch;
    int ret = -1;
    if (scratch && need > n_scratch) return -1;
    if (!buf && !(buf = own = malloc(sizeof(float) * need))) return -1;
    x.q = buf;                     /* [n_head][hd] */
    x.s = x.q + n_q;               /* [n_head][ld] */
    x.pmax = x.s + n_s;            /* [n_head][n_ranges] */
    x.scratch = x.pmax + n_pmax;   /* [threads][per_thread] */
    memcpy(x.q, a->q, sizeof(float) * (size_t)a->n_head * hd);
    for (int h = 0; h < a->n_head; h++) kv_rotate(cache_head_at(c, a->layer, h / x.group)->fk, x.q + (size_t)h * hd, hd);
    pool_run(p, split_scores, &x, c->n_kv * x.n_ranges);
    pool_run(p, split_weights, &x, a->n_head * x.n_ranges);
    pool_run(p, split_values, &x, c->n_kv * x.n_colsets);
    ret = 0;
    free(own);
    return ret;
}

static int attend(pool *p, const cache *c, const attn_args *a, float *scratch, size_t n_scratch) {
    int group = a->n_head / c->n_kv;
    if (a->T == 1 && group <= MAX_HPI && pool_threads(p) > 1 && a->pos0 + 1 >= ATTN_SPLIT_MIN_KEYS &&
        (a->window <= 0 || a->window >= ATTN_SPLIT_MIN_KEYS))
        return attend_split(p, c, a, scratch, n_scratch);
    attn_ctx x = { c, a, (a->T + QT - 1) / QT, 1, 0, 0, NULL, 0 };
    /* all heads of a KV group in one item (they share the K/V dequantisation) unless that leaves
     * threads idle; either way each (query, head) is computed the same way */
    int hpi = group <= MAX_HPI ? group : 1;
    while (hpi > 1 && (a->n_head / hpi) * x.n_tiles < pool_threads(p)) {
        int h2 = hpi - 1;
        while (h2 > 1 && group % h2) h2--;
        hpi = h2;
    }
    x.heads_per_item = hpi;
    /* a tile's key range spans its queries' ranges: at most QT - 1 + (window or pos0 + T) keys */
    size_t span = (size_t)(a->window > 0 ? a->window : a->pos0 + a->T) + QT + KEY_BLOCK;
    x.max_keys = span;
    size_t rows = (size_t)(a->T < QT ? a->T : QT) * MAX_HPI;   /* query rows an item can hold */
    x.per_thread = rows * c->hd * 2 + (size_t)c->hd * KEY_BLOCK * 2 + rows * span;
    x.rows = rows;
    size_t need = x.per_thread * (size_t)pool_threads(p);
    float *own = NULL;
    if (scratch && need > n_scratch) return -1;
    if (!scratch && !(own = malloc(sizeof(float) * need))) return -1;
    x.scratch = scratch ? scratch : own;
    pool_run(p, attn_item, &x, (a->n_head / hpi) * x.n_tiles);
    free(own);
    return 0;
}

size_t attn_scratch_floats(const cache *c, int n_head, int max_T, int max_window, int threads) {
    size_t hd = (size_t)c->hd, nh = (size_t)n_head, th = (size_t)threads;
    size_t keys = (size_t)c->n_ctx > (size_t)max_window ? (size_t)c->n_ctx : (size_t)max_window;
    /* tiled (attend): the largest span and rows any call can have */
    size_t rows = (size_t)(max_T < QT ? max_T : QT) * MAX_HPI, span = keys + QT + KEY_BLOCK;
    size_t tiled = (rows * hd * 2 + hd * KEY_BLOCK * 2 + rows * span) * th;
    /* split decode (attend_split): scores of up to keys positions, at most want ranges per head */
    size_t group = nh / (size_t)c->n_kv, want = (8 * th + (size_t)c->n_kv - 1) / (size_t)c->n_kv;
    size_t ld = (keys + KEY_BLOCK_DEC - 1) / KEY_BLOCK_DEC * KEY_BLOCK_DEC;
    size_t split = up16(nh * hd) + up16(nh * ld) + up16(nh * want) + (hd * KEY_BLOCK_DEC * 2 + group * hd) * th;
    return tiled > split ? tiled : split;
}

int attn_run_ws(pool *p, const cache *c, const attn_args *a, float *scratch, size_t n_scratch) {
    cache view;
    attn_args av;
    layer_view(c, a, &view, &av);
    /* runs of queries that read every KIVI cell with the same boundary (one run without KIVI) */
    size_t row = (size_t)a->n_head * c->hd;   /* floats per query in q and out */
    for (int t0 = 0; t0 < a->T;) {
        int t1 = t0 + 1;
        while (t1 < a->T && !cache_kivi_step(&view, 0, a->pos0 + t1)) t1++;
        attn_args run = av;
        run.T = t1 - t0;
        run.pos0 = a->pos0 + t0;
        run.q = a->q + (size_t)t0 * row;
        run.out = a->out + (size_t)t0 * row;
        if (attend(p, &view, &run, scratch, n_scratch)) return -1;
        t0 = t1;
    }
    return 0;
}

int attn_run(pool *p, const cache *c, const attn_args *a) {
    return attn_run_ws(p, c, a, NULL, 0);
}

int attn_run_ref(const cache *c, const attn_args *a) {
    return attn_run_ref_ws(c, a, NULL, 0);
}

size_t attn_ref_scratch_floats(const cache *c) { return (size_t)c->n_ctx + 3 * (size_t)c->hd; }

int attn_run_ref_ws(const cache *c, const attn_args *a, float *scratch, size_t n_scratch) {
    cache view;
    attn_args av;
    layer_view(c, a, &view, &av);
    return attend_ref(&view, &av, scratch, n_scratch);
}
