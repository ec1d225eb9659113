/* arm.c — the driver's arms: spec parsing, spawning and dialling workers, the handshake check,
 * concurrent requests, stopping and reaping. See arm.h. */
#include "driver/arm.h"
#include "driver/report.h"
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

#include "kernels/kvfmt.h"

#define KV_NAMES KV_FMT_NAMES

static void sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ============================================================================================
 * Specs and names
 * ========================================================================================== */

/* 1..63 printable ASCII characters, none of: space " ' \ | ` , (report.h's rule for names). */
int arm_valid_name(const char *s) {
    return report_name_ok(s);   /* ARM_NAME_MAX == REPORT_NAME_MAX */
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
    return errmsg_set(err, errlen, ARM_E_SPEC, "%s (arm specs: F, K/V, k:F, v:F, llama:SPEC)", why);
}

/* The engine prefix of a spec: "llama:SPEC" gives backend "llama" (into backend [len], when not NULL)
 * and returns SPEC; any other spec is strata's own engine (backend "") and is returned whole. */
static const char *spec_backend(const char *spec, char *backend, size_t len) {
    int llama = !strncmp(spec, "llama:", 6);
    if (backend && len) snprintf(backend, len, "%s", llama ? "llama" : "");
    return llama ? spec + 6 : spec;
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

/* ============================================================================================
 * Processes
 * ========================================================================================== */

/* Async-signal-safe: decimal of a non-negative int into buf (>= 12 bytes), returns buf. */
static char *itoa_safe(int v, char *buf) {
    char t[12];
    int k = 0;
    if (v < 0) v = 0;
    do { t[k++] = (char)('0' + v % 10); v /= 10; } while (v && k < 11);
    for (int i = 0; i < k; i++) buf[i] = t[k - 1 - i];
    buf[k] = 0;
    return buf;
}

void arm_set_options(arm *arms, int n, const arm_options *o) {
    for (int i = 0; i < n; i++) arms[i].opt = o;
}

int arm_launch_check(const char *tpl, char *err, size_t errlen) {
    if (!tpl || !strstr(tpl, "{worker}"))
        return errmsg_set(err, errlen, ARM_E_SPEC, "--launch '%s': the template must contain {worker} (the "
                          "worker's command line), e.g. 'srun -N1 -n1 --gpus=1 {worker}' or 'ssh gpu1 {worker}'",
                          tpl ? tpl : "");
    return 0;
}

/* Appends c to out [outlen] at *off (NUL kept after it). Returns 0 or -1 (no room). */
static int put_char(char *out, size_t outlen, size_t *off, char c) {
    if (*off + 1 >= outlen) return -1;
    out[(*off)++] = c;
    out[*off] = 0;
    return 0;
}

/* Appends s, single-quoted for sh when quote (a ' inside becomes '\''). Returns 0 or -1. */
static int put_word(char *out, size_t outlen, size_t *off, const char *s, int quote) {
    if (quote && put_char(out, outlen, off, '\'')) return -1;
    for (; *s; s++) {
        if (quote && *s == '\'') {
            for (const char *q = "'\\''"; *q; q++)
                if (put_char(out, outlen, off, *q)) return -1;
        } else if (put_char(out, outlen, off, *s)) {
            return -1;
        }
    }
    return quote ? put_char(out, outlen, off, '\'') : 0;
}

int arm_launch_command(const char *tpl, const char *const *argv, const char *name, int i, char *out,
                       size_t outlen, char *err, size_t errlen) {
    size_t off = 0;
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    out[0] = 0;
    for (const char *p = tpl; *p;) {
        int bad = 0;
        if (!strncmp(p, "{worker}", 8)) {
            for (int k = 0; argv[k] && !bad; k++)
                bad = (k && put_word(out, outlen, &off, " ", 0)) || put_word(out, outlen, &off, argv[k], 1);
            p += 8;
        } else if (!strncmp(p, "{arm}", 5)) {
            bad = put_word(out, outlen, &off, name, 1);
            p += 5;
        } else if (!strncmp(p, "{i}", 3)) {
            bad = put_word(out, outlen, &off, num, 0);
            p += 3;
        } else {
            char one[2] = { *p++, 0 };
            bad = put_word(out, outlen, &off, one, 0);
        }
        if (bad) return errmsg_set(err, errlen, ARM_E_SPEC, "--launch: the command for arm %s is too long", name);
    }
    return 0;
}

void arm_signal(const arm *a, int sig) {
    if (kill(-a->pid, sig)) kill(a->pid, sig);
}

/* Closes a launched arm's pipes (the launcher's stdin closing tells a worker started through ssh or
 * srun to exit). */
static void launch_close(arm *a) {
    if (!a->launched) return;
    if (a->out_fd >= 0) close(a->out_fd);
    if (a->in_fd >= 0) close(a->in_fd);
    a->out_fd = a->in_fd = -1;
}

int arm_spawn(arm *a, int i, const arm_launch *l, char *err, size_t errlen) {
    char threads[16], prefill[16], ctx[16], arms[16], other[24], url[ARM_URL_MAX], logp[ARM_URL_MAX];
    if (snprintf(url, sizeof url, "ipc://%s/%d.ipc", l->tmpdir, i) >= (int)sizeof url ||
        snprintf(logp, sizeof logp, "%s/%d.log", l->tmpdir, i) >= (int)sizeof logp)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "temp dir path too long: %s", l->tmpdir);
    const arm_options *o = a->opt;
    const char *launch = o ? o->launch : NULL;
    if (launch) snprintf(url, sizeof url, "%s", o->launch_listen ? o->launch_listen : "tcp://127.0.0.1:0");
    snprintf(threads, sizeof threads, "%d", l->threads);
    snprintf(prefill, sizeof prefill, "%d", l->prefill);
    snprintf(ctx, sizeof ctx, "%d", l->max_context);
    snprintf(arms, sizeof arms, "%d", l->mem_arms);
    snprintf(other, sizeof other, "%llu", (unsigned long long)a->mem_other);
    const char *argv[32];
    int k = 0;
    argv[k++] = l->worker;
    if (a->backend[0]) { argv[k++] = "--backend"; argv[k++] = a->backend; }
    argv[k++] = "--model"; argv[k++] = a->model[0] ? a->model : l->model;
    argv[k++] = "--kv-k"; argv[k++] = a->kv_k;
    argv[k++] = "--kv-v"; argv[k++] = a->kv_v;
    argv[k++] = "--threads"; argv[k++] = threads;
    if (l->prefill > 0) { argv[k++] = "--prefill"; argv[k++] = prefill; }
    if (l->max_context > 0) { argv[k++] = "--max-context"; argv[k++] = ctx; }
    if (l->mem_arms > 1) { argv[k++] = "--mem-arms"; argv[k++] = arms; }
    if (o && o->allow_overcommit) argv[k++] = "--allow-overcommit";
    if (o && o->rope_f32 && !a->backend[0]) { argv[k++] = "--rope-angles"; argv[k++] = "f32"; }   /* strata's RoPE */
    if (o && o->mmap_weights) argv[k++] = "--mmap-weights";
    if (a->mem_other) { argv[k++] = "--mem-other-weights"; argv[k++] = other; }
    argv[k++] = "--listen"; argv[k++] = url;
    if (launch) argv[k++] = "--exit-on-stdin-eof";
    argv[k] = NULL;
    /* launched: sh -c COMMAND, with pipes for the launcher's stdin and stdout */
    char cmd[16384];          /* the launcher's command line (launched arms) */
    int in_pipe[2] = { -1, -1 }, out_pipe[2] = { -1, -1 };
    const char *sh_argv[4] = { "/bin/sh", "-c", cmd, NULL };
    if (launch) {
        int rc = arm_launch_command(launch, argv, a->name, i, cmd, sizeof cmd, err, errlen);
        if (rc) return rc;
        launch_close(a);   /* a restart: the previous launcher's pipes */
        if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC)) {
            int e = errno;
            for (int q = 0; q < 2; q++) {
                if (in_pipe[q] >= 0) close(in_pipe[q]);
                if (out_pipe[q] >= 0) close(out_pipe[q]);
            }
            return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: pipe: %s", a->name, strerror(e));
        }
    }

    /* appended to: a restarted worker continues its predecessor's log (the temp dir is new) */
    int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) return errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create %s: %s", logp, strerror(errno));
    int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd < 0) {
        close(logfd);
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot open /dev/null: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(logfd);
        close(nullfd);
        for (int q = 0; q < 2; q++) {
            if (in_pipe[q] >= 0) close(in_pipe[q]);
            if (out_pipe[q] >= 0) close(out_pipe[q]);
        }
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: fork: %s", a->name, strerror(e));
    }
    if (pid == 0) {
        /* child: only async-signal-safe calls until execv */
        setpgid(0, 0);                              /* terminal Ctrl-C reaches the driver only */
        prctl(PR_SET_PDEATHSIG, SIGKILL);           /* the driver died: go too */
        if (getppid() != parent) _exit(126);
        dup2(launch ? in_pipe[0] : nullfd, 0);
        dup2(launch ? out_pipe[1] : nullfd, 1);   /* a local worker's stdout says only where it listens */
        dup2(logfd, 2);
        if (launch) execv(sh_argv[0], (char *const *)sh_argv);
        else execv(l->worker, (char *const *)argv);
        char num[12];
        const char *msg = "strata-driver: cannot execute the worker: errno ";
        (void)!write(2, msg, strlen(msg));
        itoa_safe(errno, num);
        (void)!write(2, num, strlen(num));
        (void)!write(2, "\n", 1);
        _exit(127);
    }
    setpgid(pid, pid);   /* also here: a signal to the group cannot miss a child not yet running */
    close(logfd);
    close(nullfd);
    snprintf(a->url, sizeof a->url, "%s", launch ? "" : url);
    snprintf(a->log_path, sizeof a->log_path, "%s", logp);
    a->pid = pid;
    a->exited = 0;
    if (launch) {
        close(in_pipe[0]);
        close(out_pipe[1]);
        a->launched = 1;
        a->in_fd = in_pipe[1];
        a->out_fd = out_pipe[0];
        FILE *f = fopen(logp, "a");
        if (f) { fprintf(f, "strata-driver: launched: %s\n", cmd); fclose(f); }
    }
    return 0;
}

