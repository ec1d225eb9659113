/* kivi.h — KIVI-style asymmetric 2- and 4-bit KV caches: K quantised per channel over groups of G
 * tokens, V per token, the most recent tokens kept in f16 (docs/DESIGN.md §3.3.12).
 *
 * kivi2 / kivi4 are not row formats: a K group needs G tokens' values, so what a query reads
 * depends on its position. The cache (cache.c) keeps an f16 row of every token (kv.h's f16 bytes)
 * and, beside it, the quantised K groups and V rows; a query at position p reads keys
 * j < kivi_boundary(f, p) from the quantised form and the others from the f16 rows. The boundary
 * is a multiple of G with at least R tokens after it:
 *     b(p) = G * floor(max(0, p + 1 - R) / G)
 * (K and V alike, each with its own format's G and R). A group is quantised from the f16 rows of
 * its G tokens when the token that makes it readable (position (k + 1) G + R - 1 for group k) is
 * stored; an incomplete group stays f16. So the cache's state for a query at p depends only on the
 * tokens 0..p: batch invariance and one pass = separate runs hold (a truncation needs nothing: a
 * group past the new depth is quantised again when its token is stored again).
 *
 * Byte layouts (b = 2 or 4 bits, h = head dim, codes packed b bits each from bit 0 of byte 0
 * upwards: code i at bits (b i) % 8 of byte (b i) / 8; fp16 fields little-endian):
 *   K group (G tokens of one KV head): codes [G][h] (token-major), then h fp16 d, then h fp16 m
 *       (one pair per channel)                               G h b / 8 + 4 h bytes
 *   V row (one token): codes [h], then h / gv pairs { fp16 d; fp16 m }, gv = min(32, h)
 *                                                             h b / 8 + 4 h / gv bytes
 * The quantiser of a set of values z (the G values of one channel for K; the gv values of one
 * group for V), all read from f16 rows (exact in f32), is q4_1's rule with top = 2^b - 1 levels:
 *     mn, mx = min, max (f32); d = (mx - mn) / top; id = d ? 1 / d : 0;
 *     q = min(top, trunc((z - mn) * id + 0.5)) (0 when the argument is not positive or is NaN);
 *     stored fp16(d), fp16(mn); value = q * fp16(d) + fp16(mn) (f32 product, then add).
 * Bits per value: K b + 32 / G, V b + 32 / gv (kivi4 with G 32, h >= 32: 5 and 5).
 * Allowed h: a multiple of 4 with h <= 32 or h % 32 == 0, and 4h % G == 0 (so that a token's share
 * of the group's scales is whole bytes); h <= 1024.
 *
 * All functions are pure; nothing allocates. */
#ifndef STRATA_KIVI_H
#define STRATA_KIVI_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kvfmt.h"

/* 2 or 4 for a KIVI format, else 0; its G and R. */
int kivi_bits(kv_fmt f);
int kivi_group(kv_fmt f);
int kivi_residual(kv_fmt f);

/* b(p) above: keys below it are read quantised by the query at position p. */
int kivi_boundary(kv_fmt f, int p);

/* 0 if f is a KIVI format that fits head dim h; else -1 and one line in err. */
int kivi_check(kv_fmt f, int h, char *err, size_t errlen);

size_t kivi_k_group_bytes(kv_fmt f, int h);   /* one K group */
size_t kivi_v_row_bytes(kv_fmt f, int h);     /* one quantised V row */
/* The format's bytes per token of one KV head: K (is_v 0) G h b / 8 + 4h over G, V a row. */
size_t kivi_token_bytes(kv_fmt f, int h, int is_v);

/* K group from the G f16 rows at rows, rows + stride, ... (kv.h's f16 bytes, 2h each) into
 * dst[kivi_k_group_bytes]. */
void kivi_quant_k_group(kv_fmt f, const uint8_t *rows, size_t stride, int h, uint8_t *dst);
/* Tokens t0 .. t0 + n - 1 (t0 + n <= G) of a K group into y[n][h]. */
void kivi_dequant_k_rows(kv_fmt f, const uint8_t *grp, int h, int t0, int n, float *y);

/* V row from one f16 row (2h bytes) into dst[kivi_v_row_bytes]. */
void kivi_quant_v_row(kv_fmt f, const uint8_t *row16, int h, uint8_t *dst);
/* n quantised V rows at src, src + stride, ... into y[n][h]. */
void kivi_dequant_v_rows(kv_fmt f, const uint8_t *src, size_t stride, int n, int h, float *y);

#endif
