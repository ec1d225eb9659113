/* kvfmt.h — the KV formats by name: the kv_fmt enum, its names, and the per-layer "mix" syntax.
 *
 * No compute and no dependencies beyond the C library: kernels/kv.h (the codecs) builds on it,
 * and the driver links kernels/kvfmt.c alone to check the formats an arm spec names without
 * linking the engine (docs/DESIGN.md §1.1). Nothing here allocates; every function is pure.
 */
#ifndef STRATA_KVFMT_H
#define STRATA_KVFMT_H

#include <stddef.h>

typedef enum {
    KV_F32, KV_BF16, KV_F16, KV_INT8, KV_Q8_0, KV_Q4_0, KV_Q4_0R, KV_FP8,
    KV_Q4_1, KV_Q5_0, KV_Q5_1, KV_IQ4_NL, KV_E5M2, KV_E4M3S, KV_E5M2S, KV_NVFP4, KV_MXFP4,
    KV_NFMT
} kv_fmt;

/* Every name, space separated, in enum order (for usage texts and error messages). */
#define KV_FMT_NAMES "f32 bf16 f16 int8 q8_0 q4_0 q4_0r fp8 q4_1 q5_0 q5_1 iq4_nl e5m2 e4m3s e5m2s nvfp4 mxfp4"

/* Format from its name (KV_FMT_NAMES; exact, lower case). 0 and *out set on success; -1 for an
 * unknown name (or NULL), *out untouched. */
int kv_fmt_parse(const char *name, kv_fmt *out);

/* The name above (a static string); "?" for a value outside the enum. */
const char *kv_fmt_name(kv_fmt f);

/* A per-layer choice of format, a "mix": ITEM(+ITEM)*, where ITEM is
 *   FMT        the format of every layer no other item names (at most one such item)
 *   FMT@N      layer N (0-based); FMT@-N is the N-th layer from the end (-1 = the last)
 *   FMT@N-M    layers N..M (N <= M)
 * e.g. "int8+f16@0+f16@-1" (first and last layers f16, the others int8) or
 * "int8@1-28+f16@0+f16@29". A plain format name is a mix of one item. No spaces; no commas (a
 * mix is also an arm's name, and arm lists are comma separated). */
#define KV_MIX_ITEMS 16
typedef struct {
    int n;                              /* items */
    struct {
        kv_fmt f;
        int lo, hi;                     /* layers lo..hi; lo < 0: from the end (lo == hi) */
        int rest;                       /* 1: the default item (lo, hi unused) */
    } it[KV_MIX_ITEMS];
} kv_mix;

/* Parses spec into *out. 0, or -1 with one line in err (unknown format, bad layer syntax, two
 * default items, more than KV_MIX_ITEMS items). The layer count is checked by kv_mix_layers. */
int kv_mix_parse(const char *spec, kv_mix *out, char *err, size_t errlen);

/* The format of each of n_layer layers into out[n_layer]. 0, or -1 with one line in err: a layer
 * past the model (N >= n_layer or -N < -n_layer), a layer named twice, a layer with no format (no
 * default item). */
int kv_mix_layers(const kv_mix *m, int n_layer, kv_fmt *out, char *err, size_t errlen);

#endif