/* Reaps a local worker if it has exited. Returns 1 when it is (now or before) known dead. */
static int arm_poll_exit(arm *a) {
    if (a->remote || a->pid <= 0) return 0;
    if (a->exited) return 1;
    int st;
    pid_t r = waitpid(a->pid, &st, WNOHANG);
    if (r == a->pid) {
        a->exited = 1;
        a->status = st;
        return 1;
    }
    return 0;
}

void arm_describe_status(int status, char *buf, size_t len) {
    if (WIFEXITED(status)) snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(buf, len, "status 0x%x", status);
}

/* The line arm_restart writes into a worker's log before starting its successor. */
#define RESTART_MARK "strata-driver: ==== "

void arm_log_tail_lines(const arm *a, int nlines, char *buf, size_t len) {
    char ring[8][512];
    int have = 0;
    buf[0] = 0;
    if (!a->log_path[0] || len < 2 || nlines < 1) return;
    if (nlines > 8) nlines = 8;
    FILE *f = fopen(a->log_path, "r");
    if (!f) return;
    /* the last 64 KiB is plenty for a few lines */
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        fseek(f, size > 65536 ? size - 65536 : 0, SEEK_SET);
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        int whole = l && line[l - 1] == '\n';
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
        if (!strncmp(line, RESTART_MARK, strlen(RESTART_MARK))) have = 0;   /* the current worker's lines only */
        else if (l) snprintf(ring[have++ % nlines], sizeof ring[0], "%s", line);
        /* a longer line: skip its rest */
        while (!whole && fgets(line, sizeof line, f)) whole = strchr(line, '\n') != NULL;
    }
    fclose(f);
    int first = have > nlines ? have - nlines : 0;
    size_t off = 0;
    for (int k = first; k < have && off + 1 < len; k++) {
        int w = snprintf(buf + off, len - off, "%s%s", k > first ? " | " : "", ring[k % nlines]);
        if (w < 0) break;
        off += (size_t)w;
    }
}

