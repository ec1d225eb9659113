/* sweep.c — the one-pass sweep over nested prefixes, in lockstep on every arm, writing the raw
 * results (meta.json and the TSVs) as it goes. See sweep.h.
 *
 * Reading order: planning helpers; progress line; meta.json; per-chunk checks; sweep_run. */
#include "driver/sweep.h"
#include "proto/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "driver/report.h"
#include "driver/stats.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ============================================================================================
 * Planning
 * ========================================================================================== */

int sweep_depths(int D, int K, int *depths) {
    if (K < 1 || D < K) return -1;
    for (int k = 1; k <= K; k++)
        depths[k - 1] = (int)((2 * (int64_t)k * D + K) / (2 * (int64_t)K));   /* round(k*D/K) */
    return 0;
}

int sweep_max_depth(size_t n_tokens, int max_depth, uint64_t n_ctx, int fork_n, int K, char *err,
                    size_t errlen) {
    if (n_ctx <= (uint64_t)fork_n)
        return -errmsg_set(err, errlen, 1, "the context (%llu tokens) has no room for a %d-token fork probe",
                        (unsigned long long)n_ctx, fork_n);
    uint64_t by_ctx = n_ctx - (uint64_t)fork_n;
    uint64_t by_doc = n_tokens > 0 ? (uint64_t)n_tokens - 1 : 0;
    if (max_depth > 0 && (uint64_t)max_depth > by_ctx)
        return -errmsg_set(err, errlen, 1, "--max-depth %d exceeds the context: n_ctx %llu minus the fork "
                        "probe's %d tokens allows at most %llu", max_depth, (unsigned long long)n_ctx,
                        fork_n, (unsigned long long)by_ctx);
    if (max_depth > 0 && (uint64_t)max_depth > by_doc)
        return -errmsg_set(err, errlen, 1, "--max-depth %d exceeds the document: it has %zu tokens, so the "
                        "deepest prefix with a known next token is %llu", max_depth, n_tokens,
                        (unsigned long long)by_doc);
    uint64_t D = by_doc < by_ctx ? by_doc : by_ctx;
    if (max_depth > 0 && (uint64_t)max_depth < D) D = (uint64_t)max_depth;
    if (D > INT32_MAX / 2) D = INT32_MAX / 2;
    if (D < (uint64_t)K)
        return -errmsg_set(err, errlen, 1, "the document is too short: %zu tokens give a deepest prefix of "
                        "%llu tokens, fewer than the %d depths asked for (--depths)", n_tokens,
                        (unsigned long long)D, K);
    return (int)D;
}

int sweep_fork_index(const int32_t *a, const int32_t *b, int n, int *censored) {
    for (int i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            *censored = 0;
            return i;
        }
    }
    *censored = 1;
    return n;
}

/* ============================================================================================
 * Progress on stderr: a bar redrawn with \r on a terminal, else a plain line every 5 s
 * ========================================================================================== */

typedef struct {
    int quiet, tty;
    double t0, last;
    long total;        /* prefill tokens of the whole sweep */
    int n_depths;
    int drawn;         /* a \r line is on screen */
} progress;

