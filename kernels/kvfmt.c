/* kvfmt.c — KV format names, rotation modifiers and the mix syntax (see kvfmt.h). Depends on
 * nothing but the C library: the driver links this file alone to check arm specs
 * (docs/DESIGN.md §1.1). */
#include "kernels/kvfmt.h"
#include "kernels/errmsg.h"

#include <stdio.h>
#include <string.h>

#define KV_ROT_MASK (KV_ROT_B | KV_ROT_H | KV_ROT_P)

/* names by base format: plain, +rot, +roth, +rotp */
#define N3(s) { s, s "+rot", s "+roth", s "+rotp" }
static const char *const kv_names[KV_NFMT][4] = {
    [KV_F32] = N3("f32"), [KV_BF16] = N3("bf16"), [KV_F16] = N3("f16"), [KV_INT8] = N3("int8"),
    [KV_Q8_0] = N3("q8_0"), [KV_Q4_0] = N3("q4_0"), [KV_Q4_0R] = { "q4_0r", NULL, NULL, NULL }, [KV_FP8] = N3("fp8"),
    [KV_Q4_1] = N3("q4_1"), [KV_Q5_0] = N3("q5_0"), [KV_Q5_1] = N3("q5_1"), [KV_IQ4_NL] = N3("iq4_nl"),
    [KV_E5M2] = N3("e5m2"), [KV_E4M3S] = N3("e4m3s"), [KV_E5M2S] = N3("e5m2s"), [KV_NVFP4] = N3("nvfp4"),
    [KV_MXFP4] = N3("mxfp4"), [KV_TQ3] = { "tq3", NULL, NULL, NULL }, [KV_TQ4] = { "tq4", NULL, NULL, NULL },
};

/* the formats that are rotated by definition (by the whole head) and take no modifier */
static int built_in_rotation(int base) { return base == KV_Q4_0R || base == KV_TQ3 || base == KV_TQ4; }
#undef N3

int kv_fmt_is_kivi(kv_fmt f) {
    int base = (int)f & 0xff;
    return (int)f >= 0 && (base == KV_KIVI2 || base == KV_KIVI4);
}

int kv_fmt_valid(kv_fmt f) {
    if ((int)f < 0) return 0;
    int base = (int)f & 0xff, rot = (int)f & KV_ROT_MASK, par = (int)f >> KV_KIVI_G_SHIFT;
    if (base == KV_KIVI2 || base == KV_KIVI4) {
        int lg = par & 15, r = (int)f >> KV_KIVI_R_SHIFT;
        return !rot && lg >= 3 && lg <= 8 && r <= KV_KIVI_R_MAX;
    }
    if (base >= KV_NFMT || par) return 0;
    if (rot & (rot - 1)) return 0;                          /* one modifier at most */
    return !(built_in_rotation(base) && rot);
}

kv_fmt kv_fmt_base(kv_fmt f) {
    if (kv_fmt_is_kivi(f)) return f;
    int base = (int)f & ~KV_ROT_MASK;
    return base == KV_Q4_0R ? KV_Q4_0 : (kv_fmt)base;
}

int kv_fmt_rotation(kv_fmt f) {
    if (kv_fmt_is_kivi(f)) return 0;
    if (built_in_rotation((int)f & ~KV_ROT_MASK)) return KV_ROT_H;
    return (int)f & KV_ROT_MASK;
}

/* the index of kv_names' second dimension for a valid f */
static int rot_index(kv_fmt f) {
    int rot = (int)f & KV_ROT_MASK;
    return rot == KV_ROT_B ? 1 : rot == KV_ROT_H ? 2 : rot == KV_ROT_P ? 3 : 0;
}

const char *kv_fmt_name(kv_fmt f) {
    if (!kv_fmt_valid(f)) return "?";
    if (kv_fmt_is_kivi(f)) return ((int)f & 0xff) == KV_KIVI2 ? "kivi2" : "kivi4";
    return kv_names[(int)f & ~KV_ROT_MASK][rot_index(f)];
}