void arm_log_tail(const arm *a, char *buf, size_t len) {
    arm_log_tail_lines(a, 1, buf, len);
}

char arm_proc_state(const arm *a) {
    if (a->remote || a->pid <= 0 || a->exited) return '?';
    char path[64], b[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)a->pid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t got = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[got] = 0;
    char *rp = strrchr(b, ')');   /* "pid (comm) S ..." */
    return rp && rp[1] == ' ' && rp[2] ? rp[2] : '?';
}

int arm_alive(arm *a) {
    return !arm_poll_exit(a);
}

/* "arm X: the worker exited (exit status 1) <when>: <last log line>" (the log's last line only when
 * the worker exited by itself: after a signal it is whatever it printed last, usually unrelated) */
static int died_error(arm *a, const char *when, char *err, size_t errlen) {
    char st[96], tail[600] = "";
    arm_describe_status(a->status, st, sizeof st);
    if (WIFEXITED(a->status)) arm_log_tail(a, tail, sizeof tail);
    return errmsg_set(err, errlen, ARM_E_DIED, "arm %s: the worker exited (%s) %s%s%s", a->name, st, when,
                   tail[0] ? ": " : "", tail[0] ? tail : " (its output is in workers.log)");
}

/* ============================================================================================
 * Connections
 * ========================================================================================== */

int arm_set_recv_max(arm *a, size_t recv_max, char *err, size_t errlen) {
    int rv = nng_socket_set_size(a->sock, NNG_OPT_RECVMAXSZ, recv_max);
    if (rv) return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set receive cap: %s", a->name, nng_strerror(rv));
    return 0;
}

int arm_call(arm *a, proto_msg *req, proto_msg *rep, size_t max_len, char *err, size_t errlen) {
    char e[600];
    req->id = a->next_id++;
    int rc = proto_call(a->sock, req, rep, max_len, e, sizeof e);
    if (rc) a->n_past = -1;   /* a failed request may have moved the stream */
    else if ((rc = arm_check_reply(a, req, rep, e, sizeof e))) proto_msg_free(rep);
    if (rc) errmsg_set(err, errlen, rc, "arm %s: %s", a->name, e);
    return rc;
}

#define ANNOUNCE "strata-worker: listening "

/* A launched arm: reads the launcher's stdout until the worker's "listening URL" line, into
 * a->url. Other lines are copied to the arm's log. Returns 0, ARM_E_DIED, PROTO_E_TIMEOUT,
 * ARM_E_SPEC (a URL that does not fit) or ARM_E_INTERRUPTED with a message. */
static int read_announce(arm *a, int64_t t0, int timeout_ms, const volatile sig_atomic_t *stop,
                         char *err, size_t errlen) {
    char line[ARM_URL_MAX + 64];   /* the line read so far: [n] bytes */
    size_t n = 0;
    for (;;) {
        if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
        if (clock_ms() - t0 > timeout_ms)
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: the launched worker did not say where it "
                              "listens within %d s (its log: %s)", a->name, timeout_ms / 1000, a->log_path);
        struct pollfd pfd = { .fd = a->out_fd, .events = POLLIN };
        int pr = poll(&pfd, 1, 100);
        if (pr < 0 && errno != EINTR)
            return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: poll: %s", a->name, strerror(errno));
        if (pr <= 0) continue;
        char c;
        ssize_t got = read(a->out_fd, &c, 1);   /* a line or two, once: byte by byte is fine */
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {   /* the launcher ended without the line: wait for it to be reaped */
            for (int t = 0; t < 100 && !arm_poll_exit(a); t++) sleep_ms(20);
            if (arm_poll_exit(a)) return died_error(a, "before saying where it listens", err, errlen);
            return errmsg_set(err, errlen, ARM_E_DIED, "arm %s: the launcher closed its output before the worker "
                              "said where it listens (its log: %s)", a->name, a->log_path);
        }
        if (c != '\n') {
            if (n + 1 < sizeof line) line[n++] = c;
            continue;
        }
        line[n] = 0;
        n = 0;
        if (strncmp(line, ANNOUNCE, strlen(ANNOUNCE))) {
            FILE *f = fopen(a->log_path, "a");
            if (f) { fprintf(f, "%s\n", line); fclose(f); }
            continue;
        }
        const char *url = line + strlen(ANNOUNCE);
        if (strlen(url) >= sizeof a->url || (strncmp(url, "tcp://", 6) && strncmp(url, "tls+tcp://", 10) &&
                                             strncmp(url, "ipc://", 6)))
            return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s: the launched worker announced '%s'", a->name, url);
        snprintf(a->url, sizeof a->url, "%s", url);
        return 0;
    }
}