static void fmt_eta(double s, char *buf, size_t len) {
    if (!isfinite(s) || s < 0) { snprintf(buf, len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void progress_show(progress *p, int depth_k, long done, int force) {
    if (p->quiet) return;
    double t = now_s();
    if (!force && t - p->last < (p->tty ? 0.1 : 5.0)) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? done / el : 0;
    char eta[32];
    fmt_eta(rate > 0 ? (p->total - done) / rate : NAN, eta, sizeof eta);
    int pct = p->total > 0 ? (int)(100.0 * done / p->total) : 100;
    if (p->tty) {
        char bar[31];
        int fill = pct * 30 / 100;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r[%s] depth %d/%d  %ld/%ld tokens  %.0f tok/s  ETA %s   ", bar, depth_k,
                p->n_depths, done, p->total, rate, eta);
        p->drawn = 1;
    } else {
        fprintf(stderr, "strata-driver: depth %d/%d, %ld/%ld tokens (%d%%), %.0f tok/s, ETA %s\n", depth_k,
                p->n_depths, done, p->total, pct, rate, eta);
    }
    fflush(stderr);
}

static void progress_end(progress *p) {
    if (!p->quiet && p->drawn) fprintf(stderr, "\n");
    p->drawn = 0;
}

/* ============================================================================================
 * meta.json
 * ========================================================================================== */

/* "Linux 6.1.0 x86_64; <CPU model>; N cores" into buf. */
static void machine_string(char *buf, size_t len) {
    struct utsname u;
    char cpu[256] = "unknown CPU";
    if (uname(&u)) strcpy(u.sysname, "?"), strcpy(u.release, "?"), strcpy(u.machine, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon || strncmp(line, "model name", 10)) continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(cpu, sizeof cpu, "%s", v);
            break;
        }
        fclose(f);
    }
    snprintf(buf, len, "%s %s %s; %s; %ld cores", u.sysname, u.release, u.machine, cpu,
             sysconf(_SC_NPROCESSORS_ONLN));
}

static json_t *jstr_or(const char *s) { return json_string(s ? s : "unknown"); }

typedef struct {
    char date[64];
    char machine[512];
    double t0;
    proto_stats_rep *stats;   /* [n_arms] */
    int *have_stats;          /* [n_arms] */
} meta_state;

/* Writes out_dir/meta.json (through a temp file and rename). Returns 0 or SWEEP_ERROR. */
static int write_meta(const sweep_config *c, const arm *arms, int n, const meta_state *ms,
                      int depths_done, const char *status, int complete, char *err, size_t errlen) {
    const proto_hello_rep *h = &arms[c->ref].hello;
    json_t *root = json_object(), *model = json_object(), *doc = json_object();
    json_t *jarms = json_array(), *jdep = json_array();
    char engine[2 * PROTO_STR_MAX + 16];
    snprintf(engine, sizeof engine, "%s (git %s)", h->engine, h->git);
    json_object_set_new(root, "tag", jstr_or(c->tag));
    json_object_set_new(root, "date", json_string(ms->date));
    json_object_set_new(root, "command", jstr_or(c->command));
    json_object_set_new(root, "git", jstr_or(c->git));
    json_object_set_new(root, "engine", json_string(engine));
    json_object_set_new(root, "machine", json_string(ms->machine));
    json_object_set_new(model, "path", jstr_or(c->model_path));
    json_object_set_new(model, "sha256", json_string(h->model_sha256));
    json_object_set_new(model, "arch", json_string(h->arch));
    json_object_set_new(model, "n_vocab", json_integer(h->n_vocab));
    json_object_set_new(model, "n_ctx", json_integer((json_int_t)h->n_ctx));
    json_object_set_new(model, "n_layer", json_integer(h->n_layer));
    json_object_set_new(model, "tokenizer_hash", json_string(h->tokenizer_hash));
    json_object_set_new(root, "model", model);
    json_object_set_new(doc, "path", jstr_or(c->doc_path));
    json_object_set_new(doc, "n_tokens", json_integer((json_int_t)c->n_tokens));
    json_object_set_new(doc, "description", jstr_or(c->doc_description));
    json_object_set_new(root, "document", doc);
    json_object_set_new(root, "ref", json_string(arms[c->ref].name));
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        json_t *ja = json_object();
        json_object_set_new(ja, "name", json_string(a->name));
        json_object_set_new(ja, "kv_k", json_string(a->hello.kv_k));
        json_object_set_new(ja, "kv_v", json_string(a->hello.kv_v));
        json_object_set_new(ja, "kv_bytes_per_token", json_integer((json_int_t)a->hello.kv_bytes_per_token));
        json_object_set_new(ja, "url", json_string(a->url));
        json_object_set_new(ja, "remote", json_boolean(a->remote));
        json_object_set_new(ja, "device", json_string(a->hello.device));
        json_object_set_new(ja, "threads", json_integer(a->hello.threads));
        if (ms->have_stats[i]) {
            const proto_stats_rep *s = &ms->stats[i];
            json_object_set_new(ja, "prefill_tokens", json_integer((json_int_t)s->prefill_tokens));
            json_object_set_new(ja, "prefill_seconds", json_real(s->prefill_seconds));
            json_object_set_new(ja, "decode_tokens", json_integer((json_int_t)s->decode_tokens));
            json_object_set_new(ja, "decode_seconds", json_real(s->decode_seconds));
            json_object_set_new(ja, "peak_rss", json_integer((json_int_t)s->peak_rss));
        } else {
            json_object_set_new(ja, "prefill_tokens", json_null());
            json_object_set_new(ja, "prefill_seconds", json_null());
            json_object_set_new(ja, "decode_tokens", json_null());
            json_object_set_new(ja, "decode_seconds", json_null());
            json_object_set_new(ja, "peak_rss", json_null());
        }
        json_array_append_new(jarms, ja);
    }
    json_object_set_new(root, "arms", jarms);
    for (int k = 0; k < c->n_depths; k++) json_array_append_new(jdep, json_integer(c->depths[k]));
    json_object_set_new(root, "depths", jdep);
    json_object_set_new(root, "depths_done", json_integer(depths_done));
    json_object_set_new(root, "fork_n", json_integer(c->fork_n));
    json_object_set_new(root, "per_position", json_boolean(c->per_position));
    json_object_set_new(root, "chunk", json_integer(c->chunk));
    json_object_set_new(root, "wall_seconds", json_real(now_s() - ms->t0));
    struct rusage ru;   /* the driver's own memory: O(chunk x vocab x arms) in per-position mode */
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        json_object_set_new(root, "driver_peak_rss", json_integer((json_int_t)ru.ru_maxrss * 1024));
    if (c->warnings) json_object_set(root, "warnings", c->warnings);   /* borrowed: adds a reference */
    else json_object_set_new(root, "warnings", json_array());
    json_object_set_new(root, "status", json_string(status));
    json_object_set_new(root, "complete", json_boolean(complete));

    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/meta.json", c->out_dir);
    snprintf(tmp, sizeof tmp, "%s/.meta.json.tmp", c->out_dir);
    int ret = 0;
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || rename(tmp, path))
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s: %s", path, strerror(errno));
    json_decref(root);
    return ret;
}

