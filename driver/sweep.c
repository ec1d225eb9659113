/* sweep.c — the one-pass sweep over nested prefixes, in lockstep on every arm, writing the raw
 * results (meta.json and the TSVs) as it goes. See sweep.h.
 *
 * Reading order: planning helpers; progress line; the sweep's state; meta.json; journal records
 * (writing, and replaying them for --resume); requests (timeouts, test hooks, worker faults and
 * restarts); bringing the arms to the journalled position; the measurements; sweep_run. */
#include "driver/sweep.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "driver/journal.h"
#include "driver/passages.h"
#include "driver/pinfile.h"
#include "driver/workers.h"
#include "driver/report.h"
#include "driver/stats.h"

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

/* splitmix64's output for state x */
static uint64_t mix64(uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t sweep_sample_seed(uint64_t base, int depth, int j) {
    return mix64(base ^ mix64((uint64_t)depth * 256u + (uint64_t)j));
}

int sweep_f32_arm(const arm *arms, int n, int ref) {
    for (int i = 0; i < n; i++) {
        const proto_hello_rep *h = &arms[i].hello;
        if (i == ref || strcmp(h->kv_k, "f32") || strcmp(h->kv_v, "f32")) continue;
        int repeat = 0;
        for (int j = 0; j < i && !repeat; j++)
            repeat = !strcmp(arms[j].hello.kv_k, h->kv_k) && !strcmp(arms[j].hello.kv_v, h->kv_v);
        if (!repeat) return i;
    }
    return -1;
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
    long base;         /* position this session started from (the rate counts from here) */
    int n_depths;
    int drawn;         /* a \r line is on screen */
} progress;

static void fmt_eta(double s, char *buf, size_t len) {
    if (!isfinite(s) || s < 0) { snprintf(buf, len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* 1 when a line is due (force, or 0.1 s on a terminal / 5 s otherwise since the last one). */
static int progress_due(const progress *p, int force) {
    if (p->quiet) return 0;
    return force || clock_s() - p->last >= (p->tty ? 0.1 : 5.0);
}

static void progress_print(progress *p, int depth_k, long done) {
    double t = clock_s();
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (done - p->base) / el : 0;
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

void sweep_machine_string(char *buf, size_t len) {
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

/* ============================================================================================
 * The sweep's state
 * ========================================================================================== */

enum { SWEEP_FAULT = 3 };   /* internal: a local worker died or hung; restart it and continue */

#define MAX_FAULTS 8
typedef struct {
    char action;      /* 'k' kill, 's' stop, 'd' the driver dies, 't' torn journal record */
    long at;          /* request batch number (k, s, d) or record sequence number (t) */
    int arm;
} test_fault;

typedef struct {
    const sweep_config *c;
    arm *arms;
    int n, V;
    FILE *depths, *positions, *forks;
    FILE *cross, *samples;    /* cross.tsv (cfg.cross_score), samples.tsv (cfg.n_sample_temps) */
    FILE *cross_samples;      /* cross_samples.tsv (both: the sampled continuations cross-scored) */
    int extra;                /* either of them: DEPTH records carry their lines */
    int xsamp;                /* both of them: DEPTH records also carry cross_samples.tsv's lines */
    int F;                    /* the f32 scorer (sweep_f32_arm), -1: none */
    FILE *passages;           /* passages.tsv (cfg.n_passages): DEPTH records carry its lines too */
    int pass_base;            /* the passages' baseline depth (passages_base_depth), -1: none */
    int pass_base_done;       /* the baseline is journalled (a PASSAGES record) */
    int32_t *greedy;          /* [n][fork_n] each arm's greedy fork tokens of the current depth */
    journal jn;
    int jn_open;
    int k_done;               /* depths journalled */
    int pos_done;             /* every journalled measurement ends here: where work continues */
    int meta_k;               /* depths the meta.json on disk counts (-1: none written yet) */
    int k_journal;            /* --resume: the DEPTH records its journal holds (-1: not read) */
    int io_failed;            /* a write or fsync of meta.json or a TSV failed (a resume can continue) */
    int gave_up;              /* a worker fault past --max-restarts, or its restart failed (likewise) */
    proto_msg *req, *rep;     /* [n] */
    int *codes;               /* [n] each arm's code from the last call */
    int *failed;              /* [n] arms whose worker died or hung in the last call */
    int *need_full;           /* [n] arms whose stream must be rebuilt from position 0 */
    int *twin, *twin_warned;  /* [n] */
    stats_row *tf;            /* [n] teacher-forced metrics of the current depth */
    int *fork, *censored;     /* [n] */
    const float **rows;       /* [n] pointers into the replies */
    stats_row *pr;            /* [chunk][n] per-position metrics of one prefill reply */
    int *bad;                 /* [chunk][n] pairs stats_compare_rows refused */
    int32_t *next;            /* [chunk] the true next token of each row */
    /* MoE routing (docs/DESIGN.md §2.6): moe = every arm reports experts of the reference's shape */
    int moe;
    size_t per_tok;           /* routing entries per token: n_layer * n_expert_used */
    uint64_t *route_n, *route_diff;   /* [n] (token, layer) decisions compared with the reference's,
                                         and those whose expert set differed: journalled */
    uint32_t *pend_n, *pend_diff;     /* [n] the same since the last journal record */
    int32_t *pin;             /* [chunk][per_tok] the reference's experts of one request (pinned mode) */
    pinfile *pf;              /* --pin-experts=FILE: replayed or being recorded; NULL: none */
    /* meta.json */
    char date[64], machine[512];
    double t0, wall_prev;     /* this session's start; seconds of earlier sessions */
    proto_stats_rep *stats;   /* [n] */
    int *have_stats;          /* [n] */
    json_t *resumes;          /* [{"date","depths_done","position"}] from the journal */
    /* requests */
    double spt_prefill, spt_decode;   /* slowest seconds per token measured so far (0: none) */
    long n_calls;
    int restarts;
    char fault[2048];         /* the last worker fault, for messages */
    test_fault faults[MAX_FAULTS];
    int n_faults;
    progress pg;
} sweep_state;

static void free_reps(proto_msg *rep, int n) {
    for (int i = 0; i < n; i++) proto_msg_free(&rep[i]);
}

/* ============================================================================================
 * meta.json
 * ========================================================================================== */


/* The sampled fork probes' options (when there are any) into o: meta.json and the journal header. */
static void put_sample_opts(json_t *o, const sweep_config *c) {
    if (!c->n_sample_temps) return;
    json_t *t = json_array();
    for (int j = 0; j < c->n_sample_temps; j++) json_array_append_new(t, json_real(c->sample_temps[j]));
    json_object_set_new(o, "sample_temps", t);
    json_object_set_new(o, "top_p", json_real(c->top_p));
    json_object_set_new(o, "sample_seed", json_integer((json_int_t)c->sample_seed));
}

/* Writes out_dir/meta.json durably (temp file, fsync, rename). Returns 0 or SWEEP_ERROR. */
static int write_meta(sweep_state *st, const char *status, int complete, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const arm *arms = st->arms;
    const int n = st->n;
    const proto_hello_rep *h = &arms[c->ref].hello;
    json_t *root = json_object(), *model = workers_model_json(c->model_path, h), *doc = json_object();
    json_t *jarms = json_array(), *jdep = json_array();
    char engine[2 * PROTO_STR_MAX + 16];
    snprintf(engine, sizeof engine, "%s (git %s)", h->engine, h->git);
    json_object_set_new(root, "tag", jstr_or(c->tag));
    json_object_set_new(root, "date", json_string(st->date));
    json_object_set_new(root, "command", jstr_or(c->command));
    if (c->invocation) json_object_set(root, "invocation", c->invocation);
    json_object_set_new(root, "git", jstr_or(c->git));
    json_object_set_new(root, "engine", json_string(engine));
    json_object_set_new(root, "machine", json_string(st->machine));
    json_object_set_new(root, "model", model);
    json_object_set_new(doc, "path", jstr_or(c->doc_path));
    json_object_set_new(doc, "n_tokens", json_integer((json_int_t)c->n_tokens));
    json_object_set_new(doc, "description", jstr_or(c->doc_description));
    json_object_set_new(root, "document", doc);
    json_object_set_new(root, "ref", json_string(arms[c->ref].name));
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        json_t *ja = workers_arm_json(a);
        /* device is BACKEND-ISA (docs/DESIGN.md §1.4): both parts on their own for readers */
        const char *isa = strchr(a->hello.device, '-');
        size_t blen = isa ? (size_t)(isa - a->hello.device) : strlen(a->hello.device);
        json_object_set_new(ja, "backend", json_stringn(a->hello.device, blen));
        json_object_set_new(ja, "isa", isa ? json_string(isa + 1) : json_null());
        json_object_set_new(ja, "threads", json_integer(a->hello.threads));
        if (st->have_stats[i]) {
            const proto_stats_rep *s = &st->stats[i];
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
        if (st->moe) {   /* the routing of the teacher-forced positions against the reference's */
            if (i == c->ref) json_object_set_new(ja, "routing", json_null());
            else
                json_object_set_new(ja, "routing", json_pack("{s:I,s:I,s:f}", "decisions", (json_int_t)st->route_n[i],
                                                              "differ", (json_int_t)st->route_diff[i], "fraction",
                                                              st->route_n[i] ? (double)st->route_diff[i] / st->route_n[i] : 0.0));
        }
        json_array_append_new(jarms, ja);
    }
    json_object_set_new(root, "arms", jarms);
    if (st->moe) {
        json_object_set_new(root, "n_expert", json_integer(h->n_expert));
        json_object_set_new(root, "n_expert_used", json_integer(h->n_expert_used));
        json_object_set_new(root, "pin_experts", json_boolean(c->pin_experts));
        if (st->pf)
            json_object_set_new(root, "pin_experts_file", json_pack("{s:s,s:s,s:I}", "path", c->pin_file, "mode",
                                pinfile_replaying(st->pf) ? "replayed" : "recorded", "positions",
                                (json_int_t)pinfile_positions(st->pf)));
    }
    for (int k = 0; k < c->n_depths; k++) json_array_append_new(jdep, json_integer(c->depths[k]));
    json_object_set_new(root, "depths", jdep);
    json_object_set_new(root, "depths_done", json_integer(st->k_done));
    json_object_set_new(root, "fork_n", json_integer(c->fork_n));
    json_object_set_new(root, "per_position", json_boolean(c->per_position));
    json_object_set_new(root, "chunk", json_integer(c->chunk));
    if (c->cross_score) {
        json_object_set_new(root, "cross_score", json_true());
        json_object_set_new(root, "cross_f32_arm", st->F >= 0 ? json_string(arms[st->F].name) : json_null());
    }
    put_sample_opts(root, c);
    if (c->n_passages)
        json_object_set_new(root, "passages", passages_json(c->n_passages, c->passage_len, st->pass_base,
                                                            c->passage_starts));
    json_object_set_new(root, "rope_angles", json_string(c->rope_angles ? c->rope_angles : "exact"));
    if (c->margin_ppl > 0 || c->margin_top1 > 0) {
        json_t *mg = json_object();
        if (c->margin_ppl > 0) json_object_set_new(mg, "ppl_pct", json_real(c->margin_ppl));
        if (c->margin_top1 > 0) json_object_set_new(mg, "top1_pp", json_real(c->margin_top1));
        json_object_set_new(root, "margins", mg);
    }
    json_object_set_new(root, "wall_seconds", json_real(st->wall_prev + clock_s() - st->t0));
    struct rusage ru;   /* the driver's own memory: O(chunk x vocab x arms) in per-position mode */
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        json_object_set_new(root, "driver_peak_rss", json_integer((json_int_t)ru.ru_maxrss * 1024));
    if (c->warnings) json_object_set(root, "warnings", c->warnings);   /* borrowed: adds a reference */
    else json_object_set_new(root, "warnings", json_array());
    json_object_set_new(root, "journal", json_string(JOURNAL_FILE));
    if (st->resumes && json_array_size(st->resumes)) json_object_set(root, "resumes", st->resumes);
    json_object_set_new(root, "status", json_string(status));
    json_object_set_new(root, "complete", json_boolean(complete));

    char path[4096], e[600];
    snprintf(path, sizeof path, "%s/meta.json", c->out_dir);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    int ret = 0;
    if (!text) ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory writing %s", path);
    else if (journal_write_file(path, text, strlen(text), e, sizeof e)) {
        st->io_failed = 1;
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "%s", e);
    } else st->meta_k = st->k_done;
    free(text);
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

/* ============================================================================================
 * Journal records (payloads; the framing is journal.h's). Integers u32 little-endian, f64 as
 * its IEEE bits, "str" = u32 length + bytes; the TSV texts are exactly the lines the sweep
 * appends to the files, so the files can be rebuilt from the journal byte for byte.
 *   HEADER   JSON: {"format":"strata-journal","version":1,"plan":{...},"date","command",
 *            "invocation"}; "plan" must equal the resuming run's own plan
 *   CHUNK    u32 from, u32 to, f64 wall, str positions   per-position rows [from, to) of a
 *            prefill request that does not end a depth
 *   DEPTH    u32 k, u32 depth, u32 from, f64 wall, str positions, str depths, str forks
 *            depth k (0-based) complete: its rows of positions [from, depth), depth and fork rows
 *   WARNING  u32 arm (0xFFFFFFFF: none), str text      a warning of the sweep (meta.json)
 *   RESUME   u32 depths_done, u32 position, str date     a --resume started here
 *   PASSAGES u32 depth, str passages                     --passages: the baseline's passages.tsv
 *            lines (the passages after the base prefix), before any CHUNK or DEPTH record; with
 *            --passages a DEPTH record also ends (before the routing) with str passages, the
 *            depth's passages.tsv lines
 * wall = seconds the sweep has run, over all sessions, when the record was written.
 * ========================================================================================== */

#define NO_ARM 0xFFFFFFFFu

/* Appends a record, or under the test hook "tear@SEQ" writes it torn and kills the driver. */
static int jn_append(sweep_state *st, uint32_t type, const journal_buf *b, char *err, size_t errlen) {
    char e[600];
    if (b->oom) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory building a journal record");
    for (int f = 0; f < st->n_faults; f++)
        if (st->faults[f].action == 't' && st->faults[f].at == (long)st->jn.next_seq) {
            journal_append_torn(&st->jn, type, b->p, b->n, (b->n + JOURNAL_REC_OVERHEAD) / 2, e, sizeof e);
            fprintf(stderr, "strata-driver: test hook: journal record %ld written torn; killing the driver\n",
                    st->faults[f].at);
            fflush(stderr);
            raise(SIGKILL);
        }
    if (journal_append(&st->jn, type, b->p, b->n, e, sizeof e))
        return errmsg_set(err, errlen, SWEEP_ERROR, "%s", e);
    return 0;
}

static int jn_sync(sweep_state *st, char *err, size_t errlen) {
    char e[600];
    if (journal_sync(&st->jn, e, sizeof e)) return errmsg_set(err, errlen, SWEEP_ERROR, "%s", e);
    return 0;
}

/* Appends a warning: printed loudly on stderr, journalled, and added to meta.json's list. arm
 * (or -1) is the arm a twin check fired for (a resumed run does not repeat that check). */
static int warn_loud(sweep_state *st, int arm_i, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int warn_loud(sweep_state *st, int arm_i, char *err, size_t errlen, const char *fmt, ...) {
    char msg[2048];
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
    if (st->c->warnings) json_array_append_new(st->c->warnings, json_string(msg));
    journal_buf b = { 0 };
    jbuf_u32(&b, arm_i < 0 ? NO_ARM : (uint32_t)arm_i);
    jbuf_str(&b, msg, strlen(msg));
    int rc = jn_append(st, JOURNAL_WARNING, &b, err, errlen);
    free(b.p);
    return rc;
}

/* The plan a journal belongs to: what must not change between a run and its resumption. */
static json_t *plan_json(const sweep_config *c, const arm *arms, int n) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    char sha[65];
    EVP_Digest(c->tokens, c->n_tokens * sizeof *c->tokens, md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(sha + 2 * i, 3, "%02x", md[i]);
    json_t *p = json_object(), *dep = json_array(), *ja = json_array();
    json_object_set_new(p, "n_tokens", json_integer((json_int_t)c->n_tokens));
    json_object_set_new(p, "tokens_sha256", json_string(sha));
    for (int k = 0; k < c->n_depths; k++) json_array_append_new(dep, json_integer(c->depths[k]));
    json_object_set_new(p, "depths", dep);
    json_object_set_new(p, "fork_n", json_integer(c->fork_n));
    json_object_set_new(p, "per_position", json_boolean(c->per_position));
    json_object_set_new(p, "chunk", json_integer(c->chunk));
    json_object_set_new(p, "ref", json_string(arms[c->ref].name));
    if (c->cross_score) json_object_set_new(p, "cross_score", json_true());
    if (c->cross_score && c->n_sample_temps) json_object_set_new(p, "cross_samples", json_true());
    if (c->pin_experts) json_object_set_new(p, "pin_experts", json_true());
    if (c->pin_file) json_object_set_new(p, "pin_experts_file", json_string(c->pin_file));
    put_sample_opts(p, c);
    if (c->n_passages) json_object_set_new(p, "passages", passages_json(c->n_passages, c->passage_len, 0, NULL));
    for (int i = 0; i < n; i++) {
        const proto_hello_rep *h = &arms[i].hello;
        json_array_append_new(ja, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "name", arms[i].name,
                                            "kv_k", h->kv_k, "kv_v", h->kv_v, "model_sha256",
                                            h->model_sha256, "tokenizer_hash", h->tokenizer_hash,
                                            "engine", h->engine, "git", h->git));
    }
    json_object_set_new(p, "arms", ja);
    return p;
}

/* Writes text [len] to a TSV file. Returns 0 or SWEEP_ERROR naming the file. */
static int tsv_put(FILE *f, const char *name, const sweep_config *c, const void *text, size_t len,
                   char *err, size_t errlen) {
    if (len && (!f || fwrite(text, 1, len, f) != len))
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s/%s: %s", c->out_dir, name, strerror(errno));
    return 0;
}

/* fflush + fsync of the TSV files: a completed depth is on disk before meta.json counts it. */
static int tsv_sync(sweep_state *st, char *err, size_t errlen) {
    FILE *f[6] = { st->depths, st->forks, st->positions, st->cross, st->samples, st->cross_samples };
    static const char *const names[6] = { "depths.tsv", "forks.tsv", "positions.tsv", "cross.tsv", "samples.tsv",
                                          "cross_samples.tsv" };
    for (int i = 0; i < 6; i++)
        if (f[i] && journal_fsync_stream(f[i])) {
            st->io_failed = 1;
            return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s/%s: %s", st->c->out_dir, names[i],
                              strerror(errno));
        }
    if (st->passages && journal_fsync_stream(st->passages)) {
        st->io_failed = 1;
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s/%s: %s", st->c->out_dir, PASSAGES_FILE,
                          strerror(errno));
    }
    return 0;
}

/* Creates the TSV files, truncated to their header lines. */
static int open_tsvs(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    if (!(st->depths = report_tsv_open_depths(c->out_dir, err, errlen)) ||
        !(st->forks = report_tsv_open_forks(c->out_dir, err, errlen)) ||
        (c->per_position && !(st->positions = report_tsv_open_positions(c->out_dir, err, errlen))) ||
        (c->cross_score && !(st->cross = report_tsv_open_cross(c->out_dir, err, errlen))) ||
        (c->n_sample_temps && !(st->samples = report_tsv_open_samples(c->out_dir, err, errlen))) ||
        (st->xsamp && !(st->cross_samples = report_tsv_open_cross_samples(c->out_dir, err, errlen))) ||
        (c->n_passages && !(st->passages = passages_tsv_open(c->out_dir, err, errlen))))
        return SWEEP_ERROR;
    return 0;
}

/* A new run: creates the journal with its header, then the TSVs. */
static int journal_start_new(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    json_t *h = json_object();
    json_object_set_new(h, "format", json_string("strata-journal"));
    json_object_set_new(h, "version", json_integer(1));
    json_object_set_new(h, "plan", plan_json(c, st->arms, st->n));
    json_object_set_new(h, "date", json_string(st->date));
    json_object_set_new(h, "command", jstr_or(c->command));
    if (c->invocation) json_object_set(h, "invocation", c->invocation);
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    char e[600];
    int rc = 0;
    if (!text) rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    else if (journal_create(&st->jn, c->out_dir, text, strlen(text), e, sizeof e))
        rc = errmsg_set(err, errlen, SWEEP_ERROR, "%s", e);
    else st->jn_open = 1;
    free(text);
    return rc ? rc : open_tsvs(st, err, errlen);
}

/* The first key whose value differs between two plan objects (for the message). */
static const char *plan_diff(json_t *a, json_t *b) {
    const char *key;
    json_t *v;
    json_object_foreach(a, key, v)
        if (!json_equal(v, json_object_get(b, key))) return key;
    json_object_foreach(b, key, v)
        if (!json_object_get(a, key)) return key;
    return "?";
}

/* MoE: a CHUNK or DEPTH record ends with each arm's routing counts of its positions (u32
 * decisions, u32 differing); the replay adds them up. */
static void replay_routing(sweep_state *st, journal_rd *rd) {
    for (int a = 0; st->moe && a < st->n; a++) {
        uint32_t dn = jrd_u32(rd), dd = jrd_u32(rd);
        st->route_n[a] += dn;
        st->route_diff[a] += dd;
    }
}

/* The routing counts since the last record, appended to the record b (MoE only); jn_committed
 * moves them into the totals once the record is written. */
static void jbuf_routing(const sweep_state *st, journal_buf *b) {
    for (int a = 0; st->moe && a < st->n; a++) {
        jbuf_u32(b, st->pend_n[a]);
        jbuf_u32(b, st->pend_diff[a]);
    }
}

static void routing_committed(sweep_state *st) {
    for (int a = 0; st->moe && a < st->n; a++) {
        st->route_n[a] += st->pend_n[a];
        st->route_diff[a] += st->pend_diff[a];
        st->pend_n[a] = st->pend_diff[a] = 0;
    }
}

/* Replays journal records 1.. (recs [n_rec]) from an empty state: checks that each continues the
 * ones before it and sets k_done, pos_done and wall_prev; with apply, also appends their lines to
 * the (rebuilt) TSVs and restores the warnings, twin checks and resumptions. Returns 0 or
 * SWEEP_ERROR naming the record. */
static int replay_records(sweep_state *st, const journal_rec *recs, size_t n_rec, int apply, char *err,
                          size_t errlen) {
    const sweep_config *c = st->c;
    int ret = 0;
    st->k_done = st->pos_done = 0;
    st->pass_base_done = 0;
    st->wall_prev = 0;
    for (int a = 0; st->moe && a < st->n; a++) st->route_n[a] = st->route_diff[a] = 0;
    for (size_t r = 1; r < n_rec && !ret; r++) {
        journal_rd rd = { recs[r].data, recs[r].len, 0, 0 };
        uint32_t lp = 0, ld = 0, lf = 0;
        const unsigned char *tp, *td, *tf;
        switch (recs[r].type) {
        case JOURNAL_CHUNK: {
            uint32_t from = jrd_u32(&rd), to = jrd_u32(&rd);
            double wall = jrd_f64(&rd);
            tp = jrd_str(&rd, &lp);
            replay_routing(st, &rd);
            if (rd.bad || !c->per_position || st->k_done >= c->n_depths || (int)from != st->pos_done ||
                to <= from || (int)to >= c->depths[st->k_done]) {
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (chunk %u..%u) does "
                                 "not continue the records before it", r, from, to);
                break;
            }
            if (apply) ret = tsv_put(st->positions, "positions.tsv", c, tp, lp, err, errlen);
            st->pos_done = (int)to;
            st->wall_prev = wall;
            break;
        }
        case JOURNAL_DEPTH: {
            uint32_t k = jrd_u32(&rd), depth = jrd_u32(&rd), from = jrd_u32(&rd);
            double wall = jrd_f64(&rd);
            tp = jrd_str(&rd, &lp);
            td = jrd_str(&rd, &ld);
            tf = jrd_str(&rd, &lf);
            uint32_t lx = 0, ls = 0, lxs = 0;
            const unsigned char *tx = NULL, *ts = NULL, *txs = NULL;
            if (st->extra) {
                tx = jrd_str(&rd, &lx);
                ts = jrd_str(&rd, &ls);
            }
            if (st->xsamp) txs = jrd_str(&rd, &lxs);
            uint32_t lq = 0;
            const unsigned char *tq = c->n_passages ? jrd_str(&rd, &lq) : NULL;
            replay_routing(st, &rd);
            if (rd.bad || (int)k != st->k_done || k >= (uint32_t)c->n_depths || (int)depth != c->depths[k] ||
                (int)from != st->pos_done || (lp && !c->per_position)) {
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (depth %u) does not "
                                 "continue the records before it", r, depth);
                break;
            }
            if (apply && !(ret = tsv_put(st->positions, "positions.tsv", c, tp, lp, err, errlen)) &&
                !(ret = tsv_put(st->depths, "depths.tsv", c, td, ld, err, errlen)))
                ret = tsv_put(st->forks, "forks.tsv", c, tf, lf, err, errlen);
            if (apply && !ret && st->extra && !(ret = tsv_put(st->cross, "cross.tsv", c, tx, lx, err, errlen)))
                ret = tsv_put(st->samples, "samples.tsv", c, ts, ls, err, errlen);
            if (apply && !ret && st->xsamp)
                ret = tsv_put(st->cross_samples, "cross_samples.tsv", c, txs, lxs, err, errlen);
            if (apply && !ret && c->n_passages) ret = tsv_put(st->passages, PASSAGES_FILE, c, tq, lq, err, errlen);
            st->k_done++;
            st->pos_done = (int)depth;
            st->wall_prev = wall;
            break;
        }
        case JOURNAL_PASSAGES: {   /* the passages' baseline: before anything else is measured */
            uint32_t depth = jrd_u32(&rd);
            tp = jrd_str(&rd, &lp);
            if (rd.bad || !c->n_passages || st->pass_base_done || st->k_done || st->pos_done ||
                (int)depth != st->pass_base) {
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (the passages' "
                                 "baseline) does not belong where it is", r);
                break;
            }
            if (apply) ret = tsv_put(st->passages, PASSAGES_FILE, c, tp, lp, err, errlen);
            st->pass_base_done = 1;
            break;
        }
        case JOURNAL_WARNING: {
            uint32_t a = jrd_u32(&rd);
            tp = jrd_str(&rd, &lp);
            if (rd.bad || (a != NO_ARM && a >= (uint32_t)st->n)) {
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu is a bad warning", r);
                break;
            }
            if (apply && a != NO_ARM) st->twin_warned[a] = 1;
            if (apply && c->warnings) json_array_append_new(c->warnings, json_stringn((const char *)tp, lp));
            break;
        }
        case JOURNAL_RESUME: {
            uint32_t k = jrd_u32(&rd), pos = jrd_u32(&rd);
            tp = jrd_str(&rd, &lp);
            if (apply && !rd.bad)
                json_array_append_new(st->resumes, json_pack("{s:s%,s:i,s:i}", "date", (const char *)tp,
                                                             (size_t)lp, "depths_done", (int)k, "position", (int)pos));
            break;
        }
        default:
            ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu has type %u, which this "
                             "strata-driver does not know", r, recs[r].type);
        }
    }
    return ret;
}

/* --resume of a journal damaged in the middle (journal_open kept the records before the damage):
 * says where, how many depths were kept and how many journalled after it are dropped (measured
 * again), from the later records found after it (later [d->n_later]; their payloads are not trusted
 * beyond the depth index). */
static void report_damage(const sweep_state *st, const journal_damage *d, const journal_rec *later) {
    const int n_depths = st->c->n_depths;
    long last_k = -1;   /* the highest depth index the later records name */
    for (size_t i = 0; i < d->n_later; i++)
        if (later[i].type == JOURNAL_DEPTH && later[i].len >= 4) {
            journal_rd rd = { later[i].data, later[i].len, 0, 0 };
            long k = (long)jrd_u32(&rd);
            if (k < n_depths && k > last_k) last_k = k;
        }
    long dropped = last_k >= st->k_done ? last_k + 1 - st->k_done : d->type_read == JOURNAL_DEPTH ? 1 : 0;
    char how[128];
    if (d->later_complete)
        snprintf(how, sizeof how, "dropped %ld", dropped);
    else if (d->type_read == JOURNAL_DEPTH || last_k >= 0)
        snprintf(how, sizeof how, "dropped %ld or more", dropped);
    else
        snprintf(how, sizeof how, "dropped the records after it (how many depths they held is unknown)");
    fprintf(stderr, "strata-driver: journal damaged at record %u (byte %llu: it %s): kept %d of %d depths, %s; the "
            "%llu bytes from there on are saved in %s and the dropped depths are measured again\n", d->at_record,
            (unsigned long long)d->at_byte, d->why ? d->why : "is damaged", st->k_done, n_depths, how,
            (unsigned long long)d->bytes, d->saved);
}

/* --resume: opens (locks) the journal, checks that it belongs to this plan, rebuilds the TSVs
 * from its records (byte for byte what the sweep appended), restores the warnings, the depths and the
 * position reached, and records the resumption. */
static int journal_start_resume(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    unsigned char *data = NULL;
    size_t dlen = 0, n_rec = 0;
    journal_rec *recs = NULL;
    journal_damage dmg;
    int ret = 0;
    json_t *hdr = NULL, *plan = NULL;
    char e[700];
    if (journal_open(&st->jn, c->out_dir, &data, &dlen, &recs, &n_rec, &dmg, e, sizeof e))
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: %s", e);
    st->jn_open = 1;
    st->k_journal = 0;   /* what the journal holds, for the message when the resume is refused */
    for (size_t r = 1; r < n_rec; r++) st->k_journal += recs[r].type == JOURNAL_DEPTH;
    json_error_t je;
    if (n_rec == 0 || recs[0].type != JOURNAL_HEADER ||
        !(hdr = json_loadb((const char *)recs[0].data, recs[0].len, 0, &je)) ||
        !json_is_object(json_object_get(hdr, "plan"))) {
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: %s has no valid header record", st->jn.path);
        goto done;
    }
    plan = plan_json(c, st->arms, st->n);
    if (!json_equal(plan, json_object_get(hdr, "plan"))) {
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume %s: its \"%s\" differs from this run's (the "
                         "document, the model, the workers' build or the options changed since it started)",
                         c->out_dir, plan_diff(plan, json_object_get(hdr, "plan")));
        goto done;
    }
    const char *date = json_string_value(json_object_get(hdr, "date"));
    if (date) snprintf(st->date, sizeof st->date, "%s", date);
    /* every record is checked first; only then are the TSVs rebuilt (the folder is ours: the
     * journal is locked), so a journal that cannot be resumed destroys nothing */
    if ((ret = replay_records(st, recs, n_rec, 0, err, errlen))) goto done;
    st->k_journal = st->k_done;
    /* the journal is this run's: a torn or damaged tail is cut off now (a damaged one kept aside) */
    if (journal_cut(&st->jn, &dmg, data, e, sizeof e)) {
        st->io_failed = 1;
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: %s", e);
        goto done;
    }
    if (dmg.torn)
        fprintf(stderr, "strata-driver: the journal's last record was incomplete (the run stopped while "
                "writing it); it was dropped\n");
    if (dmg.damaged) report_damage(st, &dmg, recs + n_rec);
    if ((ret = open_tsvs(st, err, errlen)) || (ret = replay_records(st, recs, n_rec, 1, err, errlen))) {
        st->io_failed = 1;   /* the TSVs could not be rebuilt (the journal is intact) */
        goto done;
    }
    if ((ret = tsv_sync(st, err, errlen))) goto done;
    /* the resumption itself */
    char now[64];
    time_t wall = time(NULL);
    struct tm tmv;
    localtime_r(&wall, &tmv);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%S%z", &tmv);
    json_array_append_new(st->resumes, json_pack("{s:s,s:i,s:i}", "date", now, "depths_done", st->k_done,
                                                 "position", st->pos_done));
    journal_buf b = { 0 };
    jbuf_u32(&b, (uint32_t)st->k_done);
    jbuf_u32(&b, (uint32_t)st->pos_done);
    jbuf_str(&b, now, strlen(now));
    ret = jn_append(st, JOURNAL_RESUME, &b, err, errlen);
    free(b.p);
    if (!ret) ret = jn_sync(st, err, errlen);
    if (!ret && !c->quiet)
        fprintf(stderr, "strata-driver: resuming %s: %d of %d depths journalled, continuing at position %d\n",
                c->out_dir, st->k_done, c->n_depths, st->pos_done);
done:
    json_decref(plan);
    json_decref(hdr);
    free(recs);
    free(data);
    return ret;
}