#define HELLO_MS 10000   /* a listening worker answers hello at once */
#define HELLO_TRIES 3

int arm_connect(arm *a, int timeout_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen) {
    char e[600];
    int64_t t0 = clock_ms();
    /* A local worker's socket file appears when it listens: dialling before that, in short
     * attempts closed after 200 ms, sometimes left the worker's end of a half-made connection
     * stuck, and the worker then answered nothing (seen under load). So wait for the file, then
     * dial once with time to spare. */
    if (a->launched && !a->url[0]) {
        int rc = read_announce(a, t0, timeout_ms, stop, err, errlen);
        if (rc) return rc;
    }
    const proto_tls *tls = !strncmp(a->url, "tls+", 4) && a->opt ? a->opt->tls : NULL;
    if (!strncmp(a->url, "tls+", 4) && !tls)
        return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s: %s is a TLS URL: give --tls-cert, --tls-key and "
                          "--tls-ca", a->name, a->url);
    int local_ipc = !a->remote && !strncmp(a->url, "ipc://", 6);
    for (struct stat sb; local_ipc && (stat(a->url + 6, &sb) || !S_ISSOCK(sb.st_mode));) {
        if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
        if (arm_poll_exit(a)) return died_error(a, "before answering", err, errlen);
        if (clock_ms() - t0 > timeout_ms)
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: the worker did not listen on %s within %d s",
                              a->name, a->url, timeout_ms / 1000);
        sleep_ms(20);
    }
    for (int attempt = 1;; attempt++) {
        for (;;) {
            if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
            if (arm_poll_exit(a)) return died_error(a, "before answering", err, errlen);
            int rc = proto_dial_tls(a->url, local_ipc ? 2000 : tls ? 5000 : 200, recv_max, tls, &a->sock, e, sizeof e);
            if (rc == 0) break;
            if (rc != PROTO_E_TIMEOUT) return errmsg_set(err, errlen, rc, "arm %s: %s", a->name, e);
            if (clock_ms() - t0 > timeout_ms)
                return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: no worker answered on %s within %d s%s",
                               a->name, a->url, timeout_ms / 1000, tls ? " (over TLS: does the worker's "
                               "certificate name that host, and does each side's --tls-ca sign the other's "
                               "certificate?)" : "");
        }
        a->connected = 1;
        int rv, hello_ms = request_ms < HELLO_MS ? request_ms : HELLO_MS;
        if ((rv = nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, hello_ms)) ||
            (rv = nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, hello_ms)))
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set timeouts: %s", a->name, nng_strerror(rv));
        proto_msg req, rep;
        proto_init(&req, PROTO_HELLO, 0, 0);
        int rc = arm_call(a, &req, &rep, recv_max, err, errlen);
        if (rc) {
            if (arm_poll_exit(a)) return died_error(a, "during the handshake", err, errlen);
            /* a connected worker that does not answer hello: seen (rarely) as a request left
             * unread in the socket by nng; hello is harmless to repeat on a new connection */
            if (rc == PROTO_E_TIMEOUT && attempt < HELLO_TRIES) {
                nng_close(a->sock);
                a->connected = 0;
                continue;
            }
            return rc;
        }
        a->hello = rep.hello_rep;
        a->have_hello = 1;
        proto_msg_free(&rep);
        if ((rv = nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, request_ms)) ||
            (rv = nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, request_ms)))
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set timeouts: %s", a->name, nng_strerror(rv));
        return 0;
    }
}

/* ---- concurrent calls ------------------------------------------------------------------------ */

typedef struct {
    nng_socket sock;
    proto_msg req;
    proto_msg *rep;
    size_t max_len;
    int rc;
    char err[600];
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *n_done;
} call_job;

static void *call_thread(void *p) {
    call_job *j = p;
    j->rc = proto_call(j->sock, &j->req, j->rep, j->max_len, j->err, sizeof j->err);
    pthread_mutex_lock(j->mu);
    (*j->n_done)++;
    pthread_cond_signal(j->cv);
    pthread_mutex_unlock(j->mu);
    return NULL;
}