void kv_fmt_format(kv_fmt f, char *buf, size_t len) {
    if (!kv_fmt_is_kivi(f) || !kv_fmt_valid(f)) { snprintf(buf, len, "%s", kv_fmt_name(f)); return; }
    int g = 1 << (((int)f >> KV_KIVI_G_SHIFT) & 15), r = (int)f >> KV_KIVI_R_SHIFT;
    int n = snprintf(buf, len, "%s", kv_fmt_name(f));
    if (g != KV_KIVI_G_DEFAULT && n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, "-g%d", g);
    if (r != KV_KIVI_R_DEFAULT && n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "-r%d", r);
}

/* a decimal number of 1..4 digits at [*p, end); advances *p. -1 when there is none. */
static int small_number(const char **p, const char *end) {
    int v = 0, nd = 0;
    while (*p < end && **p >= '0' && **p <= '9' && nd < 5) v = v * 10 + (*(*p)++ - '0'), nd++;
    return nd == 0 || nd > 4 ? -1 : v;
}

/* kivi2 / kivi4 with "-gG" and "-rR" from name[len]: 0 and *out, or -1 */
static int kivi_parse(const char *name, size_t len, kv_fmt *out) {
    if (len < 5 || memcmp(name, "kivi", 4) || (name[4] != '2' && name[4] != '4')) return -1;
    int base = name[4] == '2' ? KV_KIVI2 : KV_KIVI4, g = KV_KIVI_G_DEFAULT, r = KV_KIVI_R_DEFAULT;
    const char *p = name + 5, *end = name + len;
    if (end - p >= 2 && p[0] == '-' && p[1] == 'g') {
        p += 2;
        g = small_number(&p, end);
        if (g < 8 || g > 256 || (g & (g - 1))) return -1;
    }
    if (end - p >= 2 && p[0] == '-' && p[1] == 'r') {
        p += 2;
        r = small_number(&p, end);
        if (r < 0 || r > KV_KIVI_R_MAX) return -1;
    }
    if (p != end) return -1;
    int lg = 0;
    while ((1 << lg) < g) lg++;
    *out = (kv_fmt)(base | lg << KV_KIVI_G_SHIFT | r << KV_KIVI_R_SHIFT);
    return 0;
}

/* the modifier a word names: KV_ROT_B for "rot", KV_ROT_H for "roth", KV_ROT_P for "rotp", 0 for
 * anything else.
 * word[len] need not be NUL. */
static int rot_word(const char *word, size_t len) {
    if (len == 3 && !memcmp(word, "rot", 3)) return KV_ROT_B;
    if (len == 4 && !memcmp(word, "roth", 4)) return KV_ROT_H;
    if (len == 4 && !memcmp(word, "rotp", 4)) return KV_ROT_P;
    return 0;
}

/* a base format (or a KIVI one with its parameters) from name[len] (not NUL terminated): 0 and
 * *out, or -1 */
static int base_parse(const char *name, size_t len, kv_fmt *out) {
    if (kivi_parse(name, len, out) == 0) return 0;
    for (int f = 0; f < KV_NFMT; f++) {
        if (strlen(kv_names[f][0]) == len && !memcmp(name, kv_names[f][0], len)) {
            *out = (kv_fmt)f;
            return 0;
        }
    }
    return -1;
}

int kv_fmt_parse(const char *name, kv_fmt *out) {
    if (!name) return -1;
    const char *plus = strchr(name, '+');
    size_t len = plus ? (size_t)(plus - name) : strlen(name);
    kv_fmt f;
    if (base_parse(name, len, &f)) return -1;
    if (plus) {
        int rot = rot_word(plus + 1, strlen(plus + 1));
        if (!rot || built_in_rotation(f) || kv_fmt_is_kivi(f)) return -1;
        f = (kv_fmt)((int)f | rot);
    }
    *out = f;
    return 0;
}