/* ============================================================================================
 * Requests: timeouts, test hooks, worker faults
 * ========================================================================================== */

int sweep_request_timeout_ms(double spt, double tokens, int override_ms) {
    if (override_ms > 0) return override_ms;
    if (!(spt > 0)) return SWEEP_TIMEOUT_FIRST_MS;
    double ms = SWEEP_TIMEOUT_FACTOR * spt * (tokens > 1 ? tokens : 1) * 1000.0;
    if (!(ms >= SWEEP_TIMEOUT_MIN_MS)) return SWEEP_TIMEOUT_MIN_MS;
    if (ms > SWEEP_TIMEOUT_MAX_MS) return SWEEP_TIMEOUT_MAX_MS;
    return (int)ms;
}

/* Parses STRATA_TEST_FAULT into st->faults. Returns 0 or SWEEP_ERROR. */
static int parse_faults(sweep_state *st, const char *spec, char *err, size_t errlen) {
    const char *p = spec;
    while (p && *p) {
        char act[8] = "";
        long at = 0;
        int a = -1, used = 0;
        int got = sscanf(p, "%7[a-z]@%ld%n:%d%n", act, &at, &used, &a, &used);
        char c = !strcmp(act, "kill") ? 'k' : !strcmp(act, "stop") ? 's' : !strcmp(act, "die") ? 'd'
                 : !strcmp(act, "tear") ? 't' : 0;
        int needs_arm = c == 'k' || c == 's';
        if (got < 2 || !c || at < 0 || needs_arm != (got == 3) || (needs_arm && (a < 0 || a >= st->n)) ||
            (p[used] != ',' && p[used] != 0) || st->n_faults == MAX_FAULTS)
            return errmsg_set(err, errlen, SWEEP_ERROR, "bad STRATA_TEST_FAULT item at \"%s\" (kill@N:ARM, "
                              "stop@N:ARM, die@N, tear@SEQ; comma separated, at most %d)", p, MAX_FAULTS);
        st->faults[st->n_faults++] = (test_fault){ c, at, a };
        p += used;
        if (*p == ',') p++;
    }
    return 0;
}