int arm_call_all(arm *arms, int n, const proto_msg *reqs, proto_msg *reps, size_t max_len,
                 int timeout_ms, const volatile sig_atomic_t *stop, int *codes, char *err,
                 size_t errlen) {
    call_job *jobs = calloc((size_t)n, sizeof *jobs);      /* [n] */
    pthread_t *th = calloc((size_t)n, sizeof *th);         /* [n] */
    int *started = calloc((size_t)n, sizeof *started);     /* [n] */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    pthread_condattr_t ca;
    int n_done = 0, n_active = 0, closed = 0, ret = 0, dead = 0;
    for (int i = 0; i < n; i++) memset(&reps[i], 0, sizeof reps[i]);
    if (codes)
        for (int i = 0; i < n; i++) codes[i] = 0;
    if (!jobs || !th || !started) {
        free(jobs); free(th); free(started);
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);

    for (int i = 0; i < n; i++) {
        if (reqs[i].type == PROTO_NONE) continue;
        if (!arms[i].connected) {
            ret = errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: not connected", arms[i].name);
            if (codes) codes[i] = PROTO_E_TRANSPORT;
            break;
        }
        /* a worker that died since the last request: a request sent now would wait for a
         * connection that never comes (until the timeout), so it is not sent */
        if (arm_poll_exit(&arms[i])) {
            char when[64], e[700];
            snprintf(when, sizeof when, "before a %s request", proto_type_name(reqs[i].type));
            int rc = died_error(&arms[i], when, e, sizeof e);
            if (codes) codes[i] = rc;
            if (!dead) dead = errmsg_set(err, errlen, rc, "%s", e);
            continue;
        }
        call_job *j = &jobs[i];
        if (timeout_ms > 0) {
            nng_socket_set_ms(arms[i].sock, NNG_OPT_RECVTIMEO, timeout_ms);
            nng_socket_set_ms(arms[i].sock, NNG_OPT_SENDTIMEO, timeout_ms);
        }
        j->sock = arms[i].sock;
        j->req = reqs[i];
        j->req.id = arms[i].next_id++;
        j->rep = &reps[i];
        j->max_len = max_len;
        j->mu = &mu;
        j->cv = &cv;
        j->n_done = &n_done;
        if (pthread_create(&th[i], NULL, call_thread, j)) {
            ret = errmsg_set(err, errlen, PROTO_E_INTERNAL, "arm %s: cannot start a thread", arms[i].name);
            break;
        }
        started[i] = 1;
        n_active++;
    }
    /* wait for all started calls, watching the stop flag */
    for (;;) {
        pthread_mutex_lock(&mu);
        if (n_done < n_active) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&cv, &mu, &ts);
        }
        int all = n_done >= n_active;
        pthread_mutex_unlock(&mu);
        if (all) break;
        if (stop && *stop && !closed) {
            /* Interrupted: a local worker is killed, so its connection drops and the blocked call
             * returns at once (requests are never resent). Closing a socket while another thread
             * is blocked in it can hang nng 1.5.2's nng_close (seen here, rarely): only a remote
             * arm, which we must not kill, is closed that way. */
            for (int i = 0; i < n; i++) {
                if (!started[i]) continue;
                if (!arms[i].remote && arms[i].pid > 0) arm_signal(&arms[i], SIGKILL);
                else nng_close(arms[i].sock);
            }
            closed = 1;
        }
    }
    for (int i = 0; i < n; i++)
        if (started[i]) pthread_join(th[i], NULL);
    /* every reply is checked against its request before anyone uses it */
    for (int i = 0; i < n && !closed; i++) {
        if (!started[i]) continue;
        if (jobs[i].rc) arms[i].n_past = -1;
        else if ((jobs[i].rc = arm_check_reply(&arms[i], &jobs[i].req, &reps[i], jobs[i].err, sizeof jobs[i].err)))
            proto_msg_free(&reps[i]);
    }
    if (closed) {
        for (int i = 0; i < n; i++)
            if (started[i]) arms[i].connected = 0, arms[i].n_past = -1;
        ret = errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
    } else if (!ret) {
        for (int i = 0; i < n; i++) {
            if (!started[i] || jobs[i].rc == 0) continue;
            arm *a = &arms[i];
            int rc = jobs[i].rc;
            char e[700];
            snprintf(e, sizeof e, "arm %s: %s", a->name, jobs[i].err);
            /* a dropped connection usually means the worker died: give it a moment to be reaped */
            if (!a->remote && rc == PROTO_E_TRANSPORT)
                for (int t = 0; t < 25 && !arm_poll_exit(a); t++) sleep_ms(20);
            if (!a->remote && (rc == PROTO_E_TRANSPORT || rc == PROTO_E_TIMEOUT) && arm_poll_exit(a)) {
                char when[64];
                snprintf(when, sizeof when, "during a %s request", proto_type_name(reqs[i].type));
                rc = died_error(a, when, e, sizeof e);
            }
            if (codes) codes[i] = rc;
            if (!ret && !dead) ret = errmsg_set(err, errlen, rc, "%s", e);
        }
        if (!ret) ret = dead;
    }
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
    free(jobs);
    free(th);
    free(started);
    return ret;
}

/* ============================================================================================
 * The handshake check
 * ========================================================================================== */

enum { F_ENGINE, F_GIT, F_DEVICE, F_SHA, F_ARCH, F_TOK, F_VOCAB, F_BOS, F_LAYER, F_CTX, F_THREADS,
       F_KVK, F_KVV, F_KVL, F_WIN, F_KVB, F_WEIGHTS, F_FILE, F_N };
static const char *const field_names[F_N] = {
    "engine", "git", "device", "model_sha256", "arch", "tokenizer_hash", "n_vocab", "bos", "n_layer",
    "n_ctx", "threads", "kv_k", "kv_v", "kv_layers", "window", "kv_bytes_per_token", "weights", "model_file" };
/* must be equal for a valid comparison: 1 among all arms, 2 among the arms that are not weight arms */
static const int field_must[F_N] = { 0, 0, 0, 2, 2, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
/* worth a note when different */
static const int field_note[F_N] = { 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0 };

/* A path's last component without ".gguf" into buf [len]. */
static void file_base(const char *path, char *buf, size_t len) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t l = strlen(b);
    if (l >= len) l = len - 1;   /* cut short (a table cell) */
    memcpy(buf, b, l);
    buf[l] = 0;
    if (l > 5 && !strcmp(buf + l - 5, ".gguf")) buf[l - 5] = 0;
}

