/* kvfmt.c — KV format names and the per-layer mix syntax (see kvfmt.h). Depends on nothing but
 * the C library: the driver links this file alone to check arm specs (docs/DESIGN.md §1.1). */
#include "kernels/kvfmt.h"

#include <stdio.h>
#include <string.h>

static const char *const kv_names[KV_NFMT] = {
    [KV_F32] = "f32", [KV_BF16] = "bf16", [KV_F16] = "f16", [KV_INT8] = "int8",
    [KV_Q8_0] = "q8_0", [KV_Q4_0] = "q4_0", [KV_Q4_0R] = "q4_0r", [KV_FP8] = "fp8",
    [KV_Q4_1] = "q4_1", [KV_Q5_0] = "q5_0", [KV_Q5_1] = "q5_1", [KV_IQ4_NL] = "iq4_nl",
    [KV_E5M2] = "e5m2", [KV_E4M3S] = "e4m3s", [KV_E5M2S] = "e5m2s", [KV_NVFP4] = "nvfp4",
    [KV_MXFP4] = "mxfp4",
};

int kv_fmt_parse(const char *name, kv_fmt *out) {
    if (!name) return -1;
    for (int f = 0; f < KV_NFMT; f++) {
        if (strcmp(name, kv_names[f]) == 0) {
            *out = (kv_fmt)f;
            return 0;
        }
    }
    return -1;
}

const char *kv_fmt_name(kv_fmt f) {
    if ((int)f < 0 || f >= KV_NFMT) return "?";
    return kv_names[f];
}

/* a decimal layer number at *p (digits only, at most 6); advances *p. -1 when there is none. */
static int layer_number(const char **p) {
    int v = 0, nd = 0;
    while (**p >= '0' && **p <= '9' && nd < 7) v = v * 10 + (*(*p)++ - '0'), nd++;
    return nd == 0 || nd > 6 ? -1 : v;
}

int kv_mix_parse(const char *spec, kv_mix *out, char *err, size_t errlen) {
    kv_mix m = {0};
    const char *p = spec;
    if (!spec || !*spec) { snprintf(err, errlen, "empty KV format"); return -1; }
    for (;;) {
        const char *end = strchr(p, '+');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *at = memchr(p, '@', len);
        size_t nlen = at ? (size_t)(at - p) : len;
        char name[16];
        if (m.n == KV_MIX_ITEMS) {
            snprintf(err, errlen, "KV format mix '%s' has more than %d items", spec, KV_MIX_ITEMS);
            return -1;
        }
        if (nlen >= sizeof name) nlen = sizeof name - 1;
        memcpy(name, p, nlen);
        name[nlen] = 0;
        if (kv_fmt_parse(name, &m.it[m.n].f)) {
            snprintf(err, errlen, "unknown KV format '%s' in '%s' (formats: %s; per layer: FMT+FMT@N+FMT@N-M+FMT@-N)",
                     name, spec, KV_FMT_NAMES);
            return -1;
        }
        if (!at) {
            for (int i = 0; i < m.n; i++)
                if (m.it[i].rest) {
                    snprintf(err, errlen, "KV format mix '%s' has two default items (%s and %s)", spec,
                             kv_fmt_name(m.it[i].f), name);
                    return -1;
                }
            m.it[m.n].rest = 1;
        } else {
            const char *q = at + 1, *qe = p + len;
            int neg = *q == '-';
            if (neg) q++;
            int lo = layer_number(&q), hi = lo;
            if (!neg && q < qe && *q == '-') { q++; hi = layer_number(&q); }
            if (lo < 0 || hi < 0 || q != qe || hi < lo || (neg && lo == 0)) {
                snprintf(err, errlen, "bad layers '%.*s' in KV format mix '%s' (FMT@N, FMT@N-M or FMT@-N)",
                         (int)(qe - at - 1), at + 1, spec);
                return -1;
            }
            m.it[m.n].lo = neg ? -lo : lo;
            m.it[m.n].hi = neg ? -lo : hi;
        }
        m.n++;
        if (!end) break;
        p = end + 1;
    }
    *out = m;
    return 0;
}

int kv_mix_layers(const kv_mix *m, int n_layer, kv_fmt *out, char *err, size_t errlen) {
    int def = -1;
    for (int l = 0; l < n_layer; l++) out[l] = KV_NFMT;
    for (int i = 0; i < m->n; i++) {
        if (m->it[i].rest) { def = i; continue; }
        int lo = m->it[i].lo < 0 ? n_layer + m->it[i].lo : m->it[i].lo;
        int hi = m->it[i].hi < 0 ? n_layer + m->it[i].hi : m->it[i].hi;
        if (lo < 0 || hi >= n_layer) {
            snprintf(err, errlen, "KV format mix: layer %d is past the model's %d layers (0..%d)",
                     lo < 0 ? m->it[i].lo : hi, n_layer, n_layer - 1);
            return -1;
        }
        for (int l = lo; l <= hi; l++) {
            if (out[l] != KV_NFMT) {
                snprintf(err, errlen, "KV format mix: layer %d is given twice (%s and %s)", l, kv_fmt_name(out[l]),
                         kv_fmt_name(m->it[i].f));
                return -1;
            }
            out[l] = m->it[i].f;
        }
    }
    for (int l = 0; l < n_layer; l++) {
        if (out[l] != KV_NFMT) continue;
        if (def < 0) {
            snprintf(err, errlen, "KV format mix: layer %d has no format (name it, or add a default item)", l);
            return -1;
        }
        out[l] = m->it[def].f;
    }
    return 0;
}