/* The test hooks due before request batch st->n_calls. */
static void apply_faults(sweep_state *st) {
    for (int f = 0; f < st->n_faults; f++) {
        const test_fault *t = &st->faults[f];
        if (t->action == 't' || t->at != st->n_calls) continue;
        if (t->action == 'd') {
            fprintf(stderr, "strata-driver: test hook: killing the driver before request %ld\n", t->at);
            fflush(stderr);
            raise(SIGKILL);
        }
        if (t->arm >= st->n || st->arms[t->arm].remote || st->arms[t->arm].pid <= 0) continue;
        fprintf(stderr, "strata-driver: test hook: %s the worker of arm %s before request %ld\n",
                t->action == 'k' ? "killing" : "stopping", st->arms[t->arm].name, t->at);
        arm_signal(&st->arms[t->arm], t->action == 'k' ? SIGKILL : SIGSTOP);
        /* a killed worker is gone before the request (a death between two requests) */
        for (int w = 0; t->action == 'k' && w < 200 && arm_alive(&st->arms[t->arm]); w++) {
            struct timespec ts = { 0, 10 * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
}

enum { KIND_PREFILL, KIND_DECODE, KIND_OTHER };

/* Sends st->req to every arm (arm_call_all) with a timeout scaled from the measured rate.
 * what describes the request for messages ("a prefill request (positions 0..99)"); tokens is its
 * size for the timeout and the rate. Returns 0; SWEEP_INTERRUPTED; SWEEP_FAULT when every failing
 * arm is a local worker that died, hung or dropped its connection (st->failed marks them,
 * st->fault describes it); else SWEEP_ERROR. On failure the replies are freed. */
static int call(sweep_state *st, int kind, double tokens, const char *what, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    char e[1024];
    st->n_calls++;
    apply_faults(st);
    double spt = kind == KIND_PREFILL ? st->spt_prefill : kind == KIND_DECODE ? st->spt_decode
               : st->spt_prefill > 0 ? st->spt_prefill : st->spt_decode;
    int timeout = sweep_request_timeout_ms(spt, kind == KIND_OTHER ? 1 : tokens, c->request_timeout_ms);
    double t = clock_s();
    int rc = arm_call_all(st->arms, st->n, st->req, st->rep, c->recv_max, timeout, c->stop, st->codes, e, sizeof e);
    if (!rc) {
        double per = (clock_s() - t) / (tokens > 1 ? tokens : 1);
        if (kind == KIND_PREFILL && per > st->spt_prefill) st->spt_prefill = per;
        if (kind == KIND_DECODE && per > st->spt_decode) st->spt_decode = per;
        return 0;
    }
    free_reps(st->rep, st->n);
    if (rc == ARM_E_INTERRUPTED) return SWEEP_INTERRUPTED;
    int n_fault = 0, other = 0;
    for (int a = 0; a < st->n; a++) {
        int code = st->codes[a];
        st->failed[a] = 0;
        if (!code) continue;
        if (!st->arms[a].remote && (code == ARM_E_DIED || code == PROTO_E_TIMEOUT || code == PROTO_E_TRANSPORT)) {
            st->failed[a] = 1;
            n_fault++;
        } else {
            other++;
        }
    }
    if (!n_fault || other) return errmsg_set(err, errlen, SWEEP_ERROR, "%s (%s)", e, what);
    /* describe each failed worker: what happened, during which request, its last stderr lines */
    size_t off = 0;
    st->fault[0] = 0;
    for (int a = 0; a < st->n; a++) {
        if (!st->failed[a]) continue;
        arm *A = &st->arms[a];
        char how[300], tail[700];
        if (st->codes[a] == ARM_E_DIED) {
            char s[96];
            arm_describe_status(A->status, s, sizeof s);
            snprintf(how, sizeof how, "the worker (pid %d) exited (%s), noticed at", (int)A->pid, s);
        } else if (st->codes[a] == PROTO_E_TIMEOUT) {
            char state = arm_proc_state(A);
            snprintf(how, sizeof how, "the worker (pid %d, state %c%s) sent no reply within %.3g s to", (int)A->pid,
                     state, state == 'T' ? ": stopped" : "", timeout / 1000.0);
        } else {
            snprintf(how, sizeof how, "the connection to the worker (pid %d) failed during", (int)A->pid);
        }
        arm_log_tail_lines(A, 3, tail, sizeof tail);
        int w = snprintf(st->fault + off, sizeof st->fault - off, "%sarm %s: %s %s; its last stderr lines: %s",
                         off ? "; " : "", A->name, how, what, tail[0] ? tail : "(none)");
        if (w > 0) off += (size_t)w;
        if (off >= sizeof st->fault) break;
    }
    errmsg_set(err, errlen, SWEEP_ERROR, "%s", st->fault);
    return SWEEP_FAULT;
}

/* After SWEEP_FAULT: restarts the failed workers (within c->max_restarts), marks them for a
 * rebuild from position 0 and journals a warning. Returns SWEEP_FAULT (continue) or SWEEP_ERROR. */
static int handle_fault(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    fprintf(stderr, "strata-driver: worker fault: %s\n", st->fault);
    if (!c->launch || st->restarts >= c->max_restarts)
        return errmsg_set(err, errlen, SWEEP_ERROR, "%s; giving up after %d worker restart%s (--max-restarts %d)",
                          st->fault, st->restarts, st->restarts == 1 ? "" : "s", c->max_restarts);
    st->restarts++;
    char e[1024];
    for (int a = 0; a < st->n; a++) {
        if (!st->failed[a]) continue;
        int rc = arm_restart(&st->arms[a], a, c->launch, c->dial_ms, SWEEP_TIMEOUT_FIRST_MS, c->recv_max, c->stop,
                             e, sizeof e);
        if (rc == ARM_E_INTERRUPTED) return SWEEP_INTERRUPTED;
        if (rc) return errmsg_set(err, errlen, SWEEP_ERROR, "restarting after a worker fault: %s", e);
        st->need_full[a] = 1;
        if (!c->quiet)
            fprintf(stderr, "strata-driver: restarted the worker of arm %s (pid %d; restart %d of at most %d); "
                    "continuing from position %d\n", st->arms[a].name, (int)st->arms[a].pid, st->restarts,
                    c->max_restarts, st->pos_done);
    }
    int rc = warn_loud(st, -1, err, errlen, "worker restarted (%d of at most %d), the sweep continued from position "
                       "%d: %s", st->restarts, c->max_restarts, st->pos_done, st->fault);
    return rc ? rc : SWEEP_FAULT;
}

/* ============================================================================================
 * Bringing every arm to the journalled position
 * ========================================================================================== */

#define CATCHUP_CHUNK 2048   /* tokens per re-prefill request (no rows come back) */

/* One prefill of positions pos..pos+m-1 on the arms with who[a] (NULL: every arm), rows as asked.
 * MoE: count = 1 asks every arm for its routing (the caller counts it, count_routing); in pinned
 * mode the reference arm runs first, alone, and the other arms then get its experts as their pin
 * (the reference must be among who). The replies are in st->rep as after one call. */
static int prefill_step(sweep_state *st, const int *who, int pos, int m, uint32_t rows, int count, const char *what,
                        char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref;
    int replay = st->pf && pinfile_replaying(st->pf);   /* every arm gets the file's experts */
    int pinned = st->moe && c->pin_experts && !replay;   /* the reference first, then the others */
    if (replay && pinfile_read(st->pf, pos, m, c->tokens + pos, st->pin, err, errlen)) return SWEEP_ERROR;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_NONE, 0, 0);
        if (who && !who[a]) continue;
        if (pinned && a != R) continue;   /* second round */
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + pos);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = rows;
        st->req[a].prefill_req.experts = st->moe && (count || (pinned && a == R));
        if (replay) {
            st->req[a].prefill_req.pin = st->pin;
            st->req[a].prefill_req.n_pin = (size_t)m * st->per_tok;
        }
    }
    int rc = call(st, KIND_PREFILL, m, what, err, errlen);
    if (rc || !pinned) return rc;
    /* pinned: the reference's experts become the others' pin */
    proto_msg ref = st->rep[R];
    if (ref.prefill_rep.n_experts != (size_t)m * st->per_tok) {
        rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: the routing of %d tokens has %zu expert ids, not %zu",
                        st->arms[R].name, m, ref.prefill_rep.n_experts, (size_t)m * st->per_tok);
        free_reps(st->rep, n);
        return rc;
    }
    memcpy(st->pin, ref.prefill_rep.experts, sizeof(int32_t) * (size_t)m * st->per_tok);
    /* --pin-experts=FILE being recorded: these positions reach the file (fsync'd) before the
     * journal can claim them */
    if (st->pf && pinfile_record(st->pf, pos, m, c->tokens + pos, st->pin, err, errlen)) {
        free_reps(st->rep, n);
        return SWEEP_ERROR;
    }
    memset(&st->rep[R], 0, sizeof st->rep[R]);   /* kept in ref while the others run */
    int others = 0;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_NONE, 0, 0);
        if ((who && !who[a]) || a == R) continue;
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + pos);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = rows;
        st->req[a].prefill_req.experts = count;
        st->req[a].prefill_req.pin = st->pin;
        st->req[a].prefill_req.n_pin = (size_t)m * st->per_tok;
        others++;
    }
    if (others) rc = call(st, KIND_PREFILL, m, what, err, errlen);
    st->rep[R] = ref;   /* call() zeroed the reference's slot; its reply comes back */
    if (rc) free_reps(st->rep, n);
    return rc;
}