static void field_value(const arm *a, int f, char *buf, size_t len) {
    const proto_hello_rep *h = &a->hello;
    switch (f) {
    case F_ENGINE: snprintf(buf, len, "%s", h->engine); break;
    case F_GIT: snprintf(buf, len, "%s", h->git); break;
    case F_DEVICE: snprintf(buf, len, "%s", h->device); break;
    case F_SHA: snprintf(buf, len, "%s", h->model_sha256); break;
    case F_ARCH: snprintf(buf, len, "%s", h->arch); break;
    case F_TOK: snprintf(buf, len, "%s", h->tokenizer_hash); break;
    case F_VOCAB: snprintf(buf, len, "%u", h->n_vocab); break;
    case F_BOS: snprintf(buf, len, "%d", h->bos); break;
    case F_LAYER: snprintf(buf, len, "%u", h->n_layer); break;
    case F_CTX: snprintf(buf, len, "%llu", (unsigned long long)h->n_ctx); break;
    case F_THREADS: snprintf(buf, len, "%u", h->threads); break;
    case F_KVK: snprintf(buf, len, "%s", h->kv_k); break;
    case F_KVV: snprintf(buf, len, "%s", h->kv_v); break;
    case F_KVL: snprintf(buf, len, "%s", h->kv_layers[0] ? h->kv_layers : "-"); break;
    case F_WIN:   /* "-" unknown (an older worker), "none", or "512: 3 of 18 full" */
        if (!h->has_window) snprintf(buf, len, "-");
        else if (!h->window) snprintf(buf, len, "none");
        else snprintf(buf, len, "%u: %u of %u full", h->window, h->layers_full, h->n_layer);
        break;
    case F_WEIGHTS: snprintf(buf, len, "%s", a->remote ? "remote" : a->own_model ? "--arm-model" : "--model"); break;
    case F_FILE: if (a->model[0]) file_base(a->model, buf, len); else snprintf(buf, len, "-"); break;
    default: snprintf(buf, len, "%llu", (unsigned long long)h->kv_bytes_per_token); break;
    }
}

static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    size_t l = strlen(buf);
    if (l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + l, len - l, fmt, ap);
    va_end(ap);
}

int arm_check_handshake(const arm *arms, int n, FILE *out, char *notes, size_t noteslen,
                        char *err, size_t errlen) {
    char v[PROTO_STR_MAX], v0[PROTO_STR_MAX];
    int differs[F_N] = { 0 }, fatal[F_N] = { 0 }, n_own = 0, first_plain = -1;
    for (int i = 0; i < n; i++) {
        n_own += arms[i].own_model;
        if (!arms[i].own_model && first_plain < 0) first_plain = i;
    }
    for (int f = 0; f < F_N; f++) {
        field_value(&arms[0], f, v0, sizeof v0);
        for (int i = 1; i < n; i++) {
            field_value(&arms[i], f, v, sizeof v);
            if (strcmp(v, v0)) differs[f] = 1;
        }
        fatal[f] = field_must[f] == 1 && differs[f];
        if (field_must[f] == 2 && first_plain >= 0) {   /* the same model among the --model / remote arms */
            field_value(&arms[first_plain], f, v0, sizeof v0);
            for (int i = 0; i < n; i++) {
                if (arms[i].own_model) continue;
                field_value(&arms[i], f, v, sizeof v);
                if (strcmp(v, v0)) fatal[f] = 1;
            }
        }
    }
    if (out) {
        /* column widths; long hashes are shown by their first 16 characters */
        int w0 = 0, w[64] = { 0 };
        int nc = n < 64 ? n : 64;
        for (int f = 0; f < F_N; f++) if ((int)strlen(field_names[f]) > w0) w0 = (int)strlen(field_names[f]);
        for (int i = 0; i < nc; i++) {
            w[i] = (int)strlen(arms[i].name);
            for (int f = 0; f < F_N; f++) {
                field_value(&arms[i], f, v, sizeof v);
                int l = (int)strlen(v);
                if (l > 19) l = 19;
                if (l > w[i]) w[i] = l;
            }
        }
        fprintf(out, "handshake (* = differs between arms):\n  %-*s", w0, "arm");
        for (int i = 0; i < nc; i++) fprintf(out, "  %-*s", w[i], arms[i].name);
        fprintf(out, "\n");
        for (int f = 0; f < F_N; f++) {
            if ((f == F_WEIGHTS || f == F_FILE) && !n_own) continue;   /* shown for runs with weight arms */
            fprintf(out, "%c %-*s", differs[f] ? '*' : ' ', w0, field_names[f]);
            for (int i = 0; i < nc; i++) {
                field_value(&arms[i], f, v, sizeof v);
                if (strlen(v) > 19) { v[16] = '.'; v[17] = '.'; v[18] = '.'; v[19] = 0; }
                fprintf(out, "  %-*s", w[i], v);
            }
            fprintf(out, "\n");
        }
        fflush(out);
    }
    /* fatal differences */
    if (err && errlen) err[0] = 0;
    int bad = 0;
    for (int f = 0; f < F_N; f++) {
        if (!fatal[f]) continue;
        int tok = field_must[f] == 1;
        const char *lead = n_own && tok ? "a weight arm (--arm-model) must have the same tokenizer and vocabulary as "
                                          "the other arms: "
                                        : "the arms differ in more than the KV format: ";
        append(err, errlen, "%s%s differs:", bad ? "; " : lead, field_names[f]);
        for (int i = 0; i < n; i++) {
            if (!tok && arms[i].own_model) continue;
            field_value(&arms[i], f, v, sizeof v);
            append(err, errlen, " %s=%s", arms[i].name, v);
        }
        bad = 1;
    }
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        int fmt_differs = a->kv_k[0] && (strcmp(a->kv_k, a->hello.kv_k) || strcmp(a->kv_v, a->hello.kv_v));
        if (!fmt_differs) continue;
        if (!a->remote) {
            append(err, errlen, "%sarm %s was started with K/V %s/%s but reports %s/%s", bad ? "; " : "",
                   a->name, a->kv_k, a->kv_v, a->hello.kv_k, a->hello.kv_v);
            bad = 1;
        } else if (a->opt && a->opt->allow_kv_mismatch) {
            char label[ARM_NAME_MAX], e2[256];
            if (arm_ran_label(a, label, e2, sizeof e2)) snprintf(label, sizeof label, "?");
            append(notes, noteslen, "remote arm %s is named for K/V %s/%s but its worker runs %s/%s "
                   "(--allow-kv-mismatch): the results label it %s\n", a->name, a->kv_k, a->kv_v, a->hello.kv_k,
                   a->hello.kv_v, label);
        } else {
            append(err, errlen, "%sremote arm %s is named for K/V %s/%s but its worker runs %s/%s (give "
                   "--allow-kv-mismatch to run it, labelled by what it runs)", bad ? "; " : "", a->name, a->kv_k,
                   a->kv_v, a->hello.kv_k, a->hello.kv_v);
            bad = 1;
        }
    }
    if (bad) return ARM_E_MISMATCH;
    for (int i = 0; i < n; i++) {
        if (!arms[i].own_model) continue;
        append(notes, noteslen, "arm %s runs its own model %s (sha256 %.16s..., %s, %u layers): the arms differ in "
               "weights, not only in KV; the handshake required the same tokenizer_hash, n_vocab and bos only\n",
               arms[i].name, arms[i].model, arms[i].hello.model_sha256, arms[i].hello.arch, arms[i].hello.n_layer);
    }
    for (int f = 0; f < F_N; f++) {
        if (!field_note[f] || !differs[f]) continue;
        append(notes, noteslen, "the arms differ in %s:", field_names[f]);
        for (int i = 0; i < n; i++) {
            field_value(&arms[i], f, v, sizeof v);
            append(notes, noteslen, " %s=%s", arms[i].name, v);
        }
        append(notes, noteslen, "\n");
    }
    return 0;
}