/* ============================================================================================
 * Checks on replies and rows
 * ========================================================================================== */

static int row_finite(const float *row, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(row[i])) return 0;
    return 1;
}

/* Appends a warning, printed loudly on stderr. */
static void warn_loud(const sweep_config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_loud(const sweep_config *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n"
            "strata-driver: !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            "strata-driver: WARNING: %s\n"
            "strata-driver: !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n",
            msg);
    fflush(stderr);
    if (c->warnings) json_array_append_new(c->warnings, json_string(msg));
}

/* twin[i] = the first arm j < i with the same configuration, or -1 */
static void find_twins(const arm *arms, int n, int *twin) {
    for (int i = 0; i < n; i++) {
        twin[i] = -1;
        const proto_hello_rep *a = &arms[i].hello;
        for (int j = 0; j < i && twin[i] < 0; j++) {
            const proto_hello_rep *b = &arms[j].hello;
            if (!strcmp(a->kv_k, b->kv_k) && !strcmp(a->kv_v, b->kv_v) && !strcmp(a->device, b->device) &&
                !strcmp(a->engine, b->engine) && !strcmp(a->git, b->git))
                twin[i] = j;
        }
    }
}

static int dump_row(const sweep_config *c, const arm *a, int depth, const float *row, int V, char *err,
                    size_t errlen) {
    char name[ARM_NAME_MAX], path[4096];
    snprintf(name, sizeof name, "%s", a->name);
    for (char *q = name; *q; q++)
        if (*q == '/' || *q == ':') *q = '_';
    snprintf(path, sizeof path, "%s/%s-%d.f32", c->dump_rows_dir, name, depth);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(row, sizeof(float), (size_t)V, f) == (size_t)V;
    if (f && fclose(f)) ok = 0;
    if (!ok) return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* ============================================================================================
 * The sweep
 * ========================================================================================== */

typedef struct {
    FILE *depths, *positions, *forks;
    proto_msg *req;       /* [n_arms] */
    proto_msg *rep;       /* [n_arms] */
    int *twin;            /* [n_arms] */
    int *twin_warned;     /* [n_arms] */
    stats_row *tf;        /* [n_arms] teacher-forced metrics of the current depth */
    int *fork;            /* [n_arms] */
    int *censored;        /* [n_arms] */
} sweep_state;

static void free_reps(proto_msg *rep, int n) {
    for (int i = 0; i < n; i++) proto_msg_free(&rep[i]);
}

/* Compares every non-reference arm's row with the reference's (ref_row [V], rows[a] [V]) and
 * with its twin's. Fills out[a]. Returns 0 or SWEEP_ERROR (non-finite logits). */
static int compare_position(const sweep_config *c, const arm *arms, int n, sweep_state *st,
                            const float *const *rows, int V, int pos, int depth_for_msg,
                            stats_row *out, char *err, size_t errlen) {
    int next = (size_t)pos + 1 < c->n_tokens ? c->tokens[pos + 1] : -1;
    for (int a = 0; a < n; a++) {
        if (a != c->ref && stats_compare_rows(rows[a], rows[c->ref], V, next, &out[a])) {
            int bad = row_finite(rows[a], V) ? c->ref : a;
            return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s returned a non-finite logit at position %d "
                           "(depth %d); stopping, the rows measured so far are kept", arms[bad].name, pos,
                           depth_for_msg);
        }
        int t = st->twin[a];
        if (t >= 0 && !st->twin_warned[a] && memcmp(rows[a], rows[t], (size_t)V * sizeof(float))) {
            st->twin_warned[a] = 1;
            warn_loud(c, "arm %s is NOT bit-identical to arm %s (same K/V formats, device and engine) at "
                      "position %d: the engine is not deterministic and every number of this run is suspect",
                      arms[a].name, arms[t].name, pos);
        }
    }
    return 0;
}