/* MoE: adds the routing of m tokens in st->rep to the pending counts: for every arm but the
 * reference, the (token, layer) decisions and those whose set of experts (order aside) differs
 * from the reference's. */
static int count_routing(sweep_state *st, int m, char *err, size_t errlen) {
    const int R = st->c->ref;
    size_t k = st->arms[R].hello.n_expert_used, want = (size_t)m * st->per_tok;
    for (int a = 0; a < st->n; a++)
        if (st->rep[a].prefill_rep.n_experts != want)
            return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: the routing of %d tokens has %zu expert ids, not %zu",
                              st->arms[a].name, m, st->rep[a].prefill_rep.n_experts, want);
    const int32_t *r = st->rep[R].prefill_rep.experts;   /* [m][n_layer][k] */
    for (int a = 0; a < st->n; a++) {
        if (a == R) continue;
        const int32_t *x = st->rep[a].prefill_rep.experts;
        for (size_t d = 0; d < want; d += k) {   /* one (token, layer) decision */
            size_t same = 0;
            for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < k; j++) same += x[d + i] == r[d + j];
            st->pend_n[a]++;
            st->pend_diff[a] += same != k;
        }
    }
    return 0;
}

/* --pin-experts=FILE: opens it (a resumed recording, after the journal: it keeps what the journal
 * claims); a replayed file must hold every teacher-forced position of the plan, of this document. */
static int open_pin_file(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const proto_hello_rep *h = &st->arms[c->ref].hello;
    if (pinfile_open(c->pin_file, h->n_layer, h->n_expert, h->n_expert_used, h->model_sha256,
                     c->resume ? st->pos_done : 0, &st->pf, err, errlen))
        return SWEEP_ERROR;
    int need = c->depths[c->n_depths - 1];
    if (pinfile_replaying(st->pf) && pinfile_positions(st->pf) < need)
        return errmsg_set(err, errlen, SWEEP_ERROR, "--pin-experts: %s holds the routing of %lld positions; this "
                          "sweep reaches depth %d (record a longer one: a FILE that does not exist is recorded)",
                          c->pin_file, (long long)pinfile_positions(st->pf), need);
    if (pinfile_replaying(st->pf) && pinfile_check_tokens(st->pf, c->tokens, need, err, errlen)) return SWEEP_ERROR;
    if (!c->quiet)
        fprintf(stderr, "strata-driver: %s the experts of %s (%lld positions)\n",
                pinfile_replaying(st->pf) ? "every arm replays" : "recording the reference's experts into",
                c->pin_file, (long long)pinfile_positions(st->pf));
    return 0;
}