/* ============================================================================================
 * Stopping and reaping
 * ========================================================================================== */

/* Waits up to ms for every running local worker to exit. Returns 1 when none is left running. */
static int wait_all(arm *arms, int n, int ms) {
    int64_t end = clock_ms() + ms;
    for (;;) {
        int running = 0;
        for (int i = 0; i < n; i++)
            if (!arms[i].remote && arms[i].pid > 0 && !arm_poll_exit(&arms[i])) running++;
        if (!running) return 1;
        if (clock_ms() >= end) return 0;
        sleep_ms(20);
    }
}

static void signal_all(arm *arms, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (!arms[i].remote && arms[i].pid > 0 && !arm_poll_exit(&arms[i])) arm_signal(&arms[i], sig);
}

void arm_stop_all(arm *arms, int n, int polite, int grace_ms) {
    int asked = 0;
    for (int i = 0; i < n; i++) {
        arm *a = &arms[i];
        if (!a->connected) continue;
        if (polite && !a->remote && !arm_poll_exit(a)) {
            proto_msg req, rep;
            char e[256];
            nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, 2000);
            nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, 2000);
            proto_init(&req, PROTO_SHUTDOWN, 0, 0);
            if (arm_call(a, &req, &rep, 4096, e, sizeof e) == 0) asked = 1;
            proto_msg_free(&rep);
        }
        nng_close(a->sock);
        a->connected = 0;
    }
    if (wait_all(arms, n, asked ? grace_ms : 0)) goto pipes;
    signal_all(arms, n, SIGTERM);
    if (wait_all(arms, n, grace_ms)) goto pipes;
    signal_all(arms, n, SIGKILL);
    for (int i = 0; i < n; i++) {
        arm *a = &arms[i];
        if (a->remote || a->pid <= 0 || a->exited) continue;
        int st;
        if (waitpid(a->pid, &st, 0) == a->pid) { a->exited = 1; a->status = st; }
    }
pipes:
    for (int i = 0; i < n; i++) launch_close(&arms[i]);
}

void arm_stop(arm *a, int polite, int grace_ms) {
    arm_stop_all(a, 1, polite, grace_ms);
}

/* ============================================================================================
 * Restarting a worker
 * ========================================================================================== */

/* The hello fields a restarted worker must repeat exactly. */
static const char *hello_differs(const proto_hello_rep *a, const proto_hello_rep *b) {
    if (strcmp(a->model_sha256, b->model_sha256)) return "model_sha256";
    if (strcmp(a->tokenizer_hash, b->tokenizer_hash)) return "tokenizer_hash";
    if (strcmp(a->arch, b->arch)) return "arch";
    if (a->n_vocab != b->n_vocab) return "n_vocab";
    if (a->n_layer != b->n_layer) return "n_layer";
    if (a->n_ctx != b->n_ctx) return "n_ctx";
    if (strcmp(a->kv_k, b->kv_k)) return "kv_k";
    if (strcmp(a->kv_v, b->kv_v)) return "kv_v";
    if (strcmp(a->engine, b->engine)) return "engine";
    if (strcmp(a->git, b->git)) return "git";
    if (strcmp(a->device, b->device)) return "device";
    return NULL;
}

