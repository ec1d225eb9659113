/* arm_spec.c — the driver's arms, part 1: arm specs (a K/V format or a mix, a backend, a model),
 * names (valid, unique), adding local, remote and model arms, and resolving each arm's formats.
 * See arm.h; processes are in arm_proc.c, connections in arm.c. arm_add_* grow the caller's arms
 * array (realloc; the caller frees it).
 */

#include "driver/arm.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/arm_internal.h"

#include "kernels/kvfmt.h"

#define KV_NAMES KV_FMT_NAMES

/* ============================================================================================
 * Specs and names
 * ========================================================================================== */

/* 1..ARM_NAME_MAX-1 printable ASCII characters, none of: space " ' \ | ` , (what every TSV and
 * README of a results folder may hold; the report checks the names it reads with the same rule). */
int arm_valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= ARM_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 32 || c >= 127 || strchr("\"'\\|`,", c)) return 0;
    }
    return 1;
}

/* a format name or a mix (kvfmt.h; its layers and heads are checked by the worker against the
 * model): 0, or -1 with kv_mix_parse's one line in err */
static int fmt_check(const char *name, char *err, size_t errlen) {
    kv_mix m;
    return kv_mix_parse(name, &m, err, errlen);
}

/* the arm spec's error for a format that does not parse: kv_mix_parse's line, and a hint when the
 * arm looks like the tail of a list of layers split at a comma ("int8@1-28+f16@0,29") */
static int spec_error(const char *fmt, const char *spec, const char *why, char *err, size_t errlen) {
    /* the caller names the arm */
    if ((fmt[0] >= '0' && fmt[0] <= '9') || fmt[0] == 'h' || fmt[0] == '-')
        return errmsg_set(err, errlen, ARM_E_SPEC, "'%s' is not a KV format: arms are separated by commas, so "
                          "list layers or heads as separate items (f16@0+f16@29, not f16@0,29)", spec);
    return errmsg_set(err, errlen, ARM_E_SPEC, "%s (arm specs: F, K/V, k:F, v:F, llama:SPEC, ref:SPEC)", why);
}

/* The engine prefixes of a spec, each the worker's --backend it selects: llama.cpp's libllama, and
 * strata's plain C reference pass (kernels/backend_ref.c). */
static const char *const SPEC_BACKENDS[] = { "llama", "ref" };

/* The engine prefix of a spec: "llama:SPEC" gives backend "llama", "ref:SPEC" backend "ref" (into
 * backend [len], when not NULL) and returns SPEC; any other spec is strata's own engine (backend
 * "") and is returned whole. */
static const char *spec_backend(const char *spec, char *backend, size_t len) {
    if (backend && len) backend[0] = 0;
    for (size_t i = 0; i < sizeof SPEC_BACKENDS / sizeof SPEC_BACKENDS[0]; i++) {
        size_t n = strlen(SPEC_BACKENDS[i]);
        if (!strncmp(spec, SPEC_BACKENDS[i], n) && spec[n] == ':') {
            if (backend && len) snprintf(backend, len, "%s", SPEC_BACKENDS[i]);
            return spec + n + 1;
        }
    }
    return spec;
}

/* The KV formats a llama:SPEC arm may name: llama.cpp's cache types (kernels/llama/backend_llama.c
 * maps them; its worker refuses any other), checked here so a bad arm stops the run before any
 * worker starts. 1 when name is one of them, plain (no mix, no rotation). */
#define LLAMA_FMT_NAMES "f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1"
static int llama_fmt_ok(const char *name) {
    size_t n = strlen(name);
    for (const char *p = LLAMA_FMT_NAMES; *p;) {
        size_t l = strcspn(p, " ");
        if (l == n && !strncmp(p, name, n)) return 1;
        p += l + (p[l] == ' ');
    }
    return 0;
}

int arm_spec_parse(const char *spec, const char *ref_k, const char *ref_v, char *kv_k, char *kv_v,
                   char *err, size_t errlen) {
    char a[ARM_FMT_MAX], b[ARM_FMT_MAX], why[512];
    spec = spec_backend(spec, NULL, 0);
    const char *slash = strchr(spec, '/');
    if (!strncmp(spec, "k:", 2) || !strncmp(spec, "v:", 2)) {
        int is_k = spec[0] == 'k';
        const char *x = spec + 2;
        if (fmt_check(x, why, sizeof why)) return spec_error(x, spec, why, err, errlen);
        if (!ref_k || !ref_v)
            return errmsg_set(err, errlen, ARM_E_SPEC, "arm '%s' takes its other format from the "
                           "reference arm, whose formats are not known", spec);
        snprintf(kv_k, ARM_FMT_MAX, "%s", is_k ? x : ref_k);
        snprintf(kv_v, ARM_FMT_MAX, "%s", is_k ? ref_v : x);
        return 0;
    }
    if (slash) {
        size_t lk = (size_t)(slash - spec);
        if (lk >= sizeof a || strlen(slash + 1) >= sizeof b)
            return errmsg_set(err, errlen, ARM_E_SPEC, "bad arm spec '%s' (expected K/V, e.g. int8/f16)", spec);
        memcpy(a, spec, lk);
        a[lk] = 0;
        snprintf(b, sizeof b, "%s", slash + 1);
    } else {
        if (strlen(spec) >= sizeof a)
            return errmsg_set(err, errlen, ARM_E_SPEC, "unknown KV format '%s' (formats: %s)", spec, KV_NAMES);
        snprintf(a, sizeof a, "%s", spec);
        snprintf(b, sizeof b, "%s", spec);
    }
    if (fmt_check(a, why, sizeof why)) return spec_error(a, spec, why, err, errlen);
    if (fmt_check(b, why, sizeof why)) return spec_error(b, spec, why, err, errlen);
    snprintf(kv_k, ARM_FMT_MAX, "%s", a);
    snprintf(kv_v, ARM_FMT_MAX, "%s", b);
    return 0;
}