/* Arms marked need_full are truncated to 0 and prefilled (no rows) to st->pos_done; the others
 * are truncated back to st->pos_done (they may be ahead after a failed request). */
static int sync_arms(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, p = st->pos_done;
    char what[160];
    int any = 0;
    for (int a = 0; st->moe && a < n; a++) st->pend_n[a] = st->pend_diff[a] = 0;   /* not journalled: redone */
    /* pinned experts: the reference's routing is what the others replay, so a rebuild rebuilds every arm
     * (a replayed file gives every arm its experts: only the arms that need it are rebuilt) */
    int from_ref = c->pin_experts && !(st->pf && pinfile_replaying(st->pf));
    for (int a = 0; st->moe && from_ref && a < n; a++) any |= st->need_full[a];
    for (int a = 0; any && a < n; a++) st->need_full[a] = 1;
    any = 0;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_TRUNCATE, 0, 0);
        st->req[a].truncate_req.depth = st->need_full[a] ? 0 : (uint64_t)p;
        any |= st->need_full[a];
    }
    snprintf(what, sizeof what, "a truncate request (to position %d)", p);
    int rc = call(st, KIND_OTHER, 1, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < n && !rc; a++)
        if (st->rep[a].truncate_rep.n_past != (st->need_full[a] ? 0 : (uint64_t)p))
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: truncate to %d left %llu tokens", st->arms[a].name,
                            st->need_full[a] ? 0 : p, (unsigned long long)st->rep[a].truncate_rep.n_past);
    free_reps(st->rep, n);
    if (rc) return rc;
    if (any && p > 0 && !c->quiet)
        fprintf(stderr, "strata-driver: prefilling the new worker%s to position %d\n", n > 1 ? "s" : "", p);
    for (int q = 0; any && q < p;) {
        if (c->stop && *c->stop) return SWEEP_INTERRUPTED;
        int cap = st->moe ? c->chunk : CATCHUP_CHUNK;   /* MoE: st->pin holds one chunk's routing */
        int m = p - q < cap ? p - q : cap;
        snprintf(what, sizeof what, "a prefill request (positions %d..%d, rebuilding the stream to %d)", q,
                 q + m - 1, p);
        if ((rc = prefill_step(st, st->need_full, q, m, PROTO_ROWS_NONE, 0, what, err, errlen))) return rc;
        for (int a = 0; a < n && !rc; a++)
            if (st->need_full[a] && st->rep[a].prefill_rep.n_past != (uint64_t)(q + m))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: prefill to %d left %llu tokens", st->arms[a].name,
                                q + m, (unsigned long long)st->rep[a].prefill_rep.n_past);
        free_reps(st->rep, n);
        if (rc) return rc;
        q += m;
    }
    for (int a = 0; a < n; a++) st->need_full[a] = 0;
    return 0;
}

/* ============================================================================================
 * Per-position and per-depth measurements
 * ========================================================================================== */

/* twin[i] = the first arm j < i with the same configuration (formats, device, engine, model file's
 * sha256), or -1 */