/* Checks a prefill reply against its request. */
static int check_prefill(const arm *a, const proto_msg *rep, uint64_t n_past, uint32_t V, uint32_t rows,
                         char *err, size_t errlen) {
    const proto_prefill_rep *p = &rep->prefill_rep;
    if (p->n_past != n_past || p->n_rows != rows || (rows && p->n_vocab != V) || (rows && !p->logits))
        return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: prefill reply has n_past %llu, %u rows of %u, "
                       "expected n_past %llu, %u rows of %u", a->name, (unsigned long long)p->n_past,
                       p->n_rows, p->n_vocab, (unsigned long long)n_past, rows, V);
    return 0;
}

int sweep_run(const sweep_config *c, arm *arms, int n, int *depths_done, char *err, size_t errlen) {
    const int V = (int)arms[c->ref].hello.n_vocab;
    const int R = c->ref;
    sweep_state st;
    meta_state ms;
    progress pg;
    int ret = SWEEP_OK, done_k = 0;
    char e[1024] = "";
    const char *status = "running";
    memset(&st, 0, sizeof st);
    memset(&ms, 0, sizeof ms);
    if (depths_done) *depths_done = 0;

    ms.t0 = now_s();
    time_t wall = time(NULL);
    struct tm tmv;
    localtime_r(&wall, &tmv);
    strftime(ms.date, sizeof ms.date, "%Y-%m-%dT%H:%M:%S%z", &tmv);
    machine_string(ms.machine, sizeof ms.machine);

    memset(&pg, 0, sizeof pg);
    pg.quiet = c->quiet;
    pg.tty = isatty(2);
    pg.t0 = pg.last = now_s();
    pg.total = c->depths[c->n_depths - 1];
    pg.n_depths = c->n_depths;

    st.req = calloc((size_t)n, sizeof *st.req);
    st.rep = calloc((size_t)n, sizeof *st.rep);
    st.twin = calloc((size_t)n, sizeof *st.twin);
    st.twin_warned = calloc((size_t)n, sizeof *st.twin_warned);
    st.tf = calloc((size_t)n, sizeof *st.tf);
    st.fork = calloc((size_t)n, sizeof *st.fork);
    st.censored = calloc((size_t)n, sizeof *st.censored);
    ms.stats = calloc((size_t)n, sizeof *ms.stats);
    ms.have_stats = calloc((size_t)n, sizeof *ms.have_stats);
    const float **rows = calloc((size_t)n, sizeof *rows);   /* [n] pointers into the replies */
    stats_row *pr = calloc((size_t)n, sizeof *pr);          /* [n] per-position scratch */
    if (!st.req || !st.rep || !st.twin || !st.twin_warned || !st.tf || !st.fork || !st.censored ||
        !ms.stats || !ms.have_stats || !rows || !pr) {
        ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "out of memory");
        goto done;
    }
    find_twins(arms, n, st.twin);

    if (!(st.depths = report_tsv_open_depths(c->out_dir, e, sizeof e)) ||
        !(st.forks = report_tsv_open_forks(c->out_dir, e, sizeof e)) ||
        (c->per_position && !(st.positions = report_tsv_open_positions(c->out_dir, e, sizeof e)))) {
        ret = SWEEP_ERROR;
        goto done;
    }
    if ((ret = write_meta(c, arms, n, &ms, 0, status, 0, e, sizeof e))) goto done;

    /* start from an empty stream (a remote worker may hold an earlier run's tokens) */
    for (int a = 0; a < n; a++) {
        proto_init(&st.req[a], PROTO_TRUNCATE, 0, 0);
        st.req[a].truncate_req.depth = 0;
    }
    int rc0 = arm_call_all(arms, n, st.req, st.rep, c->recv_max, c->stop, e, sizeof e);
    free_reps(st.rep, n);
    if (rc0) {
        ret = rc0 == ARM_E_INTERRUPTED ? SWEEP_INTERRUPTED : SWEEP_ERROR;
        goto done;
    }

    int prev = 0;
    for (int k = 0; k < c->n_depths; k++) {
        const int d = c->depths[k];
        /* ---- prefill [prev, d) in chunks ---- */
        for (int pos = prev; pos < d;) {
            if (c->stop && *c->stop) { ret = SWEEP_INTERRUPTED; goto done; }
            int m = d - pos < c->chunk ? d - pos : c->chunk;
            int last = pos + m == d;
            uint32_t want = c->per_position ? PROTO_ROWS_ALL : last ? PROTO_ROWS_LAST : PROTO_ROWS_NONE;
            uint32_t n_rows = want == PROTO_ROWS_ALL ? (uint32_t)m : want == PROTO_ROWS_LAST ? 1 : 0;
            for (int a = 0; a < n; a++) {
                proto_init(&st.req[a], PROTO_PREFILL, 0, 0);
                st.req[a].prefill_req.tokens = (int32_t *)(c->tokens + pos);
                st.req[a].prefill_req.n_tokens = (size_t)m;
                st.req[a].prefill_req.rows = want;
            }
            int rc = arm_call_all(arms, n, st.req, st.rep, c->recv_max, c->stop, e, sizeof e);
            if (rc) {
                free_reps(st.rep, n);
                ret = rc == ARM_E_INTERRUPTED ? SWEEP_INTERRUPTED : SWEEP_ERROR;
                goto done;
            }
            for (int a = 0; a < n && !ret; a++)
                ret = check_prefill(&arms[a], &st.rep[a], (uint64_t)(pos + m), (uint32_t)V, n_rows, e, sizeof e);
            /* per-position rows: compare, write, drop */
            for (uint32_t i = 0; !ret && c->per_position && i < n_rows; i++) {
                for (int a = 0; a < n; a++) rows[a] = st.rep[a].prefill_rep.logits + (size_t)i * V;
                int p = pos + (int)i;
                ret = compare_position(c, arms, n, &st, rows, V, p, d, pr, e, sizeof e);
                for (int a = 0; a < n && !ret; a++)
                    if (a != R && report_tsv_position_row(st.positions, p, arms[a].name, &pr[a]))
                        ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "cannot write positions.tsv: %s", strerror(errno));
            }
            /* the teacher-forced row at d - 1 */
            if (!ret && last) {
                for (int a = 0; a < n; a++) rows[a] = st.rep[a].prefill_rep.logits + (size_t)(n_rows - 1) * V;
                ret = compare_position(c, arms, n, &st, rows, V, d - 1, d, st.tf, e, sizeof e);
                for (int a = 0; a < n && !ret && c->dump_rows_dir; a++)
                    ret = dump_row(c, &arms[a], d, rows[a], V, e, sizeof e);
            }
            free_reps(st.rep, n);
            if (ret) goto done;
            pos += m;
            progress_show(&pg, k + 1, pos, 0);
        }
        if (c->stop && *c->stop) { ret = SWEEP_INTERRUPTED; goto done; }

        /* ---- fork probe: fork_n greedy tokens on every arm ---- */
        for (int a = 0; a < n; a++) {
            proto_init(&st.req[a], PROTO_GENERATE, 0, 0);
            st.req[a].generate_req.n = (uint32_t)c->fork_n;
            st.req[a].generate_req.temperature = 0.0;
            st.req[a].generate_req.seed = 0;
        }
        int rc = arm_call_all(arms, n, st.req, st.rep, c->recv_max, c->stop, e, sizeof e);
        for (int a = 0; !rc && a < n; a++) {
            const proto_generate_rep *g = &st.rep[a].generate_rep;
            if (g->n != (size_t)c->fork_n || !g->tokens || !g->gaps ||
                g->n_past != (uint64_t)d + (uint64_t)c->fork_n - 1)
                rc = errmsg_set(e, sizeof e, SWEEP_ERROR, "arm %s: generate reply has %zu tokens and n_past "
                             "%llu, expected %d and %d", arms[a].name, g->n, (unsigned long long)g->n_past,
                             c->fork_n, d + c->fork_n - 1);
        }
        if (rc) {
            free_reps(st.rep, n);
            ret = rc == ARM_E_INTERRUPTED ? SWEEP_INTERRUPTED : SWEEP_ERROR;
            goto done;
        }
        const proto_generate_rep *gr = &st.rep[R].generate_rep;
        for (int a = 0; a < n && !ret; a++) {
            const proto_generate_rep *g = &st.rep[a].generate_rep;
            st.fork[a] = sweep_fork_index(g->tokens, gr->tokens, c->fork_n, &st.censored[a]);
            int t = st.twin[a];
            if (t >= 0 && !st.twin_warned[a] &&
                (memcmp(g->tokens, st.rep[t].generate_rep.tokens, sizeof(int32_t) * (size_t)c->fork_n) ||
                 memcmp(g->gaps, st.rep[t].generate_rep.gaps, sizeof(float) * (size_t)c->fork_n))) {
                st.twin_warned[a] = 1;
                warn_loud(c, "arm %s is NOT bit-identical to arm %s (same K/V formats, device and engine) in "
                          "the fork probe at depth %d: the engine is not deterministic and every number of "
                          "this run is suspect", arms[a].name, arms[t].name, d);
            }
            if (a == R) continue;
            double ga = st.censored[a] ? NAN : g->gaps[st.fork[a]];
            double gref = st.censored[a] ? NAN : gr->gaps[st.fork[a]];
            if (report_tsv_depth_row(st.depths, d, arms[a].name, &st.tf[a], st.fork[a], st.censored[a], ga, gref) ||
                report_tsv_fork_row(st.forks, d, arms[a].name, st.fork[a], st.censored[a], g->tokens, c->fork_n,
                                    gr->tokens, c->fork_n))
                ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "cannot write depths.tsv / forks.tsv in %s: %s",
                              c->out_dir, strerror(errno));
        }
        free_reps(st.rep, n);
        if (ret) goto done;

        /* ---- back to depth d ---- */
        for (int a = 0; a < n; a++) {
            proto_init(&st.req[a], PROTO_TRUNCATE, 0, 0);
            st.req[a].truncate_req.depth = (uint64_t)d;
        }
        rc = arm_call_all(arms, n, st.req, st.rep, c->recv_max, c->stop, e, sizeof e);
        for (int a = 0; !rc && a < n; a++)
            if (st.rep[a].truncate_rep.n_past != (uint64_t)d)
                rc = errmsg_set(e, sizeof e, SWEEP_ERROR, "arm %s: truncate to %d left %llu tokens", arms[a].name,
                             d, (unsigned long long)st.rep[a].truncate_rep.n_past);
        free_reps(st.rep, n);
        if (rc) {
            ret = rc == ARM_E_INTERRUPTED ? SWEEP_INTERRUPTED : SWEEP_ERROR;
            goto done;
        }

        /* ---- this depth is complete: flush it ---- */
        if (fflush(st.depths) || fflush(st.forks) || (st.positions && fflush(st.positions))) {
            ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "cannot write the TSV files in %s: %s", c->out_dir,
                          strerror(errno));
            goto done;
        }
        done_k = k + 1;
        if ((ret = write_meta(c, arms, n, &ms, done_k, status, 0, e, sizeof e))) goto done;
        progress_show(&pg, k + 1, d, k + 1 == c->n_depths);
        prev = d;
    }