static int name_taken(const char *name, const arm *taken, int n_taken) {
    for (int i = 0; i < n_taken; i++)
        if (!strcmp(taken[i].name, name)) return 1;
    return 0;
}

int arm_unique_name(const char *base, const arm *taken, int n_taken, char *out, char *err,
                    size_t errlen) {
    if (strlen(base) + 8 >= ARM_NAME_MAX)
        return errmsg_set(err, errlen, ARM_E_SPEC, "arm name '%.40s...' is too long", base);
    if (!name_taken(base, taken, n_taken)) {
        snprintf(out, ARM_NAME_MAX, "%s", base);
        return 0;
    }
    for (int k = 2;; k++) {
        snprintf(out, ARM_NAME_MAX, "%s#%d", base, k);
        if (!name_taken(out, taken, n_taken)) return 0;
    }
}

/* Grows *arms by one zeroed arm; returns it or NULL. */
static arm *arm_append(arm **arms, int *n) {
    arm *na = realloc(*arms, (size_t)(*n + 1) * sizeof *na);
    if (!na) return NULL;
    *arms = na;
    memset(&na[*n], 0, sizeof na[*n]);
    na[*n].next_id = 1;
    return &na[(*n)++];
}

int arm_add_local(const char *list, arm **arms, int *n, char *err, size_t errlen) {
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[ARM_NAME_MAX];
        if (len == 0)
            return errmsg_set(err, errlen, ARM_E_SPEC, "empty item in the arms list '%s'", list);
        if (len >= sizeof item)
            return errmsg_set(err, errlen, ARM_E_SPEC, "arm spec '%.*s' is too long", (int)len, p);
        memcpy(item, p, len);
        item[len] = 0;
        if (!arm_valid_name(item) || strchr(item, '#'))
            return errmsg_set(err, errlen, ARM_E_SPEC, "bad arm spec '%s' (e.g. f16, int8, int8/f16, "
                           "k:int8, v:q4_0)", item);
        char name[ARM_NAME_MAX];
        int rc = arm_unique_name(item, *arms, *n, name, err, errlen);
        if (rc) return rc;
        arm *a = arm_append(arms, n);
        if (!a) return errmsg_set(err, errlen, ARM_E_SYSTEM, "out of memory");
        snprintf(a->name, sizeof a->name, "%s", name);
        if (!comma) return 0;
        p = comma + 1;
    }
}

int arm_add_remote(const char *name_eq_url, arm **arms, int *n, char *err, size_t errlen) {
    const char *eq = strchr(name_eq_url, '=');
    char base[ARM_NAME_MAX], name[ARM_NAME_MAX];
    if (!eq || eq == name_eq_url || (size_t)(eq - name_eq_url) >= sizeof base)
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm needs NAME=URL (e.g. int8=tcp://10.0.0.2:5555), "
                       "got '%s'", name_eq_url);
    memcpy(base, name_eq_url, (size_t)(eq - name_eq_url));
    base[eq - name_eq_url] = 0;
    const char *url = eq + 1;
    if (!arm_valid_name(base) || strchr(base, '#'))
        return errmsg_set(err, errlen, ARM_E_SPEC, "bad arm name '%s' in --arm (printable, no spaces, "
                       "quotes, commas or '#')", base);
    if (strncmp(url, "tcp://", 6) && strncmp(url, "ipc://", 6) && strncmp(url, "tls+tcp://", 10))
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm %s: URL '%s' must start with tcp://, "
                       "tls+tcp:// or ipc://", base, url);
    if (strlen(url) >= ARM_URL_MAX)
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm %s: URL too long", base);
    int rc = arm_unique_name(base, *arms, *n, name, err, errlen);
    if (rc) return rc;
    arm *a = arm_append(arms, n);
    if (!a) return errmsg_set(err, errlen, ARM_E_SYSTEM, "out of memory");
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->url, sizeof a->url, "%s", url);
    a->remote = 1;
    return 0;
}