static void find_twins(const arm *arms, int n, int *twin) {
    for (int i = 0; i < n; i++) {
        twin[i] = -1;
        const proto_hello_rep *a = &arms[i].hello;
        for (int j = 0; j < i && twin[i] < 0; j++) {
            const proto_hello_rep *b = &arms[j].hello;
            if (!strcmp(a->kv_k, b->kv_k) && !strcmp(a->kv_v, b->kv_v) && !strcmp(a->device, b->device) &&
                !strcmp(a->engine, b->engine) && !strcmp(a->git, b->git) &&
                !strcmp(a->model_sha256, b->model_sha256))   /* a weight arm is another configuration */
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

/* One thread's share of a block of positions: for rows i = first, first + step, ... < n_rows,
 * every non-reference arm's row base[a] + i*V against the reference's. Each (i, a) is computed
 * by one thread alone, so the numbers do not depend on the thread count. */
typedef struct {
    const float *const *base;  /* [n] each arm's first row; row i at base[a] + i*V */
    int n, V, ref, n_rows, first, step;
    const int32_t *next;       /* [n_rows] the true next token of each row (-1: none) */
    stats_row *out;            /* [n_rows][n] */
    int *bad;                  /* [n_rows][n] 1 where the pair was refused (a non-finite logit) */
    double *scratch;           /* [2][V] the reference row's ln p and p (this thread's) */
} compare_job;

static void *compare_worker(void *arg) {
    compare_job *j = arg;
    for (int i = j->first; i < j->n_rows; i += j->step) {
        stats_ref r;
        int ref_bad = stats_ref_prepare(j->base[j->ref] + (size_t)i * j->V, j->V, j->scratch, j->scratch + j->V, &r);
        for (int a = 0; a < j->n; a++) {
            size_t k = (size_t)i * j->n + a;
            memset(&j->out[k], 0, sizeof j->out[k]);
            j->bad[k] = 0;
            if (a == j->ref) continue;
            j->bad[k] = ref_bad || stats_compare_prepared(j->base[a] + (size_t)i * j->V, &r, j->next[i], &j->out[k]);
        }
    }
    return NULL;
}

/* Computes rows 0..n_rows-1 of every arm (base[a] [n_rows][V]) against the reference's, for
 * positions pos.., on up to c->compare_threads threads (this thread does a share; a thread that
 * cannot start has its share done here). out [n_rows][n], bad [n_rows][n], next [n_rows] are the
 * caller's; the reference's ln p and p ([2][V] per thread) are allocated here and freed.
 * Returns 0, or SWEEP_ERROR when out of memory. */
static int compare_block(const sweep_state *st, const float *const *base, int pos, int n_rows, stats_row *out,
                         int *bad, int32_t *next, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    for (int i = 0; i < n_rows; i++)
        next[i] = (size_t)(pos + i) + 1 < c->n_tokens ? c->tokens[pos + i + 1] : -1;
    int T = c->compare_threads < 1 ? 1 : c->compare_threads > SWEEP_COMPARE_THREADS_MAX
                                             ? SWEEP_COMPARE_THREADS_MAX : c->compare_threads;
    if (T > n_rows) T = n_rows;
    double *scratch = malloc((size_t)T * 2 * (size_t)st->V * sizeof *scratch);  /* [T][2][V] */
    if (!scratch) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory comparing rows");
    compare_job jobs[SWEEP_COMPARE_THREADS_MAX];
    pthread_t tid[SWEEP_COMPARE_THREADS_MAX];
    int started[SWEEP_COMPARE_THREADS_MAX] = { 0 };
    for (int t = 0; t < T; t++) {
        jobs[t] = (compare_job){ base, st->n, st->V, c->ref, n_rows, t, T, next, out, bad,
                                 scratch + (size_t)t * 2 * st->V };
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, compare_worker, &jobs[t]) == 0;
    }
    compare_worker(&jobs[0]);
    for (int t = 1; t < T; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else compare_worker(&jobs[t]);
    }
    free(scratch);
    return 0;
}

/* Checks one position's comparison (out[n], bad[n] from compare_block; rows[n] the arms' rows
 * [V]): a refused pair is an error naming the arm whose row is not finite; an arm not
 * bit-identical to its twin is a loud warning (once per arm). Returns 0 or SWEEP_ERROR. */
static int check_position(sweep_state *st, const float *const *rows, const int *bad, int pos, int depth_for_msg,
                          char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int V = st->V;
    for (int a = 0; a < st->n; a++) {
        if (a != c->ref && bad[a]) {
            int which = row_finite(rows[a], V) ? c->ref : a;
            return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s returned a non-finite logit at position %d "
                           "(depth %d); stopping, the rows measured so far are kept", st->arms[which].name, pos,
                           depth_for_msg);
        }
        int t = st->twin[a];
        if (t >= 0 && !st->twin_warned[a] && memcmp(rows[a], rows[t], (size_t)V * sizeof(float))) {
            st->twin_warned[a] = 1;
            int rc = warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, "
                               "device and engine) at position %d: the engine is not deterministic and every "
                               "number of this run is suspect", st->arms[a].name, st->arms[t].name, pos);
            if (rc) return rc;
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

/* A growing text buffer for TSV lines (open_memstream). */
typedef struct {
    char *p;
    size_t n;
    FILE *f;
} textbuf;

static int tb_open(textbuf *t) {
    t->p = NULL;
    t->n = 0;
    t->f = open_memstream(&t->p, &t->n);
    return t->f ? 0 : -1;
}
/* Closes the stream (t->p [t->n] stays, the caller frees it); -1 when writing failed. */
static int tb_close(textbuf *t) {
    int bad = !t->f || ferror(t->f);
    if (t->f && fclose(t->f)) bad = 1;
    t->f = NULL;
    return bad ? -1 : 0;
}
static void tb_free(textbuf *t) {
    if (t->f) fclose(t->f);
    free(t->p);
    memset(t, 0, sizeof *t);
}

/* Progress: the journal is synced before the line claims anything. */
static int show_progress(sweep_state *st, int depth_k, long done, int force, char *err, size_t errlen) {
    if (!progress_due(&st->pg, force)) return 0;
    int rc = jn_sync(st, err, errlen);
    if (!rc) progress_print(&st->pg, depth_k, done);
    return rc;
}

/* Truncates the arms with which[a] (NULL: every arm) to depth and checks the replies. why says
 * what for ("back to the depth after the fork probe"). Returns 0 or call()'s codes. */
static int truncate_arms(sweep_state *st, int depth, const int *which, const char *why, char *err, size_t errlen) {
    char what[200];
    for (int a = 0; a < st->n; a++) {
        proto_init(&st->req[a], which && !which[a] ? PROTO_NONE : PROTO_TRUNCATE, 0, 0);
        st->req[a].truncate_req.depth = (uint64_t)depth;
    }
    snprintf(what, sizeof what, "a truncate request (to %d: %s)", depth, why);
    int rc = call(st, KIND_OTHER, 1, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < st->n && !rc; a++)
        if ((!which || which[a]) && st->rep[a].truncate_rep.n_past != (uint64_t)depth)
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: truncate to %d left %llu tokens", st->arms[a].name,
                            depth, (unsigned long long)st->rep[a].truncate_rep.n_past);
    free_reps(st->rep, st->n);
    return rc;
}

/* Sends every arm `generate n = fork_n` at temperature T (0: greedy) with top_p and seed, and
 * checks the replies (kept in st->rep: the caller frees them). Every arm is at depth d. */
static int generate_all(sweep_state *st, int d, double T, double top_p, uint64_t seed, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    char what[200];
    for (int a = 0; a < st->n; a++) {
        proto_init(&st->req[a], PROTO_GENERATE, 0, 0);
        st->req[a].generate_req.n = (uint32_t)c->fork_n;
        st->req[a].generate_req.temperature = T;
        st->req[a].generate_req.seed = seed;
        st->req[a].generate_req.top_p = top_p;
    }
    snprintf(what, sizeof what, "a generate request (the %d-token fork probe at depth %d, temperature %g)",
             c->fork_n, d, T);
    int rc = call(st, KIND_DECODE, c->fork_n, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; !rc && a < st->n; a++) {
        const proto_generate_rep *g = &st->rep[a].generate_rep;
        if (g->n != (size_t)c->fork_n || !g->tokens || !g->gaps || g->n_past != (uint64_t)d + (uint64_t)c->fork_n - 1)
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: generate reply has %zu tokens and n_past %llu, "
                            "expected %d and %d", st->arms[a].name, g->n, (unsigned long long)g->n_past,
                            c->fork_n, d + c->fork_n - 1);
    }
    if (rc) free_reps(st->rep, st->n);
    return rc;
}

/* Scores the continuations x [n][fork_n] (arm a's at x + a * fork_n) teacher-forced under the
 * reference and the f32 arm at depth d (every arm at d): for each distinct text, truncate both
 * scorers to d - 1 and prefill [token d-1, x_0 .. x_{n-2}] with every row; row i gives ln p(x_i).
 * Arms with the same text share its scores (the rows are bit-identical). Writes nll [2][n]: the
 * mean NLL per token under the reference, then under f32 (NAN: no f32 arm). The scorers end at
 * d - 1 + fork_n. */
static int score_texts(sweep_state *st, int d, const int32_t *x, double *nll, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref, F = st->F, N = c->fork_n, V = st->V;
    int *scorer = calloc((size_t)n, sizeof *scorer);             /* [n] 1: R and F */
    int *uniq = calloc((size_t)n, sizeof *uniq);                 /* [n] first arm with the same text */
    int32_t *buf = malloc(sizeof *buf * (size_t)N);              /* [N] the prefill */
    char what[200];
    int rc = 0;
    if (!scorer || !uniq || !buf) { rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory"); goto done; }
    scorer[R] = 1;
    if (F >= 0) scorer[F] = 1;
    for (int a = 0; a < n; a++) {
        uniq[a] = a;
        for (int b = 0; b < a && uniq[a] == a; b++)
            if (!memcmp(x + (size_t)a * N, x + (size_t)b * N, sizeof *x * (size_t)N)) uniq[a] = b;
    }
    for (int a = 0; a < n && !rc; a++) {
        const int32_t *xa = x + (size_t)a * N;
        if (uniq[a] != a) {
            nll[a] = nll[uniq[a]];
            nll[n + a] = nll[n + uniq[a]];
            continue;
        }
        if ((rc = truncate_arms(st, d - 1, scorer, "before cross-scoring", err, errlen))) break;
        buf[0] = c->tokens[d - 1];
        memcpy(buf + 1, xa, sizeof *buf * (size_t)(N - 1));
        for (int s = 0; s < n; s++) {
            proto_init(&st->req[s], scorer[s] ? PROTO_PREFILL : PROTO_NONE, 0, 0);
            st->req[s].prefill_req.tokens = buf;
            st->req[s].prefill_req.n_tokens = (size_t)N;
            st->req[s].prefill_req.rows = PROTO_ROWS_ALL;
        }
        snprintf(what, sizeof what, "a prefill request (cross-scoring arm %s's continuation at depth %d)",
                 st->arms[a].name, d);
        if ((rc = call(st, KIND_PREFILL, N, what, err, errlen))) break;
        for (int s = 0; s < n && !rc; s++)
            if (scorer[s]) rc = check_prefill(&st->arms[s], &st->rep[s], (uint64_t)(d - 1 + N), (uint32_t)V,
                                              (uint32_t)N, err, errlen);
        for (int k = 0; k < 2 && !rc; k++) {
            int s = k ? F : R;
            double sum = 0, lp;
            for (int i = 0; s >= 0 && i < N && !rc; i++) {
                if (stats_token_logprob(st->rep[s].prefill_rep.logits + (size_t)i * V, V, xa[i], &lp))
                    rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s returned a non-finite logit while "
                                    "cross-scoring at depth %d", st->arms[s].name, d);
                sum -= lp;
            }
            nll[k * n + a] = s >= 0 ? sum / N : NAN;
        }
        free_reps(st->rep, n);
    }
done:
    free(scorer);
    free(uniq);
    free(buf);
    return rc;
}

/* The cross.tsv / cross_samples.tsv values of arm a: its text and the reference's, x [n][fork_n],
 * with their scores nll [2][n] (score_texts). */
static report_cross_vals cross_vals(const sweep_state *st, const int32_t *x, const double *nll, int a, int fork,
                                    int censored) {
    const int n = st->n, R = st->c->ref, N = st->c->fork_n;
    return (report_cross_vals){ fork, censored, N, nll[a], nll[R], nll[n + a], nll[n + R],
                                stats_repeat_rate(x + (size_t)a * N, N, REPORT_REPEAT_ORDER),
                                stats_repeat_rate(x + (size_t)R * N, N, REPORT_REPEAT_ORDER) };
}

/* The sampled fork probes of depth d (every arm at d): for each temperature T_j, every arm
 * samples fork_n tokens with the same seed (sweep_sample_seed), then is truncated back to d.
 * One samples.tsv line per non-reference arm and temperature into out. xout (NULL: none): each
 * arm's sampled text is also cross-scored (score_texts) and gets a cross_samples.tsv line, after
 * which every arm is back at d for the next temperature. */
static int sampled_probes(sweep_state *st, int d, FILE *out, FILE *xout, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref, N = c->fork_n;
    int32_t *x = xout ? malloc(sizeof *x * (size_t)n * (size_t)N) : NULL;   /* [n][N] the sampled texts */
    double *nll = xout ? malloc(sizeof *nll * 2 * (size_t)n) : NULL;       /* [2][n] their scores */
    int *fork = calloc((size_t)n, sizeof *fork), *cens = calloc((size_t)n, sizeof *cens);   /* [n] */
    int rc = 0;
    if ((xout && (!x || !nll)) || !fork || !cens) { rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory"); goto done; }
    for (int j = 0; j < c->n_sample_temps && !rc; j++) {
        double T = c->sample_temps[j];
        uint64_t seed = sweep_sample_seed(c->sample_seed, d, j);
        if ((rc = generate_all(st, d, T, c->top_p, seed, err, errlen))) break;
        const proto_generate_rep *gr = &st->rep[R].generate_rep;
        for (int a = 0; a < n && !rc; a++) {
            const proto_generate_rep *g = &st->rep[a].generate_rep;
            int t = st->twin[a];
            if (t >= 0 && !st->twin_warned[a] &&
                memcmp(g->tokens, st->rep[t].generate_rep.tokens, sizeof(int32_t) * (size_t)N)) {
                st->twin_warned[a] = 1;
                rc = warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, device "
                               "and engine) in the sampled fork probe at depth %d, temperature %g: the engine is not "
                               "deterministic and every number of this run is suspect", st->arms[a].name,
                               st->arms[t].name, d, T);
            }
            if (x) memcpy(x + (size_t)a * N, g->tokens, sizeof *x * (size_t)N);
            if (rc || a == R) continue;
            fork[a] = sweep_fork_index(g->tokens, gr->tokens, N, &cens[a]);
            if (report_tsv_sample_row(out, d, st->arms[a].name, T, c->top_p, seed, fork[a], cens[a], g->tokens,
                                      gr->tokens, N))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a samples.tsv row");
        }
        free_reps(st->rep, n);
        if (!rc) rc = truncate_arms(st, d, NULL, "back to the depth after a sampled fork probe", err, errlen);
        if (rc || !xout) continue;
        rc = score_texts(st, d, x, nll, err, errlen);
        for (int a = 0; a < n && !rc; a++) {
            if (a == R) continue;
            report_cross_vals v = cross_vals(st, x, nll, a, fork[a], cens[a]);
            if (report_tsv_cross_sample_row(xout, d, st->arms[a].name, T, &v))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a cross_samples.tsv row");
        }
        /* back to depth d with position d-1's row, which the next probe generates from: token d-1
         * again (the same bits: batch invariance; the experts as the teacher-forced pass chose them) */
        if (!rc) rc = truncate_arms(st, d - 1, NULL, "back before the depth after cross-scoring a sampled probe", err,
                                    errlen);
        if (!rc) rc = prefill_step(st, NULL, d - 1, 1, PROTO_ROWS_NONE, 0,
                                   "a prefill request (token depth-1 again, after cross-scoring)", err, errlen);
        if (!rc) free_reps(st->rep, n);
    }
done:
    free(x);
    free(nll);
    free(fork);
    free(cens);
    return rc;
}

/* Cross-scoring at depth d (every arm at d, greedy continuations in st->greedy): score_texts,
 * then one cross.tsv line per non-reference arm into out. The scorers end at d - 1 + fork_n. */
static int cross_score(sweep_state *st, int d, FILE *out, char *err, size_t errlen) {
    const int n = st->n, R = st->c->ref;
    double *nll = malloc(sizeof *nll * 2 * (size_t)n);           /* [2][n] by R, by F (NAN: no F) */
    if (!nll) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    int rc = score_texts(st, d, st->greedy, nll, err, errlen);
    for (int a = 0; a < n && !rc; a++) {
        if (a == R) continue;
        report_cross_vals v = cross_vals(st, st->greedy, nll, a, st->fork[a], st->censored[a]);
        if (report_tsv_cross_row(out, d, st->arms[a].name, &v))
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a cross.tsv row");
    }
    free(nll);
    return rc;
}

/* ---- the passages (driver/passages.h): passages_ops on the sweep's own requests ---- */

/* passages_ops.score: every arm prefills tokens [start, start + m) after its `at` tokens, all rows;
 * compared (compare_block: next = token start + i + 1) and checked as per-position rows are */
static int pass_score(void *ctx, int at, int start, int m, const stats_row **out, const float *const **rows,
                      char *err, size_t errlen) {
    sweep_state *st = ctx;
    const sweep_config *c = st->c;
    const int n = st->n, V = st->V;
    char what[200];
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + start);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = PROTO_ROWS_ALL;
    }
    snprintf(what, sizeof what, "a prefill request (passage tokens %d..%d after %d tokens)", start, start + m - 1, at);
    int rc = call(st, KIND_PREFILL, m, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < n && !rc; a++)
        rc = check_prefill(&st->arms[a], &st->rep[a], (uint64_t)(at + m), (uint32_t)V, (uint32_t)m, err, errlen);
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
    if (!rc) rc = compare_block(st, st->rows, start, m, st->pr, st->bad, st->next, err, errlen);
    for (int i = 0; i < m && !rc; i++) {
        for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)i * V;
        rc = check_position(st, st->rows, st->bad + (size_t)i * n, at + i, at, err, errlen);
    }
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
    if (rc) free_reps(st->rep, n);
    *out = st->pr;
    *rows = st->rows;
    return rc;
}

static void pass_release(void *ctx) {
    sweep_state *st = ctx;
    free_reps(st->rep, st->n);
}

static int pass_truncate(void *ctx, int depth, char *err, size_t errlen) {
    return truncate_arms(ctx, depth, NULL, "back to the depth after a passage", err, errlen);
}

/* The passages after the d tokens of the prefix (every arm truncated to d first, and back at d
 * after): their passages.tsv lines into tq (opened here; the caller frees it). */
static int run_passages(sweep_state *st, int d, textbuf *tq, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const char **names = malloc(sizeof *names * (size_t)st->n);   /* [n] */
    int rc = 0;
    if (!names || tb_open(tq)) rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    for (int a = 0; !rc && a < st->n; a++) names[a] = st->arms[a].name;
    if (!rc) rc = truncate_arms(st, d, NULL, "to the depth before its passages", err, errlen);
    passages_ops ops = { st, st->n, c->ref, st->V, names, pass_score, pass_release, pass_truncate };
    if (!rc) rc = passages_measure(&ops, d, c->passage_starts, c->n_passages, c->passage_len, c->chunk, tq->f,
                                   c->dump_rows_dir, err, errlen);
    if (rc < 0) rc = SWEEP_ERROR;
    if (!rc && tb_close(tq)) rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting %s rows", PASSAGES_FILE);
    free(names);
    return rc;
}

