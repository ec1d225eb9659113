/* kvfmt.h — the KV formats by name: the kv_fmt enum, its names, the rotation modifiers and the
 * "mix" syntax (formats per layer and per KV head).
 *
 * No compute and no dependencies beyond the C library: kernels/kv.h (the codecs) builds on it,
 * and the driver links kernels/kvfmt.c alone to check the formats an arm spec names without
 * linking the engine (docs/DESIGN.md §1.1). Nothing here allocates; every function is pure.
 */
#ifndef STRATA_KVFMT_H
#define STRATA_KVFMT_H

#include <stddef.h>

/* A format is a base format (below KV_NFMT), optionally OR-ed with ONE rotation modifier:
 *   KV_ROT_B  "+rot"   the Hadamard transform of each block of b = min(64, h) values of the head
 *                      vector (llama.cpp's block size for V; for K llama.cpp uses the largest power
 *                      of two dividing h, which is the whole head when h is a power of two: +roth)
 *   KV_ROT_H  "+roth"  the Hadamard transform of the whole head vector (h values)
 *   KV_ROT_P  "+rotp"  the same transform on each block of p values, p = the largest power of two
 *                      dividing h (h & -h): llama.cpp's K rotation for every head dim it rotates
 *                      (a multiple of 64: 128 at h = 384 = 3 x 128, 64 at 192, the whole head at
 *                      64, 128, 256); below 64 a power-of-two h is one block (so toy models run it)
 * e.g. (kv_fmt)(KV_INT8 | KV_ROT_B) is "int8+rot". KV_Q4_0R ("q4_0r", kept so that old results
 * and commands still read) is the same format as q4_0+roth: the same bytes, another name.
 * docs/DESIGN.md §3.3.11 has the transform, its operation order and how attention undoes it. */
typedef enum {
    KV_F32, KV_BF16, KV_F16, KV_INT8, KV_Q8_0, KV_Q4_0, KV_Q4_0R, KV_FP8,
    KV_Q4_1, KV_Q5_0, KV_Q5_1, KV_IQ4_NL, KV_E5M2, KV_E4M3S, KV_E5M2S, KV_NVFP4, KV_MXFP4,
    KV_TQ3, KV_TQ4,     /* whole-head rotation + Lloyd-Max codebook (kv.h), rotated like q4_0r */
    KV_NFMT,
    KV_KIVI2 = 0x40,    /* KIVI-style 2-bit and 4-bit caches (kivi.h): not row formats; G and R */
    KV_KIVI4 = 0x41,    /* in the bits from KV_KIVI_G_SHIFT / KV_KIVI_R_SHIFT */
    KV_ROT_B = 0x100,
    KV_ROT_H = 0x200,
    KV_ROT_P = 0x400,
} kv_fmt;

/* A KIVI format's parameters inside the kv_fmt value: log2(G) in bits 12..15, R in bits 16..27.
 * kv_fmt_parse fills them ("kivi4" = G 32, R 128; "kivi4-g16-r64"). */
#define KV_KIVI_G_SHIFT 12
#define KV_KIVI_R_SHIFT 16
#define KV_KIVI_G_DEFAULT 32
#define KV_KIVI_R_DEFAULT 128
#define KV_KIVI_R_MAX 4095

/* Every base name, space separated, in enum order, then the KIVI ones (for usage texts and error
 * messages). */
#define KV_FMT_NAMES "f32 bf16 f16 int8 q8_0 q4_0 q4_0r fp8 q4_1 q5_0 q5_1 iq4_nl e5m2 e4m3s e5m2s nvfp4 mxfp4 tq3 tq4 " \
                     "kivi2 kivi4 (kivi4-gG-rR: G tokens per K group, 8..256, R recent tokens in f16)"
/* The modifiers, for the same texts. */
#define KV_ROT_NAMES "FMT+rot (Hadamard of each 64-value block), FMT+roth (of the whole head) or FMT+rotp " \
                     "(of each block of the largest power of two dividing the head dim: llama.cpp's K rotation)"