done:
    progress_end(&pg);
    if (st.depths) fclose(st.depths);
    if (st.forks) fclose(st.forks);
    if (st.positions) fclose(st.positions);
    if (ms.stats && ms.have_stats) {
        /* the workers' own counters, from the arms still connected (short timeout) */
        for (int a = 0; a < n; a++) {
            if (!arms[a].connected || !arm_alive(&arms[a])) continue;
            proto_msg req, rep;
            char e2[256];
            nng_socket_set_ms(arms[a].sock, NNG_OPT_RECVTIMEO, 5000);
            nng_socket_set_ms(arms[a].sock, NNG_OPT_SENDTIMEO, 5000);
            proto_init(&req, PROTO_STATS, 0, 0);
            if (arm_call(&arms[a], &req, &rep, 4096, e2, sizeof e2) == 0) {
                ms.stats[a] = rep.stats_rep;
                ms.have_stats[a] = 1;
            }
            proto_msg_free(&rep);
        }
        if (ret == SWEEP_INTERRUPTED) snprintf(e, sizeof e, "interrupted after %d of %d depths", done_k, c->n_depths);
        status = ret == SWEEP_OK ? "complete" : e;
        if (ret != SWEEP_OK && c->warnings) {
            char w[1200];
            snprintf(w, sizeof w, "partial results: the sweep stopped after %d of %d depths (%s)", done_k,
                     c->n_depths, e);
            json_array_append_new(c->warnings, json_string(w));
        }
        char e3[512];
        int wr = write_meta(c, arms, n, &ms, done_k, status, ret == SWEEP_OK, e3, sizeof e3);
        if (wr && ret == SWEEP_OK) { ret = SWEEP_ERROR; snprintf(e, sizeof e, "%s", e3); }
    }
    if (ret != SWEEP_OK) errmsg_set(err, errlen, ret, "%s", e);
    if (depths_done) *depths_done = done_k;
    free(st.req);
    free(st.rep);
    free(st.twin);
    free(st.twin_warned);
    free(st.tf);
    free(st.fork);
    free(st.censored);
    free(ms.stats);
    free(ms.have_stats);
    free(rows);
    free(pr);
    return ret;
}