/* The passages' baseline (every arm at 0): prefill the base prefix, score the passages, truncate
 * to 0; journalled (a PASSAGES record, synced) before its lines reach passages.tsv. */
static int passages_baseline(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int b = st->pass_base;
    textbuf tq = { 0 };
    int rc = 0;
    if (st->pos_done != 0)
        return errmsg_set(err, errlen, SWEEP_ERROR, "the journal holds positions but not the passages' baseline");
    if (b > 0) {
        rc = prefill_step(st, NULL, 0, b, PROTO_ROWS_NONE, 0, "a prefill request (the passages' base prefix)", err,
                          errlen);
        for (int a = 0; a < st->n && !rc; a++)
            rc = check_prefill(&st->arms[a], &st->rep[a], (uint64_t)b, (uint32_t)st->V, 0, err, errlen);
        if (!rc) free_reps(st->rep, st->n);
    }
    if (!rc) rc = run_passages(st, b, &tq, err, errlen);
    if (!rc) rc = truncate_arms(st, 0, NULL, "to 0 after the passages' baseline", err, errlen);
    if (!rc) {
        journal_buf jb = { 0 };
        jbuf_u32(&jb, (uint32_t)b);
        jbuf_str(&jb, tq.p ? tq.p : "", tq.n);
        rc = jn_append(st, JOURNAL_PASSAGES, &jb, err, errlen);
        free(jb.p);
    }
    if (!rc) rc = jn_sync(st, err, errlen);
    if (!rc) rc = tsv_put(st->passages, PASSAGES_FILE, c, tq.p, tq.n, err, errlen);
    if (!rc) rc = tsv_sync(st, err, errlen);
    if (!rc) st->pass_base_done = 1;
    tb_free(&tq);
    return rc;
}

/* Measures depths k_done.. from position pos_done on, journalling as it goes. */
static int run_depths(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, V = st->V, R = c->ref;
    char what[160];
    textbuf tp = { 0 }, td = { 0 }, tf = { 0 }, tx = { 0 }, ts = { 0 }, txs = { 0 }, tq = { 0 };
    int ret = 0;
    if (st->pass_base >= 0 && !st->pass_base_done && (ret = passages_baseline(st, err, errlen))) return ret;
    for (int k = st->k_done; k < c->n_depths && !ret; k++) {
        const int d = c->depths[k], from = st->pos_done;
        /* ---- prefill [from, d) in chunks; per-position rows journalled chunk by chunk ---- */
        for (int pos = from; pos < d && !ret;) {
            if (c->stop && *c->stop) { ret = SWEEP_INTERRUPTED; break; }
            int m = d - pos < c->chunk ? d - pos : c->chunk;
            int last = pos + m == d;
            uint32_t want = c->per_position ? PROTO_ROWS_ALL : last ? PROTO_ROWS_LAST : PROTO_ROWS_NONE;
            uint32_t n_rows = want == PROTO_ROWS_ALL ? (uint32_t)m : want == PROTO_ROWS_LAST ? 1 : 0;
            snprintf(what, sizeof what, "a prefill request (positions %d..%d of depth %d)", pos, pos + m - 1, d);
            if ((ret = prefill_step(st, NULL, pos, m, want, 1, what, err, errlen))) break;
            for (int a = 0; a < n && !ret; a++)
                ret = check_prefill(&st->arms[a], &st->rep[a], (uint64_t)(pos + m), (uint32_t)V, n_rows, err, errlen);
            if (!ret && st->moe) ret = count_routing(st, m, err, errlen);
            /* per-position rows: compare, format, drop */
            if (!ret && c->per_position) {
                tb_free(&tp);
                if (tb_open(&tp)) ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
            }
            if (!ret && c->per_position) {
                for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
                ret = compare_block(st, st->rows, pos, (int)n_rows, st->pr, st->bad, st->next, err, errlen);
            }
            for (uint32_t i = 0; !ret && c->per_position && i < n_rows; i++) {
                for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)i * V;
                int p = pos + (int)i;
                const stats_row *pr = st->pr + (size_t)i * n;
                ret = check_position(st, st->rows, st->bad + (size_t)i * n, p, d, err, errlen);
                for (int a = 0; a < n && !ret; a++)
                    if (a != R && report_tsv_position_row(tp.f, p, st->arms[a].name, &pr[a]))
                        ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a positions.tsv row");
            }
            if (!ret && c->per_position && tb_close(&tp))
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting positions.tsv rows");
            /* the teacher-forced row at d - 1 */
            if (!ret && last) {
                for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)(n_rows - 1) * V;
                ret = compare_block(st, st->rows, d - 1, 1, st->tf, st->bad, st->next, err, errlen);
                if (!ret) ret = check_position(st, st->rows, st->bad, d - 1, d, err, errlen);
                for (int a = 0; a < n && !ret && c->dump_rows_dir; a++)
                    ret = dump_row(c, &st->arms[a], d, st->rows[a], V, err, errlen);
            }
            free_reps(st->rep, n);
            if (ret) break;
            /* a chunk that does not end the depth: its rows are journalled now */
            if (!last && c->per_position) {
                journal_buf b = { 0 };
                jbuf_u32(&b, (uint32_t)pos);
                jbuf_u32(&b, (uint32_t)(pos + m));
                jbuf_f64(&b, st->wall_prev + clock_s() - st->t0);
                jbuf_str(&b, tp.p, tp.n);
                jbuf_routing(st, &b);
                ret = jn_append(st, JOURNAL_CHUNK, &b, err, errlen);
                free(b.p);
                if (!ret) routing_committed(st);
                if (!ret) ret = tsv_put(st->positions, "positions.tsv", c, tp.p, tp.n, err, errlen);
                if (!ret) st->pos_done = pos + m;
            }
            pos += m;
            if (!ret) ret = show_progress(st, k + 1, pos, 0, err, errlen);
        }
        if (ret) break;
        if (c->stop && *c->stop) { ret = SWEEP_INTERRUPTED; break; }

        /* ---- fork probe: fork_n greedy tokens on every arm ---- */
        if ((ret = generate_all(st, d, 0.0, 0.0, 0, err, errlen))) break;
        if (!ret && (tb_open(&td) || tb_open(&tf))) ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
        const proto_generate_rep *gr = &st->rep[R].generate_rep;
        for (int a = 0; a < n && !ret; a++) {
            const proto_generate_rep *g = &st->rep[a].generate_rep;
            st->fork[a] = sweep_fork_index(g->tokens, gr->tokens, c->fork_n, &st->censored[a]);
            int t = st->twin[a];
            if (t >= 0 && !st->twin_warned[a] &&
                (memcmp(g->tokens, st->rep[t].generate_rep.tokens, sizeof(int32_t) * (size_t)c->fork_n) ||
                 memcmp(g->gaps, st->rep[t].generate_rep.gaps, sizeof(float) * (size_t)c->fork_n))) {
                st->twin_warned[a] = 1;
                ret = warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, "
                                "device and engine) in the fork probe at depth %d: the engine is not deterministic "
                                "and every number of this run is suspect", st->arms[a].name, st->arms[t].name, d);
                if (ret) break;
            }
            if (st->extra) memcpy(st->greedy + (size_t)a * c->fork_n, g->tokens, sizeof(int32_t) * (size_t)c->fork_n);
            if (a == R) continue;
            double ga = st->censored[a] ? NAN : g->gaps[st->fork[a]];
            double gref = st->censored[a] ? NAN : gr->gaps[st->fork[a]];
            if (report_tsv_depth_row(td.f, d, st->arms[a].name, &st->tf[a], st->fork[a], st->censored[a], ga, gref) ||
                report_tsv_fork_row(tf.f, d, st->arms[a].name, st->fork[a], st->censored[a], g->tokens, c->fork_n,
                                    gr->tokens, c->fork_n))
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format the depths.tsv / forks.tsv rows");
        }
        free_reps(st->rep, n);
        if (!ret && (tb_close(&td) || tb_close(&tf)))
            ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting depths.tsv / forks.tsv rows");
        if (ret) break;

        /* ---- optional: sampled fork probes and cross-scoring (cross.tsv, samples.tsv,
         *      cross_samples.tsv) ---- */
        if (st->extra) {
            if (tb_open(&tx) || tb_open(&ts) || (st->xsamp && tb_open(&txs)))
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
            if (!ret) ret = truncate_arms(st, d, NULL, "back to the depth after the fork probe", err, errlen);
            if (!ret) ret = sampled_probes(st, d, ts.f, st->xsamp ? txs.f : NULL, err, errlen);
            if (!ret && c->cross_score) ret = cross_score(st, d, tx.f, err, errlen);
            if (!ret && (tb_close(&tx) || tb_close(&ts) || (st->xsamp && tb_close(&txs))))
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting cross.tsv / samples.tsv rows");
            if (ret) break;
        }

        /* ---- optional: the passages after the prefix [0, d) (passages.tsv) ---- */
        if (c->n_passages && (ret = run_passages(st, d, &tq, err, errlen))) break;

        /* ---- depth k complete: journal (synced), then the TSVs, then meta.json counts it ---- */
        journal_buf b = { 0 };
        jbuf_u32(&b, (uint32_t)k);
        jbuf_u32(&b, (uint32_t)d);
        jbuf_u32(&b, (uint32_t)st->pos_done);
        jbuf_f64(&b, st->wall_prev + clock_s() - st->t0);
        jbuf_str(&b, c->per_position ? tp.p : "", c->per_position ? tp.n : 0);
        jbuf_str(&b, td.p, td.n);
        jbuf_str(&b, tf.p, tf.n);
        if (st->extra) {
            jbuf_str(&b, tx.p ? tx.p : "", tx.n);
            jbuf_str(&b, ts.p ? ts.p : "", ts.n);
        }
        if (st->xsamp) jbuf_str(&b, txs.p ? txs.p : "", txs.n);
        if (c->n_passages) jbuf_str(&b, tq.p ? tq.p : "", tq.n);
        jbuf_routing(st, &b);
        ret = jn_append(st, JOURNAL_DEPTH, &b, err, errlen);
        free(b.p);
        if (!ret) routing_committed(st);
        if (!ret) ret = jn_sync(st, err, errlen);
        if (!ret && c->per_position) ret = tsv_put(st->positions, "positions.tsv", c, tp.p, tp.n, err, errlen);
        if (!ret) ret = tsv_put(st->depths, "depths.tsv", c, td.p, td.n, err, errlen);
        if (!ret) ret = tsv_put(st->forks, "forks.tsv", c, tf.p, tf.n, err, errlen);
        if (!ret && st->extra) ret = tsv_put(st->cross, "cross.tsv", c, tx.p, tx.n, err, errlen);
        if (!ret && st->extra) ret = tsv_put(st->samples, "samples.tsv", c, ts.p, ts.n, err, errlen);
        if (!ret && st->xsamp)
            ret = tsv_put(st->cross_samples, "cross_samples.tsv", c, txs.p, txs.n, err, errlen);
        if (!ret && c->n_passages) ret = tsv_put(st->passages, PASSAGES_FILE, c, tq.p, tq.n, err, errlen);
        if (!ret) ret = tsv_sync(st, err, errlen);
        tb_free(&tp);
        tb_free(&td);
        tb_free(&tf);
        tb_free(&tx);
        tb_free(&ts);
        tb_free(&txs);
        tb_free(&tq);
        if (ret) break;
        st->k_done = k + 1;
        st->pos_done = d;
        if ((ret = write_meta(st, "running", 0, err, errlen))) break;
        if ((ret = show_progress(st, k + 1, d, k + 1 == c->n_depths, err, errlen))) break;

        /* ---- back to depth d ---- */
        if ((ret = truncate_arms(st, d, NULL, "back to the depth after the fork probe", err, errlen))) break;
    }
    tb_free(&tp);
    tb_free(&td);
    tb_free(&tf);
    tb_free(&tx);
    tb_free(&ts);
    tb_free(&txs);
    tb_free(&tq);
    return ret;
}