/* Format from its name: a base name (KV_FMT_NAMES; exact, lower case), or a base name followed by
 * "+rot", "+roth" or "+rotp" (not q4_0r, tq3, tq4, which are rotated already, nor kivi), or kivi2 / kivi4 with optional
 * "-gG" (G a power of two in 8..256) and "-rR" (0 <= R <= KV_KIVI_R_MAX), in that order. 0 and
 * *out set on success; -1 for an unknown name (or NULL), *out untouched. */
int kv_fmt_parse(const char *name, kv_fmt *out);

/* The name above (a static string: "int8", "q4_0+roth"; a KIVI format's base name "kivi4" whatever
 * its G and R: kv_fmt_format writes the full name); "?" for a value that is no format. */
const char *kv_fmt_name(kv_fmt f);

/* The full name (kv_fmt_parse's input: "kivi4-g16-r64", defaults left out) into buf[len]. */
void kv_fmt_format(kv_fmt f, char *buf, size_t len);

/* 1 if f is a base format with at most one rotation modifier (and q4_0r has none), or a KIVI
 * format with G and R in range and no rotation; else 0. */
int kv_fmt_valid(kv_fmt f);

/* 1 for kivi2 / kivi4 (any G, R), else 0. */
int kv_fmt_is_kivi(kv_fmt f);

/* The base format without its rotation: the codec of the stored bytes (q4_0r -> q4_0). */
kv_fmt kv_fmt_base(kv_fmt f);

/* The rotation: 0, KV_ROT_B, KV_ROT_H or KV_ROT_P (q4_0r -> KV_ROT_H). */
int kv_fmt_rotation(kv_fmt f);

/* A "mix": the format of every (layer, KV head) of a model. Syntax: ITEM(+ITEM)*, where ITEM is
 *   FMT              every layer and head no other item names (the default item; at most one)
 *   FMT@WHERE        the cells WHERE names:
 *     N  N-M  -N        layer N (0-based), layers N..M (N <= M), the N-th layer from the end
 *                       (-1 = the last), every KV head of them
 *     hK  hK-J  h-K     KV head K (0-based), heads K..J, the K-th from the end, in every layer
 *     LAYERS:hHEADS     both: e.g. 0-3:h0 = KV head 0 of layers 0..3
 *   and a format may carry a rotation: FMT+rot / FMT+roth, written before or after its place
 *   (q4_0+rot@1-28 and q4_0@1-28+rot are the same item): a "rot" or "roth" item is not a format
 *   but modifies the item just before it.
 * e.g. "int8+f16@0+f16@-1" (first and last layers f16, the others int8), "int8@1-28+f16@0+f16@29",
 * "int8+f16@h0" (KV head 0 f16 in every layer), "q4_0+roth+f16@-1" (all rotated q4_0 but the last
 * layer). Every cell must get exactly one format. A plain format name is a mix of one item.
 * No spaces; no commas (a mix is also an arm's name, and arm lists are comma separated). */
#define KV_MIX_ITEMS 16
typedef struct {
    int n;                              /* items */
    struct {
        kv_fmt f;                       /* with its rotation modifier */
        int lo, hi;                     /* layers lo..hi (if layers); lo < 0: from the end (lo == hi) */
        int hlo, hhi;                   /* KV heads hlo..hhi (if heads); likewise */
        int layers, heads;              /* 1: the item names layers / KV heads (else: all of them) */
        int rest;                       /* 1: the default item (no place) */
    } it[KV_MIX_ITEMS];
} kv_mix;

/* Parses spec into *out. 0, or -1 with one line in err (unknown format, a modifier with no format
 * before it or on a rotated one, bad place syntax, two default items, more than KV_MIX_ITEMS
 * items). The model's layer and head counts are checked by kv_mix_cells. */
int kv_mix_parse(const char *spec, kv_mix *out, char *err, size_t errlen);

/* The format of every (layer, KV head) into out[n_layer][n_kv] (out[l * n_kv + g]). 0, or -1 with
 * one line in err: a layer or head past the model (e.g. "KV head 4 is past the model's 4 KV
 * heads (0..3)"), a cell named twice, a cell with no format (no default item). */
int kv_mix_cells(const kv_mix *m, int n_layer, int n_kv, kv_fmt *out, char *err, size_t errlen);

#endif
