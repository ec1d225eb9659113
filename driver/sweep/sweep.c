/* sweep.c — the one-pass sweep over nested prefixes, in lockstep on every arm, writing the raw
 * results (meta.json and the TSVs) as it goes. See sweep.h; the module's files are listed in
 * sweep_internal.h.
 *
 * Reading order: planning helpers (pure); meta.json; sweep_run, the command's skeleton: the
 * state, the journal (new or resumed), the measuring loop with its worker restarts
 * (sweep_run_depths, sweep_handle_fault), the closing meta.json. */
#include "driver/sweep/sweep.h"
#include "driver/sweep/sweep_internal.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver/passages.h"
#include "driver/run.h"
#include "driver/workers.h"

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
 * meta.json
 * ========================================================================================== */

json_t *sweep_jstr_or(const char *s) { return json_string(s ? s : "unknown"); }

/* The sampled fork probes' options (when there are any) into o: meta.json and the journal header. */
void sweep_put_sample_opts(json_t *o, const sweep_config *c) {
    if (!c->n_sample_temps) return;
    json_t *t = json_array();
    for (int j = 0; j < c->n_sample_temps; j++) json_array_append_new(t, json_real(c->sample_temps[j]));
    json_object_set_new(o, "sample_temps", t);
    json_object_set_new(o, "top_p", json_real(c->top_p));
    json_object_set_new(o, "sample_seed", json_integer((json_int_t)c->sample_seed));
}

/* The parts of meta.json below, each added to root in the order the file has them. */

/* Where the run came from: tag, date, command, invocation, git, engine, machine, model, document, ref. */
static void meta_provenance(json_t *root, const sweep_state *st) {
    const sweep_config *c = st->c;
    const arm *arms = st->arms;
    const proto_hello_rep *h = &arms[c->ref].hello;
    json_t *model = workers_model_json(c->model_path, h), *doc = json_object();
    char engine[2 * PROTO_STR_MAX + 16];
    snprintf(engine, sizeof engine, "%s (git %s)", h->engine, h->git);
    json_object_set_new(root, "tag", sweep_jstr_or(c->tag));
    json_object_set_new(root, "date", json_string(st->date));
    json_object_set_new(root, "command", sweep_jstr_or(c->command));
    if (c->invocation) json_object_set(root, "invocation", c->invocation);
    json_object_set_new(root, "git", sweep_jstr_or(c->git));
    json_object_set_new(root, "engine", json_string(engine));
    json_object_set_new(root, "machine", json_string(st->machine));
    json_object_set_new(root, "model", model);
    json_object_set_new(doc, "path", sweep_jstr_or(c->doc_path));
    json_object_set_new(doc, "n_tokens", json_integer((json_int_t)c->n_tokens));
    json_object_set_new(doc, "description", sweep_jstr_or(c->doc_description));
    json_object_set_new(root, "document", doc);
    json_object_set_new(root, "ref", json_string(arms[c->ref].name));
}

/* Arm i: what workers_arm_json says, its backend and ISA, threads, the worker's counters (null when
 * its stats were not read) and, for a MoE model, its routing against the reference's. */
static json_t *meta_arm(const sweep_state *st, int i) {
    const sweep_config *c = st->c;
    const arm *arms = st->arms;
    const arm *a = &arms[i];
    json_t *ja = workers_arm_json(a);
    /* device is BACKEND-ISA (docs/DESIGN.md §1.4): both parts on their own for readers */
    const char *isa = strchr(a->hello.device, '-');
    size_t blen = isa ? (size_t)(isa - a->hello.device) : strlen(a->hello.device);
    json_object_set_new(ja, "backend", json_stringn(a->hello.device, blen));
    json_object_set_new(ja, "isa", isa ? json_string(isa + 1) : json_null());
    json_object_set_new(ja, "threads", json_integer(a->hello.threads));
    if (st->sa[i].have_stats) {
        const proto_stats_rep *s = &st->sa[i].stats;
        json_object_set_new(ja, "prefill_tokens", json_integer((json_int_t)s->prefill_tokens));
        json_object_set_new(ja, "prefill_seconds", json_real(s->prefill_seconds));
        json_object_set_new(ja, "decode_tokens", json_integer((json_int_t)s->decode_tokens));
        json_object_set_new(ja, "decode_seconds", json_real(s->decode_seconds));
        json_object_set_new(ja, "peak_rss", json_integer((json_int_t)s->peak_rss));
        if (s->has_rechunk)   /* an engine that is not batch-invariant (docs/DESIGN.md §1.1.1) */
            json_object_set_new(ja, "batch_variance",
                                json_pack("{s:I,s:o}", "rows", (json_int_t)s->rechunk_rows, "max_abs_logit",
                                          isfinite(s->rechunk_max) ? json_real(s->rechunk_max) : json_null()));
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
            json_object_set_new(ja, "routing", json_pack("{s:I,s:I,s:f}", "decisions", (json_int_t)st->sa[i].route_n,
                                                          "differ", (json_int_t)st->sa[i].route_diff, "fraction",
                                                          st->sa[i].route_n ? (double)st->sa[i].route_diff / st->sa[i].route_n : 0.0));
    }
    return ja;
}