/* a decimal number at *p (digits only, at most 6); advances *p. -1 when there is none. */
static int number(const char **p, const char *end) {
    int v = 0, nd = 0;
    while (*p < end && **p >= '0' && **p <= '9' && nd < 7) v = v * 10 + (*(*p)++ - '0'), nd++;
    return nd == 0 || nd > 6 ? -1 : v;
}

/* N, N-M or -N from [*p, end) into *lo, *hi (-N: lo = hi = -N); advances *p to the first character
 * it does not take. 0, or -1 on bad syntax (no number, M < N, -0). */
static int range(const char **p, const char *end, int *lo, int *hi) {
    int neg = *p < end && **p == '-';
    if (neg) (*p)++;
    int a = number(p, end), b = a;
    if (!neg && *p < end && **p == '-') { (*p)++; b = number(p, end); }
    if (a < 0 || b < 0 || b < a || (neg && a == 0)) return -1;
    *lo = neg ? -a : a;
    *hi = neg ? -a : b;
    return 0;
}

/* the place after '@' in [q, qe) into item i of *m. 0 or -1 on bad syntax. */
static int place(const char *q, const char *qe, kv_mix *m, int i) {
    if (q < qe && *q != 'h') {
        if (range(&q, qe, &m->it[i].lo, &m->it[i].hi)) return -1;
        m->it[i].layers = 1;
        if (q == qe) return 0;
        if (*q != ':' || q + 1 == qe || q[1] != 'h') return -1;   /* LAYERS:hHEADS */
        q++;
    }
    if (q < qe && *q == 'h') {
        q++;
        if (range(&q, qe, &m->it[i].hlo, &m->it[i].hhi)) return -1;
        m->it[i].heads = 1;
    }
    return q == qe && (m->it[i].layers || m->it[i].heads) ? 0 : -1;
}

#define MIX_SYNTAX "FMT, FMT@N, FMT@N-M, FMT@-N (layers), FMT@hK, FMT@hK-J (KV heads), FMT@N-M:hK (both), " \
                   "FMT+rot, FMT+roth, FMT+rotp (rotated), items joined by '+'"

int kv_mix_parse(const char *spec, kv_mix *out, char *err, size_t errlen) {
    kv_mix m = {0};
    const char *p = spec;
    if (!spec || !*spec) return errmsg_set(err, errlen, -1, "empty KV format");
    for (;;) {
        const char *end = strchr(p, '+');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *at = memchr(p, '@', len);
        size_t nlen = at ? (size_t)(at - p) : len;
        int rot = rot_word(p, nlen), i = m.n;
        if (rot) {
            /* a modifier of the item before it */
            if (m.n == 0) {
                return errmsg_set(err, errlen, -1,
                                  "'%.*s' in KV format mix '%s' has no format before it (write FMT+%.*s)", (int)nlen, p,
                                  spec, (int)nlen, p);
            }
            i = m.n - 1;
            if (kv_fmt_is_kivi(m.it[i].f)) {
                return errmsg_set(err, errlen, -1, "'%.*s' in KV format mix '%s': kivi formats take no rotation", (int)nlen, p, spec);
            }
            if (kv_fmt_rotation(m.it[i].f)) {
                return errmsg_set(err, errlen, -1, "'%.*s' in KV format mix '%s' rotates %s, which is rotated already",
                                  (int)nlen, p, spec, kv_fmt_name(m.it[i].f));
            }
            if (at && (m.it[i].layers || m.it[i].heads)) {
                return errmsg_set(err, errlen, -1, "KV format mix '%s' gives %s two places (write FMT+%.*s@WHERE or "
                                  "FMT@WHERE+%.*s)", spec, kv_fmt_name(m.it[i].f), (int)nlen, p, (int)nlen, p);
            }
            m.it[i].f = (kv_fmt)((int)m.it[i].f | rot);
        } else {
            if (m.n == KV_MIX_ITEMS) {
                return errmsg_set(err, errlen, -1, "KV format mix '%s' has more than %d items", spec, KV_MIX_ITEMS);
            }
            if (base_parse(p, nlen, &m.it[i].f)) {
                return errmsg_set(err, errlen, -1, "unknown KV format '%.*s' in '%s' (formats: %s; %s)", (int)(nlen > 40 ? 40 : nlen),
                                  p, spec, KV_FMT_NAMES, MIX_SYNTAX);
            }
            m.n++;
        }
        if (at && place(at + 1, p + len, &m, i)) {
            return errmsg_set(err, errlen, -1, "bad place '%.*s' in KV format mix '%s' (%s)", (int)(p + len - at - 1),
                              at + 1, spec, MIX_SYNTAX);
        }
        if (!end) break;
        p = end + 1;
    }
    int def = -1;
    for (int i = 0; i < m.n; i++) {
        m.it[i].rest = !m.it[i].layers && !m.it[i].heads;
        if (!m.it[i].rest) continue;
        if (def >= 0) {
            return errmsg_set(err, errlen, -1, "KV format mix '%s' has two default items (%s and %s)", spec,
                              kv_fmt_name(m.it[def].f), kv_fmt_name(m.it[i].f));
        }
        def = i;
    }
    *out = m;
    return 0;
}