int arm_restart(arm *a, int i, const arm_launch *l, int dial_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen) {
    if (a->remote)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: a remote worker cannot be restarted from here",
                          a->name);
    if (!a->have_hello)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: no handshake to compare a restart with", a->name);
    proto_hello_rep old = a->hello;
    if (a->connected) {
        /* no call is in flight (arm_call_all has joined its threads): closing is safe */
        nng_close(a->sock);
        a->connected = 0;
    }
    if (a->pid > 0 && !a->exited) {
        arm_signal(a, SIGKILL);           /* also ends a stopped (SIGSTOP) process */
        int st;
        while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR) {}
        a->exited = 1;
        a->status = st;
    }
    if (a->log_path[0]) {
        FILE *f = fopen(a->log_path, "a");
        if (f) {
            char st[96];
            arm_describe_status(a->status, st, sizeof st);
            fprintf(f, RESTART_MARK "worker pid %d ended (%s); starting a new one ====\n", (int)a->pid, st);
            fclose(f);
        }
    }
    if (!strncmp(a->url, "ipc://", 6)) unlink(a->url + 6);   /* the old listener's socket file */
    a->pid = 0;
    a->have_hello = 0;
    int rc = arm_spawn(a, i, l, err, errlen);
    if (!rc) rc = arm_connect(a, dial_ms, request_ms, recv_max, stop, err, errlen);
    if (rc) return rc;
    const char *f = hello_differs(&old, &a->hello);
    if (f)
        return errmsg_set(err, errlen, ARM_E_MISMATCH, "arm %s: the restarted worker differs from the first in %s",
                          a->name, f);
    return 0;
}

/* ============================================================================================
 * The private temp directory
 * ========================================================================================== */

/* Removes the plain entries of dir, then dir (fails quietly on anything else). */
static void remove_flat(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p) unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Removes parent/strata-?????? directories of this user whose lock file nobody holds: a driver
 * that was killed (SIGKILL, a second Ctrl-C) could not remove its own. Directories without a lock
 * file (a driver still creating it, or an older version) are left alone. */
static void clean_stale_tmpdirs(const char *parent) {
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "strata-", 7) || strlen(e->d_name) != 13) continue;
        char dir[4096], lock[4200];
        struct stat st;
        if (snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name) >= (int)sizeof dir) continue;
        if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
        snprintf(lock, sizeof lock, "%s/lock", dir);
        int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) remove_flat(dir);
        close(fd);
    }
    closedir(d);
}

int arm_tmpdir_create(char *dir, size_t len, int *lock_fd, char *err, size_t errlen) {
    const char *td = getenv("TMPDIR");
    const char *parent = td && td[0] ? td : "/tmp";
    *lock_fd = -1;
    clean_stale_tmpdirs(parent);
    if (snprintf(dir, len, "%s/strata-XXXXXX", parent) >= (int)len)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "temp dir path too long: %s", parent);
    if (!mkdtemp(dir)) {
        int e = errno;
        errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create a temp dir %s: %s", dir, strerror(e));
        dir[0] = 0;
        return ARM_E_SYSTEM;
    }
    /* locked under a temporary name, then renamed: "lock" is never seen unlocked */
    char tmp[4200], lock[4200];
    snprintf(tmp, sizeof tmp, "%s/lock.new", dir);
    snprintf(lock, sizeof lock, "%s/lock", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) || rename(tmp, lock)) {
        int e = errno;
        if (fd >= 0) close(fd);
        remove_flat(dir);
        errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create the lock file in %s: %s", dir, strerror(e));
        dir[0] = 0;
        return ARM_E_SYSTEM;
    }
    *lock_fd = fd;
    return 0;
}

void arm_tmpdir_remove(const char *dir, int lock_fd) {
    if (dir && dir[0]) remove_flat(dir);
    if (lock_fd >= 0) close(lock_fd);
}

void arm_save_logs(const arm *arms, int n, const char *out_dir) {
    char path[PATH_MAX];
    int any = 0;
    for (int i = 0; i < n; i++) any |= !arms[i].remote && arms[i].log_path[0];
    if (!any) return;
    snprintf(path, sizeof path, "%s/workers.log", out_dir);
    FILE *o = fopen(path, "a");   /* --force removed an old one; a resumed run appends */
    if (!o) return;
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        if (a->remote || !a->log_path[0]) continue;
        char st[128] = "still running";
        if (a->exited) arm_describe_status(a->status, st, sizeof st);
        fprintf(o, "==== arm %s (pid %d, %s): %s ====\n", a->name, (int)a->pid, a->url, st);
        FILE *f = fopen(a->log_path, "r");
        char b[8192];
        size_t got;
        while (f && (got = fread(b, 1, sizeof b, f)) > 0) fwrite(b, 1, got, o);
        if (f) fclose(f);
    }
    fclose(o);
}

int arm_tokenize(arm *a, const char *text, size_t len, int add_bos, int special, size_t max_len,
                 int32_t **ids, size_t *n, char *err, size_t errlen) {
    proto_msg req, rep;
    proto_init(&req, PROTO_TOKENIZE, 0, 0);
    req.tokenize_req.text = (char *)text;   /* only read */
    req.tokenize_req.n_text = len;
    req.tokenize_req.add_bos = add_bos ? 1 : 0;
    req.tokenize_req.special = special ? 1 : 0;
    int rc = arm_call(a, &req, &rep, max_len, err, errlen);
    if (!rc) {
        *ids = rep.tokenize_rep.tokens;     /* taken over from the reply */
        *n = rep.tokenize_rep.n_tokens;
        rep.tokenize_rep.tokens = NULL;
    }
    proto_msg_free(&rep);
    return rc;
}