/* The plan and the options that shape the measurement: experts, depths, fork, chunk, cross-scoring,
 * sampling, passages, RoPE angles, margins. */
static void meta_plan(json_t *root, const sweep_state *st) {
    const sweep_config *c = st->c;
    const arm *arms = st->arms;
    const proto_hello_rep *h = &arms[c->ref].hello;
    json_t *jdep = json_array();
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
    sweep_put_sample_opts(root, c);
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
}

/* The run's state: wall time, the driver's memory, warnings, journal, resumes, status. */
static void meta_state(json_t *root, const sweep_state *st, const char *status, int complete) {
    const sweep_config *c = st->c;
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
}

/* Writes out_dir/meta.json durably (temp file, fsync, rename). Returns 0 or SWEEP_ERROR. */
int sweep_write_meta(sweep_state *st, const char *status, int complete, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    json_t *root = json_object(), *jarms = json_array();
    meta_provenance(root, st);
    for (int i = 0; i < st->n; i++) json_array_append_new(jarms, meta_arm(st, i));
    json_object_set_new(root, "arms", jarms);
    meta_plan(root, st);
    meta_state(root, st, status, complete);
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

/* sa[i].twin = the first arm j < i with the same configuration (formats, device, engine, model
 * file's sha256), or -1 */
static void find_twins(const arm *arms, int n, sweep_arm *sa) {
    for (int i = 0; i < n; i++) sa[i].twin = workers_twin(arms, i);
}

/* ============================================================================================
 * sweep_run
 * ========================================================================================== */

/* The state's fields that follow from the configuration and the arms' handshakes (st zeroed
 * first; nothing is allocated). Returns 0, or SWEEP_ERROR for options these arms cannot run. */
static int state_init(sweep_state *st, const sweep_config *c, arm *arms, int n, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    st->jn.fd = -1;
    st->meta_k = -1;
    st->c = c;
    st->arms = arms;
    st->n = n;
    st->V = (int)arms[c->ref].hello.n_vocab;
    st->extra = c->cross_score || c->n_sample_temps > 0;
    st->xsamp = c->cross_score && c->n_sample_temps > 0;
    /* MoE routing is compared (and pinned) when every arm runs experts of the reference's shape */
    const proto_hello_rep *hr = &arms[c->ref].hello;
    st->moe = hr->n_expert_used > 0;
    for (int a = 0; a < n; a++)
        if (arms[a].hello.n_expert != hr->n_expert || arms[a].hello.n_expert_used != hr->n_expert_used ||
            arms[a].hello.n_layer != hr->n_layer)
            st->moe = 0;
    st->per_tok = st->moe ? (size_t)hr->n_layer * hr->n_expert_used : 0;
    if (c->pin_experts && !st->moe) {
        return errmsg_set(err, errlen, SWEEP_ERROR, "--pin-experts needs a mixture-of-experts model with the same "
                          "expert count, experts per token and layers in every arm (the reference arm %s has %u "
                          "experts, %u per token)", arms[c->ref].name, hr->n_expert, hr->n_expert_used);
    }
    st->F = c->cross_score ? sweep_f32_arm(arms, n, c->ref) : -1;
    st->pass_base = -1;   /* the passages' baseline: when its base prefix is shorter than the first depth */
    if (c->n_passages && passages_base_depth(c->tokens, c->n_tokens, hr->bos) < c->depths[0])
        st->pass_base = passages_base_depth(c->tokens, c->n_tokens, hr->bos);
    if (c->n_passages && (c->pin_experts || !c->passage_starts || c->passage_len < 1))
        return errmsg_set(err, errlen, SWEEP_ERROR, "--passages: %s", c->pin_experts ? "cannot be combined with "
                          "--pin-experts (the passages' routing is not pinned)" : "no passages planned");
    st->k_journal = -1;

    st->t0 = clock_s();
    time_t wall = c->date ? c->date : time(NULL);
    struct tm tmv;
    if (c->date) gmtime_r(&wall, &tmv);
    else localtime_r(&wall, &tmv);
    strftime(st->date, sizeof st->date, c->date ? "%Y-%m-%dT%H:%M:%S+0000" : "%Y-%m-%dT%H:%M:%S%z", &tmv);
    run_machine_string(st->machine, sizeof st->machine);
    return 0;
}

/* Allocates the state's buffers, each once (state_free frees them, also after a failure here),
 * and finds the twins. Returns 0 or SWEEP_ERROR. */
static int state_alloc(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const size_t n = (size_t)st->n;
    const size_t nr = c->chunk > 1 ? (size_t)c->chunk : 1;
    st->sa = calloc(n, sizeof *st->sa);                             /* [n] */
    st->req = calloc(n, sizeof *st->req);                           /* [n] */
    st->rep = calloc(n, sizeof *st->rep);                           /* [n] */
    st->codes = calloc(n, sizeof *st->codes);                       /* [n] */
    st->rows = calloc(n, sizeof *st->rows);                         /* [n] */
    st->pr = calloc(nr * n, sizeof *st->pr);                        /* [chunk][n] */
    st->bad = calloc(nr * n, sizeof *st->bad);                      /* [chunk][n] */
    st->next = calloc(nr, sizeof *st->next);                        /* [chunk] */
    if (st->moe) st->pin = malloc(sizeof(int32_t) * (size_t)c->chunk * st->per_tok);   /* [chunk][per_tok] */
    st->greedy = calloc(n * (size_t)c->fork_n, sizeof *st->greedy); /* [n][fork_n] */
    st->resumes = json_array();
    if (!st->sa || !st->req || !st->rep || !st->codes || !st->rows || !st->pr || !st->bad || !st->next ||
        (st->moe && !st->pin) || !st->greedy || !st->resumes)
        return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    find_twins(st->arms, st->n, st->sa);
    return 0;
}

static void state_free(sweep_state *st) {
    free(st->sa);
    free(st->req);
    free(st->rep);
    free(st->codes);
    free(st->rows);
    free(st->pr);
    free(st->bad);
    free(st->next);
    free(st->pin);
    pinfile_close(st->pf);
    free(st->greedy);
    json_decref(st->resumes);
}

/* The journal first (a folder another driver holds is left untouched), then the TSVs: created
 * empty, or rebuilt from the journal when resuming; then the first meta.json. *started = 1 once
 * the journal is this run's. */
static int start_folder(sweep_state *st, int *started, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    int ret;
    if (c->pin_file && !c->resume && (ret = sweep_open_pin_file(st, err, errlen))) return ret;   /* before any folder */
    if ((ret = c->resume ? sweep_journal_start_resume(st, err, errlen) : sweep_journal_start_new(st, err, errlen)))
        return ret;
    *started = 1;
    if (c->pin_file && c->resume && (ret = sweep_open_pin_file(st, err, errlen))) return ret;   /* after the journal */
    if ((ret = sweep_tsv_sync(st, err, errlen))) return ret;
    return sweep_write_meta(st, "running", 0, err, errlen);
}

/* Measures every depth not yet journalled; a worker that dies or hangs is restarted and the sweep
 * continues from the last journalled position (every arm is brought back there first). */
static int measure(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    int ret = SWEEP_OK;
    for (int a = 0; a < st->n; a++) st->sa[a].need_full = 1;
    while (st->k_done < c->n_depths) {
        ret = sweep_sync_arms(st, err, errlen);
        if (!ret) ret = sweep_run_depths(st, err, errlen);
        if (ret != SWEEP_FAULT) break;
        ret = sweep_handle_fault(st, err, errlen);
        if (ret == SWEEP_ERROR) st->gave_up = 1;   /* past --max-restarts, or the restart failed */
        if (ret != SWEEP_FAULT) break;
        ret = SWEEP_OK;
    }
    if (ret == SWEEP_OK && st->pf && pinfile_finish(st->pf, err, errlen)) ret = SWEEP_ERROR;
    return ret;
}

/* The end of a started run: the workers' own counters, from the arms still connected (short
 * timeout), and meta.json with the outcome ret, whose message is in e [elen]. Returns ret, or
 * SWEEP_ERROR when meta.json could not be written after a success. */
static int finish_meta(sweep_state *st, int ret, char *e, size_t elen) {
    const sweep_config *c = st->c;
    for (int a = 0; a < st->n; a++) {
        arm *A = &st->arms[a];
        if (!A->connected || !arm_alive(A) || arm_proc_state(A) == 'T') continue;
        st->sa[a].have_stats = workers_stats(A, &st->sa[a].stats, c->warnings);
    }
    if (ret == SWEEP_INTERRUPTED)
        snprintf(e, elen, "interrupted after %d of %d depths", st->k_done, c->n_depths);
    const char *status = ret == SWEEP_OK ? "complete" : e;
    if (ret != SWEEP_OK && c->warnings) {
        char w[2200];
        snprintf(w, sizeof w, "partial results: the sweep stopped after %d of %d depths (%s)", st->k_done,
                 c->n_depths, e);
        json_array_append_new(c->warnings, json_string(w));
    }
    char e3[700];
    int wr = sweep_write_meta(st, status, ret == SWEEP_OK, e3, sizeof e3);
    if (wr && ret == SWEEP_OK) { ret = SWEEP_ERROR; snprintf(e, elen, "%s", e3); }
    else if (wr && st->meta_k != st->k_done) {
        /* e.g. a full disk: the journal counts what was kept; say that meta.json lags behind it */
        size_t l = strlen(e);
        snprintf(e + l, elen - l, "; meta.json could not be updated and still counts %d depths: the journal "
                 "holds %d, which --resume restores", st->meta_k < 0 ? 0 : st->meta_k, st->k_done);
    }
    return ret;
}

/* What the folder keeps. A refused resume measured nothing; its journal keeps what it held. A
 * resume can continue after an interrupt, a worker fault, a failed write (the journal counts what
 * was kept) or a lost connection to an arm; not after a refusal, a non-finite logit or a bad
 * reply, which it would meet again. */
static void outcome(const sweep_state *st, int ret, int started, sweep_outcome *out) {
    int transport = 0;
    for (int a = 0; started && st->codes && a < st->n; a++)
        transport |= st->codes[a] == ARM_E_DIED || st->codes[a] == PROTO_E_TIMEOUT || st->codes[a] == PROTO_E_TRANSPORT;
    out->depths_done = started ? st->k_done : 0;
    out->depths_kept = started ? st->k_done : st->k_journal;
    out->resumable = ret != SWEEP_OK && (started || st->io_failed) &&
                     (ret == SWEEP_INTERRUPTED || st->io_failed || st->gave_up || st->jn.broken || transport);
}

int sweep_run(const sweep_config *c, arm *arms, int n, sweep_outcome *out, char *err, size_t errlen) {
    sweep_state st;
    int ret, started = 0;
    char e[2048] = "";
    if (out) *out = (sweep_outcome){ 0, -1, 0 };
    if ((ret = state_init(&st, c, arms, n, err, errlen))) return ret;
    if ((ret = state_alloc(&st, e, sizeof e))) goto done;
    if (c->test_fault && (ret = sweep_parse_faults(&st, c->test_fault, e, sizeof e))) goto done;
    if ((ret = start_folder(&st, &started, e, sizeof e))) goto done;
    sweep_progress_start(&st);
    ret = measure(&st, e, sizeof e);
done:
    sweep_progress_end(&st.pg);
    ret = sweep_files_close(&st, ret, e, sizeof e);
    if (started) ret = finish_meta(&st, ret, e, sizeof e);
    if (ret != SWEEP_OK) errmsg_set(err, errlen, ret, "%s", e);
    if (out) outcome(&st, ret, started, out);
    state_free(&st);
    return ret;
}