/* lo..hi of n (negative: from the end) into *a..*b; 0, or -1 when past 0..n-1 (*bad: the number) */
static int resolve(int lo, int hi, int n, int *a, int *b, int *bad) {
    *a = lo < 0 ? n + lo : lo;
    *b = hi < 0 ? n + hi : hi;
    if (*a < 0) { *bad = lo; return -1; }
    if (*b >= n) { *bad = hi; return -1; }
    return 0;
}

int kv_mix_cells(const kv_mix *m, int n_layer, int n_kv, kv_fmt *out, char *err, size_t errlen) {
    int def = -1;
    for (int c = 0; c < n_layer * n_kv; c++) out[c] = KV_NFMT;
    for (int i = 0; i < m->n; i++) {
        if (m->it[i].rest) { def = i; continue; }
        int l0 = 0, l1 = n_layer - 1, g0 = 0, g1 = n_kv - 1, bad = 0;
        if (m->it[i].layers && resolve(m->it[i].lo, m->it[i].hi, n_layer, &l0, &l1, &bad)) {
            return errmsg_set(err, errlen, -1, "KV format mix: layer %d is past the model's %d layers (0..%d)", bad,
                              n_layer, n_layer - 1);
        }
        if (m->it[i].heads && resolve(m->it[i].hlo, m->it[i].hhi, n_kv, &g0, &g1, &bad)) {
            return errmsg_set(err, errlen, -1, "KV format mix: KV head %d is past the model's %d KV heads (0..%d)", bad,
                              n_kv, n_kv - 1);
        }
        for (int l = l0; l <= l1; l++)
            for (int g = g0; g <= g1; g++) {
                kv_fmt *c = &out[(size_t)l * n_kv + g];
                if (*c != KV_NFMT) {
                    return errmsg_set(err, errlen, -1, "KV format mix: layer %d KV head %d is given twice (%s and %s)",
                                      l, g, kv_fmt_name(*c), kv_fmt_name(m->it[i].f));
                }
                *c = m->it[i].f;
            }
    }
    for (int c = 0; c < n_layer * n_kv; c++) {
        if (out[c] != KV_NFMT) continue;
        if (def < 0) {
            return errmsg_set(err, errlen, -1,
                              "KV format mix: layer %d KV head %d has no format (name it, or add a default item)",
                              c / n_kv, c % n_kv);
        }
        out[c] = m->it[def].f;
    }
    return 0;
}