/* ============================================================================================
 * sweep_run
 * ========================================================================================== */

int sweep_run(const sweep_config *c, arm *arms, int n, sweep_outcome *out, char *err, size_t errlen) {
    sweep_state st;
    int ret = SWEEP_OK, started = 0;
    char e[2048] = "";
    if (out) *out = (sweep_outcome){ 0, -1, 0 };
    memset(&st, 0, sizeof st);
    st.jn.fd = -1;
    st.meta_k = -1;
    st.c = c;
    st.arms = arms;
    st.n = n;
    st.V = (int)arms[c->ref].hello.n_vocab;
    st.extra = c->cross_score || c->n_sample_temps > 0;
    st.xsamp = c->cross_score && c->n_sample_temps > 0;
    /* MoE routing is compared (and pinned) when every arm runs experts of the reference's shape */
    const proto_hello_rep *hr = &arms[c->ref].hello;
    st.moe = hr->n_expert_used > 0;
    for (int a = 0; a < n; a++)
        if (arms[a].hello.n_expert != hr->n_expert || arms[a].hello.n_expert_used != hr->n_expert_used ||
            arms[a].hello.n_layer != hr->n_layer)
            st.moe = 0;
    st.per_tok = st.moe ? (size_t)hr->n_layer * hr->n_expert_used : 0;
    if (c->pin_experts && !st.moe) {
        return errmsg_set(err, errlen, SWEEP_ERROR, "--pin-experts needs a mixture-of-experts model with the same "
                          "expert count, experts per token and layers in every arm (the reference arm %s has %u "
                          "experts, %u per token)", arms[c->ref].name, hr->n_expert, hr->n_expert_used);
    }
    st.F = c->cross_score ? sweep_f32_arm(arms, n, c->ref) : -1;
    st.pass_base = -1;   /* the passages' baseline: when its base prefix is shorter than the first depth */
    if (c->n_passages && passages_base_depth(c->tokens, c->n_tokens, hr->bos) < c->depths[0])
        st.pass_base = passages_base_depth(c->tokens, c->n_tokens, hr->bos);
    if (c->n_passages && (c->pin_experts || !c->passage_starts || c->passage_len < 1))
        return errmsg_set(err, errlen, SWEEP_ERROR, "--passages: %s", c->pin_experts ? "cannot be combined with "
                          "--pin-experts (the passages' routing is not pinned)" : "no passages planned");
    st.k_journal = -1;

    st.t0 = clock_s();
    time_t wall = c->date ? c->date : time(NULL);
    struct tm tmv;
    if (c->date) gmtime_r(&wall, &tmv);
    else localtime_r(&wall, &tmv);
    strftime(st.date, sizeof st.date, c->date ? "%Y-%m-%dT%H:%M:%S+0000" : "%Y-%m-%dT%H:%M:%S%z", &tmv);
    sweep_machine_string(st.machine, sizeof st.machine);

    st.req = calloc((size_t)n, sizeof *st.req);
    st.rep = calloc((size_t)n, sizeof *st.rep);
    st.codes = calloc((size_t)n, sizeof *st.codes);
    st.failed = calloc((size_t)n, sizeof *st.failed);
    st.need_full = calloc((size_t)n, sizeof *st.need_full);
    st.twin = calloc((size_t)n, sizeof *st.twin);
    st.twin_warned = calloc((size_t)n, sizeof *st.twin_warned);
    st.tf = calloc((size_t)n, sizeof *st.tf);
    st.fork = calloc((size_t)n, sizeof *st.fork);
    st.censored = calloc((size_t)n, sizeof *st.censored);
    st.stats = calloc((size_t)n, sizeof *st.stats);
    st.have_stats = calloc((size_t)n, sizeof *st.have_stats);
    st.rows = calloc((size_t)n, sizeof *st.rows);
    size_t nr = c->chunk > 1 ? (size_t)c->chunk : 1;
    st.pr = calloc(nr * (size_t)n, sizeof *st.pr);
    st.bad = calloc(nr * (size_t)n, sizeof *st.bad);
    st.next = calloc(nr, sizeof *st.next);
    if (st.moe) {
        st.route_n = calloc((size_t)n, sizeof *st.route_n);
        st.route_diff = calloc((size_t)n, sizeof *st.route_diff);
        st.pend_n = calloc((size_t)n, sizeof *st.pend_n);
        st.pend_diff = calloc((size_t)n, sizeof *st.pend_diff);
        st.pin = malloc(sizeof(int32_t) * (size_t)c->chunk * st.per_tok);
        if (!st.route_n || !st.route_diff || !st.pend_n || !st.pend_diff || !st.pin) {
            ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "out of memory");
            goto done;
        }
    }
    st.greedy = calloc((size_t)n * (size_t)c->fork_n, sizeof *st.greedy);
    st.resumes = json_array();
    if (!st.req || !st.rep || !st.codes || !st.failed || !st.need_full || !st.twin || !st.twin_warned ||
        !st.tf || !st.fork || !st.censored || !st.stats || !st.have_stats || !st.rows || !st.pr || !st.bad || !st.next ||
        !st.greedy || !st.resumes) {
        ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "out of memory");
        goto done;
    }
    find_twins(arms, n, st.twin);
    if (c->test_fault && (ret = parse_faults(&st, c->test_fault, e, sizeof e))) goto done;

    /* the journal first (a folder another driver holds is left untouched), then the TSVs: created
     * empty, or rebuilt from the journal when resuming */
    if (c->pin_file && !c->resume && (ret = open_pin_file(&st, e, sizeof e))) goto done;   /* before any folder */
    if ((ret = c->resume ? journal_start_resume(&st, e, sizeof e) : journal_start_new(&st, e, sizeof e))) goto done;
    started = 1;
    if (c->pin_file && c->resume && (ret = open_pin_file(&st, e, sizeof e))) goto done;   /* after the journal */
    if ((ret = tsv_sync(&st, e, sizeof e))) goto done;
    if ((ret = write_meta(&st, "running", 0, e, sizeof e))) goto done;

    memset(&st.pg, 0, sizeof st.pg);
    st.pg.quiet = c->quiet;
    st.pg.tty = isatty(2);
    st.pg.t0 = st.pg.last = clock_s();
    st.pg.total = c->depths[c->n_depths - 1];
    st.pg.base = st.pos_done;
    st.pg.n_depths = c->n_depths;

    /* measure; a worker that dies or hangs is restarted and the sweep continues from the last
     * journalled position (every arm is brought back there first) */
    for (int a = 0; a < n; a++) st.need_full[a] = 1;
    while (st.k_done < c->n_depths) {
        ret = sync_arms(&st, e, sizeof e);
        if (!ret) ret = run_depths(&st, e, sizeof e);
        if (ret != SWEEP_FAULT) break;
        ret = handle_fault(&st, e, sizeof e);
        if (ret == SWEEP_ERROR) st.gave_up = 1;   /* past --max-restarts, or the restart failed */
        if (ret != SWEEP_FAULT) break;
        ret = SWEEP_OK;
    }
    if (ret == SWEEP_OK && st.pf && pinfile_finish(st.pf, e, sizeof e)) ret = SWEEP_ERROR;

done:
    progress_end(&st.pg);
    {
        /* everything journalled reaches the disk; a failure to close the TSVs is an error */
        char e2[600];
        if (st.jn_open && journal_sync(&st.jn, e2, sizeof e2) && ret == SWEEP_OK) {
            ret = SWEEP_ERROR;
            snprintf(e, sizeof e, "%s", e2);
        }
        journal_close(&st.jn);
        FILE *f[6] = { st.depths, st.forks, st.positions, st.cross, st.samples, st.cross_samples };
        for (int i = 0; i < 6; i++) {
            if (f[i] && ferror(f[i])) st.io_failed = 1;   /* a TSV write failed */
            if (f[i] && (journal_fsync_stream(f[i]) | fclose(f[i])) && ret == SWEEP_OK) {
                st.io_failed = 1;
                ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "cannot write the TSV files in %s: %s", c->out_dir,
                                 strerror(errno));
            }
        }
        if (st.passages && ferror(st.passages)) st.io_failed = 1;
        if (st.passages && (journal_fsync_stream(st.passages) | fclose(st.passages)) && ret == SWEEP_OK) {
            st.io_failed = 1;
            ret = errmsg_set(e, sizeof e, SWEEP_ERROR, "cannot write %s/%s: %s", c->out_dir, PASSAGES_FILE,
                             strerror(errno));
        }
    }
    if (started) {
        /* the workers' own counters, from the arms still connected (short timeout) */
        for (int a = 0; a < n; a++) {
            if (!arms[a].connected || !arm_alive(&arms[a]) || arm_proc_state(&arms[a]) == 'T') continue;
            st.have_stats[a] = workers_stats(&arms[a], &st.stats[a], c->warnings);
        }
        if (ret == SWEEP_INTERRUPTED)
            snprintf(e, sizeof e, "interrupted after %d of %d depths", st.k_done, c->n_depths);
        const char *status = ret == SWEEP_OK ? "complete" : e;
        if (ret != SWEEP_OK && c->warnings) {
            char w[2200];
            snprintf(w, sizeof w, "partial results: the sweep stopped after %d of %d depths (%s)", st.k_done,
                     c->n_depths, e);
            json_array_append_new(c->warnings, json_string(w));
        }
        char e3[700];
        int wr = write_meta(&st, status, ret == SWEEP_OK, e3, sizeof e3);
        if (wr && ret == SWEEP_OK) { ret = SWEEP_ERROR; snprintf(e, sizeof e, "%s", e3); }
        else if (wr && st.meta_k != st.k_done) {
            /* e.g. a full disk: the journal counts what was kept; say that meta.json lags behind it */
            size_t l = strlen(e);
            snprintf(e + l, sizeof e - l, "; meta.json could not be updated and still counts %d depths: the journal "
                     "holds %d, which --resume restores", st.meta_k < 0 ? 0 : st.meta_k, st.k_done);
        }
    }
    if (ret != SWEEP_OK) errmsg_set(err, errlen, ret, "%s", e);
    if (out) {
        /* a refused resume measured nothing; its journal keeps what it held. A resume can continue
         * after an interrupt, a worker fault, a failed write (the journal counts what was kept) or a
         * lost connection to an arm; not after a refusal, a non-finite logit or a bad reply, which it
         * would meet again */
        int transport = 0;
        for (int a = 0; started && st.codes && a < n; a++)
            transport |= st.codes[a] == ARM_E_DIED || st.codes[a] == PROTO_E_TIMEOUT || st.codes[a] == PROTO_E_TRANSPORT;
        out->depths_done = started ? st.k_done : 0;
        out->depths_kept = started ? st.k_done : st.k_journal;
        out->resumable = ret != SWEEP_OK && (started || st.io_failed) &&
                         (ret == SWEEP_INTERRUPTED || st.io_failed || st.gave_up || st.jn.broken || transport);
    }
    free(st.req);
    free(st.rep);
    free(st.codes);
    free(st.failed);
    free(st.need_full);
    free(st.twin);
    free(st.twin_warned);
    free(st.tf);
    free(st.fork);
    free(st.censored);
    free(st.stats);
    free(st.have_stats);
    free(st.rows);
    free(st.pr);
    free(st.bad);
    free(st.next);
    free(st.route_n);
    free(st.route_diff);
    free(st.pend_n);
    free(st.pend_diff);
    free(st.pin);
    pinfile_close(st.pf);
    free(st.greedy);
    json_decref(st.resumes);
    return ret;
}