int arm_add_model(const char *arg, arm **arms, int *n, char *err, size_t errlen) {
    const char *eq = strchr(arg, '=');
    char head[ARM_NAME_MAX], base[ARM_NAME_MAX], spec[ARM_NAME_MAX] = "", name[ARM_NAME_MAX];
    if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= sizeof head)
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm-model needs NAME=FILE or NAME:SPEC=FILE (e.g. "
                          "q8=model-q8_0.gguf, q8:int8=model-q8_0.gguf), got '%s'", arg);
    memcpy(head, arg, (size_t)(eq - arg));
    head[eq - arg] = 0;
    const char *file = eq + 1;
    char *colon = strchr(head, ':');
    if (colon) {
        snprintf(spec, sizeof spec, "%s", colon + 1);
        *colon = 0;
    }
    snprintf(base, sizeof base, "%s", head);
    if (!arm_valid_name(base) || strchr(base, '#'))
        return errmsg_set(err, errlen, ARM_E_SPEC, "bad arm name '%s' in --arm-model %s (printable, no spaces, "
                          "quotes, commas, ':' or '#')", base, arg);
    char k[ARM_FMT_MAX], v[ARM_FMT_MAX], e2[256];
    if (colon && arm_spec_parse(spec, "f16", "f16", k, v, e2, sizeof e2))   /* syntax only: k:/v: resolve later */
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm-model %s: %s", arg, e2);
    if (strlen(file) >= ARM_PATH_MAX)
        return errmsg_set(err, errlen, ARM_E_SPEC, "--arm-model %s: the file's path is too long", base);
    int rc = arm_unique_name(base, *arms, *n, name, err, errlen);
    if (rc) return rc;
    arm *a = arm_append(arms, n);
    if (!a) return errmsg_set(err, errlen, ARM_E_SYSTEM, "out of memory");
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->model, sizeof a->model, "%s", file);
    snprintf(a->spec, sizeof a->spec, "%s", spec);
    a->own_model = 1;
    return 0;
}

/* The spec part of a name: the name without a "#k" suffix. */
static void name_base(const char *name, char *out) {
    snprintf(out, ARM_NAME_MAX, "%s", name);
    char *h = strrchr(out, '#');
    if (h && h[1]) {
        for (const char *q = h + 1; *q; q++)
            if (*q < '0' || *q > '9') return;
        *h = 0;
    }
}

int arm_resolve_formats(arm *arms, int n, const char *ref_name, char *err, size_t errlen) {
    int ref = -1;
    for (int i = 0; i < n && ref < 0; i++)
        if (!strcmp(arms[i].name, ref_name)) ref = i;
    if (ref < 0) {
        char names[512] = "";
        for (int i = 0; i < n; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", arms[i].name);
        }
        return -errmsg_set(err, errlen, ARM_E_SPEC, "the reference arm '%s' (--ref) is not one of the arms (%s)",
                        ref_name, names);
    }
    char base[ARM_NAME_MAX], rk[ARM_FMT_MAX] = "", rv[ARM_FMT_MAX] = "";
    if (arms[ref].own_model) snprintf(base, sizeof base, "%s", arms[ref].spec);
    else name_base(arms[ref].name, base);
    char e2[256];
    if (arms[ref].own_model && !base[0])
        return -errmsg_set(err, errlen, ARM_E_SPEC, "the reference arm '%s' runs its own model: give its KV "
                           "formats (--arm-model %s:f16=FILE)", arms[ref].name, arms[ref].name);
    if (arm_spec_parse(base, NULL, NULL, rk, rv, e2, sizeof e2)) {
        if (!arms[ref].remote)
            return -errmsg_set(err, errlen, ARM_E_SPEC, "reference arm '%s': %s", arms[ref].name, e2);
        rk[0] = rv[0] = 0;   /* a remote reference with a free-form name: formats from its hello */
    }
    for (int i = 0; i < n; i++) {
        arm *a = &arms[i];
        if (a->own_model && !a->spec[0]) {   /* a weight arm: the reference's formats */
            if (!rk[0])
                return -errmsg_set(err, errlen, ARM_E_SPEC, "arm '%s' takes the reference arm's KV formats, which "
                                   "are not known: give them (--arm-model %s:f16=FILE)", a->name, a->name);
            snprintf(a->kv_k, sizeof a->kv_k, "%s", rk);
            snprintf(a->kv_v, sizeof a->kv_v, "%s", rv);
            continue;
        }
        if (a->own_model) snprintf(base, sizeof base, "%s", a->spec);
        else name_base(a->name, base);
        if (!a->remote) spec_backend(base, a->backend, sizeof a->backend);
        int rc = arm_spec_parse(base, rk[0] ? rk : NULL, rv[0] ? rv : NULL, a->kv_k, a->kv_v, e2, sizeof e2);
        if (rc && !a->remote) return -errmsg_set(err, errlen, ARM_E_SPEC, "arm '%s': %s", a->name, e2);
        if (rc) a->kv_k[0] = a->kv_v[0] = 0;
        const char *bad = !strcmp(a->backend, "llama") ? !llama_fmt_ok(a->kv_k) ? a->kv_k : !llama_fmt_ok(a->kv_v) ? a->kv_v
                                                                                               : NULL : NULL;
        if (bad)
            return -errmsg_set(err, errlen, ARM_E_SPEC, "arm '%s': llama.cpp stores one K and one V format for all layers, "
                               "one of " LLAMA_FMT_NAMES ", not '%s'", a->name, bad);
    }
    return ref;
}
