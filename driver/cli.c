/* cli.c — the driver's shared command-line helpers (see cli.h). */
#include "driver/cli.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto/safeio.h"

#define TAG_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-"

void cli_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata-driver: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        cli_errorf("%s needs an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    long v;
    if (cli_parse_long(opt, s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

int cli_engine_opt(cli_engine_opts *e, int c, const char *arg) {
    switch (c) {
    case 'c': return cli_parse_int("--chunk", arg, 1, 1 << 20, &e->chunk) ? -1 : 1;
    case 't': return cli_parse_int("--threads", arg, 1, 1024, &e->threads) ? -1 : 1;
    case 'p': return cli_parse_int("--prefill", arg, 1, 1 << 16, &e->prefill) ? -1 : 1;
    case 'X': return cli_parse_int("--max-context", arg, 1, 1 << 22, &e->max_context) ? -1 : 1;
    case 'w': e->worker = arg; return 1;
    default: return 0;
    }
}

int cli_resumable_opt(workers_arm_opts *ao, int c, const char *arg, const char *beside, int *n_run_opts) {
    int beside_resume = c > 255 ? c >= 1001 && c <= 1005 : strchr(beside, c) != NULL;
    if (!beside_resume) (*n_run_opts)++;
    int taken = workers_arm_opt(ao, c, arg);
    if (taken < 0) cli_errorf("out of memory");
    return taken;
}

int cli_check_tag(const char *tag) {
    if (!tag[0]) { cli_errorf("--tag is empty"); return -1; }
    if (tag[strspn(tag, TAG_CHARS)]) {
        cli_errorf("--tag '%s': use letters, digits and . _ + - only", tag);
        return -1;
    }
    return 0;
}

void cli_sanitize(char *s) {
    for (; *s; s++)
        if (!strchr(TAG_CHARS, *s)) *s = '_';
}

int cli_exe_dir(char *dir) {
    ssize_t n = readlink("/proc/self/exe", dir, PATH_MAX - 1);
    if (n <= 0) return -1;
    dir[n] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    *slash = 0;
    return 0;
}

int cli_mkdir_p(const char *path, char *err, size_t errlen) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return errmsg_set(err, errlen, -1, "path too long: %s", path);
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q) continue;
        char c = *q;
        *q = 0;
        if (mkdir(p, 0755) && errno != EEXIST) {
            int e = errno;
            return errmsg_set(err, errlen, -1, "cannot create %s: %s", p, strerror(e));
        }
        *q = c;
        if (!c) break;
    }
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) return errmsg_set(err, errlen, -1, "%s is not a directory", path);
    return 0;
}

int cli_default_out_dir(const char *tag, char *out, size_t outlen) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    strftime(stamp, sizeof stamp, "%Y-%m-%d-%H%M", &tmv);
    for (int k = 1; k < 1000; k++) {
        char sfx[16] = "";
        struct stat st;
        if (k > 1) snprintf(sfx, sizeof sfx, "-%d", k);
        if (snprintf(out, outlen, "results/%s-%s%s", stamp, tag, sfx) >= (int)outlen) return -1;
        if (lstat(out, &st) && errno == ENOENT) return 0;
    }
    return -1;
}

int cli_render(int (*render)(const char *dir, char *err, size_t errlen), const char *out_dir, int quiet) {
    char err[1024];
    if (render(out_dir, err, sizeof err)) {
        cli_errorf("rendering the report failed: %s (the raw results are in %s; rerun: strata-driver report %s)",
                   err, out_dir, out_dir);
        return -1;
    }
    if (!quiet) fprintf(stderr, "strata-driver: wrote %s/README.md\n", out_dir);
    return 0;
}

/* Appends " name" to missing [len] at *off and counts it. */
static void add_missing(char *missing, size_t len, size_t *off, int *n, const char *name) {
    int w = snprintf(missing + *off, len - *off, "%s%s", *off ? " " : "", name);
    if (w > 0) *off = *off + (size_t)w < len ? *off + (size_t)w : len - 1;
    (*n)++;
}

int cli_resume_missing(const workers_arm_opts *rec, const char *rec_worker, const workers_arm_opts *given,
                       const char *given_worker, char *missing, size_t len) {
    size_t off = 0;
    int n = 0;
    if (len) missing[0] = 0;
    if (!len) return 0;
    if (rec->launch && !given->launch) add_missing(missing, len, &off, &n, "--launch");
    if (rec->launch_listen && !given->launch_listen) add_missing(missing, len, &off, &n, "--launch-listen");
    if (rec_worker && !given_worker) add_missing(missing, len, &off, &n, "--worker");
    if ((rec->tls_cert || rec->tls_key || rec->tls_ca) && !given->tls_cert)
        add_missing(missing, len, &off, &n, "--tls-cert --tls-key --tls-ca");
    for (int i = 0; i < rec->n_remote; i++) {
        const char *eq = strchr(rec->remote[i], '=');
        size_t nl = eq ? (size_t)(eq - rec->remote[i]) : strlen(rec->remote[i]);
        int found = 0;
        for (int k = 0; k < given->n_remote && !found; k++)
            found = !strncmp(given->remote[k], rec->remote[i], nl) && given->remote[k][nl] == '=';
        if (found) continue;
        char name[128], esc[512], item[600];
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), rec->remote[i]);
        safeio_escape(esc, sizeof esc, name);
        snprintf(item, sizeof item, "--arm %s=URL", esc);
        add_missing(missing, len, &off, &n, item);
    }
    return n;
}

int cli_abs_path(const char *path, char *out, size_t outlen) {
    char cwd[PATH_MAX];
    if (path[0] == '/') return snprintf(out, outlen, "%s", path) < (int)outlen ? 0 : -1;
    if (!getcwd(cwd, sizeof cwd)) return -1;
    return snprintf(out, outlen, "%s/%s", cwd, path) < (int)outlen ? 0 : -1;
}

void cli_resume_take_workers(workers_arm_opts *rec, workers_arm_opts *given) {
    free(rec->remote);
    rec->remote = given->remote;
    rec->n_remote = given->n_remote;
    given->remote = NULL;
    given->n_remote = 0;
    rec->launch = given->launch;
    rec->launch_listen = given->launch_listen;
    rec->tls_cert = given->tls_cert;
    rec->tls_key = given->tls_key;
    rec->tls_ca = given->tls_ca;
}
