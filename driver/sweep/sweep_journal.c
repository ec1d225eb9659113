/* sweep_journal.c — the sweep's journal records (the framing is driver/journal.h's), its loud
 * warnings, the TSV files and the text buffers their lines are built in, and --resume: checking a
 * journal against the plan and rebuilding the TSVs from it. See sweep_internal.h. */
#include "driver/sweep/sweep_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "driver/passages.h"
#include "driver/report/report.h"

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
int sweep_jn_append(sweep_state *st, uint32_t type, const journal_buf *b, char *err, size_t errlen) {
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

int sweep_jn_sync(sweep_state *st, char *err, size_t errlen) {
    char e[600];
    if (journal_sync(&st->jn, e, sizeof e)) return errmsg_set(err, errlen, SWEEP_ERROR, "%s", e);
    return 0;
}

/* Appends a warning: printed loudly on stderr, journalled, and added to meta.json's list. arm
 * (or -1) is the arm a twin check fired for (a resumed run does not repeat that check). */
int sweep_warn_loud(sweep_state *st, int arm_i, char *err, size_t errlen, const char *fmt, ...) {
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
    int rc = sweep_jn_append(st, JOURNAL_WARNING, &b, err, errlen);
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
    sweep_put_sample_opts(p, c);
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
int sweep_tsv_put(FILE *f, const char *name, const sweep_config *c, const void *text, size_t len,
                   char *err, size_t errlen) {
    if (len && (!f || fwrite(text, 1, len, f) != len))
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s/%s: %s", c->out_dir, name, strerror(errno));
    return 0;
}

/* fflush + fsync of the TSV files: a completed depth is on disk before meta.json counts it. */
int sweep_tsv_sync(sweep_state *st, char *err, size_t errlen) {
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

/* The end of a run: everything journalled reaches the disk; a failure to close the TSVs is an
 * error (when nothing failed before). */
int sweep_files_close(sweep_state *st, int ret, char *e, size_t elen) {
    const sweep_config *c = st->c;
    char e2[600];
    if (st->jn_open && journal_sync(&st->jn, e2, sizeof e2) && ret == SWEEP_OK) {
        ret = SWEEP_ERROR;
        snprintf(e, elen, "%s", e2);
    }
    journal_close(&st->jn);
    FILE *f[6] = { st->depths, st->forks, st->positions, st->cross, st->samples, st->cross_samples };
    for (int i = 0; i < 6; i++) {
        if (f[i] && ferror(f[i])) st->io_failed = 1;   /* a TSV write failed */
        if (f[i] && (journal_fsync_stream(f[i]) | fclose(f[i])) && ret == SWEEP_OK) {
            st->io_failed = 1;
            ret = errmsg_set(e, elen, SWEEP_ERROR, "cannot write the TSV files in %s: %s", c->out_dir,
                             strerror(errno));
        }
    }
    if (st->passages && ferror(st->passages)) st->io_failed = 1;
    if (st->passages && (journal_fsync_stream(st->passages) | fclose(st->passages)) && ret == SWEEP_OK) {
        st->io_failed = 1;
        ret = errmsg_set(e, elen, SWEEP_ERROR, "cannot write %s/%s: %s", c->out_dir, PASSAGES_FILE,
                         strerror(errno));
    }
    return ret;
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
int sweep_journal_start_new(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    json_t *h = json_object();
    json_object_set_new(h, "format", json_string("strata-journal"));
    json_object_set_new(h, "version", json_integer(1));
    json_object_set_new(h, "plan", plan_json(c, st->arms, st->n));
    json_object_set_new(h, "date", json_string(st->date));
    json_object_set_new(h, "command", sweep_jstr_or(c->command));
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
        st->sa[a].route_n += dn;
        st->sa[a].route_diff += dd;
    }
}

/* The routing counts since the last record, appended to the record b (MoE only); sweep_routing_committed
 * moves them into the totals once the record is written. */
void sweep_jbuf_routing(const sweep_state *st, journal_buf *b) {
    for (int a = 0; st->moe && a < st->n; a++) {
        jbuf_u32(b, st->sa[a].pend_n);
        jbuf_u32(b, st->sa[a].pend_diff);
    }
}

void sweep_routing_committed(sweep_state *st) {
    for (int a = 0; st->moe && a < st->n; a++) {
        st->sa[a].route_n += st->sa[a].pend_n;
        st->sa[a].route_diff += st->sa[a].pend_diff;
        st->sa[a].pend_n = st->sa[a].pend_diff = 0;
    }
}

/* The replay of one journal record r of each type (its payload at rd) below: checks that it
 * continues the records before it and moves st on; with apply, also appends its lines to the TSVs.
 * Returns 0 or SWEEP_ERROR with the message in err. */

static int replay_chunk(sweep_state *st, journal_rd *rd, size_t r, int apply, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    uint32_t lp = 0;
    uint32_t from = jrd_u32(rd), to = jrd_u32(rd);
    double wall = jrd_f64(rd);
    const unsigned char *tp = jrd_str(rd, &lp);
    replay_routing(st, rd);
    if (rd->bad || !c->per_position || st->k_done >= c->n_depths || (int)from != st->pos_done ||
        to <= from || (int)to >= c->depths[st->k_done]) {
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (chunk %u..%u) does "
                          "not continue the records before it", r, from, to);
    }
    int ret = apply ? sweep_tsv_put(st->positions, "positions.tsv", c, tp, lp, err, errlen) : 0;
    st->pos_done = (int)to;
    st->wall_prev = wall;
    return ret;
}

static int replay_depth(sweep_state *st, journal_rd *rd, size_t r, int apply, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    int ret = 0;
    uint32_t lp = 0, ld = 0, lf = 0;
    uint32_t k = jrd_u32(rd), depth = jrd_u32(rd), from = jrd_u32(rd);
    double wall = jrd_f64(rd);
    const unsigned char *tp = jrd_str(rd, &lp);
    const unsigned char *td = jrd_str(rd, &ld);
    const unsigned char *tf = jrd_str(rd, &lf);
    uint32_t lx = 0, ls = 0, lxs = 0;
    const unsigned char *tx = NULL, *ts = NULL, *txs = NULL;
    if (st->extra) {
        tx = jrd_str(rd, &lx);
        ts = jrd_str(rd, &ls);
    }
    if (st->xsamp) txs = jrd_str(rd, &lxs);
    uint32_t lq = 0;
    const unsigned char *tq = c->n_passages ? jrd_str(rd, &lq) : NULL;
    replay_routing(st, rd);
    if (rd->bad || (int)k != st->k_done || k >= (uint32_t)c->n_depths || (int)depth != c->depths[k] ||
        (int)from != st->pos_done || (lp && !c->per_position)) {
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (depth %u) does not "
                          "continue the records before it", r, depth);
    }
    if (apply && !(ret = sweep_tsv_put(st->positions, "positions.tsv", c, tp, lp, err, errlen)) &&
        !(ret = sweep_tsv_put(st->depths, "depths.tsv", c, td, ld, err, errlen)))
        ret = sweep_tsv_put(st->forks, "forks.tsv", c, tf, lf, err, errlen);
    if (apply && !ret && st->extra && !(ret = sweep_tsv_put(st->cross, "cross.tsv", c, tx, lx, err, errlen)))
        ret = sweep_tsv_put(st->samples, "samples.tsv", c, ts, ls, err, errlen);
    if (apply && !ret && st->xsamp)
        ret = sweep_tsv_put(st->cross_samples, "cross_samples.tsv", c, txs, lxs, err, errlen);
    if (apply && !ret && c->n_passages) ret = sweep_tsv_put(st->passages, PASSAGES_FILE, c, tq, lq, err, errlen);
    st->k_done++;
    st->pos_done = (int)depth;
    st->wall_prev = wall;
    return ret;
}

/* The passages' baseline: before anything else is measured. */
static int replay_passages(sweep_state *st, journal_rd *rd, size_t r, int apply, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    uint32_t lp = 0;
    uint32_t depth = jrd_u32(rd);
    const unsigned char *tp = jrd_str(rd, &lp);
    if (rd->bad || !c->n_passages || st->pass_base_done || st->k_done || st->pos_done ||
        (int)depth != st->pass_base) {
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu (the passages' "
                          "baseline) does not belong where it is", r);
    }
    int ret = apply ? sweep_tsv_put(st->passages, PASSAGES_FILE, c, tp, lp, err, errlen) : 0;
    st->pass_base_done = 1;
    return ret;
}

/* A warning (of one arm, or NO_ARM): restored into meta.json's warnings and the twin check. */
static int replay_warning(sweep_state *st, journal_rd *rd, size_t r, int apply, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    uint32_t lp = 0;
    uint32_t a = jrd_u32(rd);
    const unsigned char *tp = jrd_str(rd, &lp);
    if (rd->bad || (a != NO_ARM && a >= (uint32_t)st->n))
        return errmsg_set(err, errlen, SWEEP_ERROR, "cannot resume: journal record %zu is a bad warning", r);
    if (apply && a != NO_ARM) st->sa[a].twin_warned = 1;
    if (apply && c->warnings) json_array_append_new(c->warnings, json_stringn((const char *)tp, lp));
    return 0;
}

/* An earlier resumption: restored into meta.json's resumes. */
static void replay_resume(sweep_state *st, journal_rd *rd, int apply) {
    uint32_t lp = 0;
    uint32_t k = jrd_u32(rd), pos = jrd_u32(rd);
    const unsigned char *tp = jrd_str(rd, &lp);
    if (apply && !rd->bad)
        json_array_append_new(st->resumes, json_pack("{s:s%,s:i,s:i}", "date", (const char *)tp,
                                                     (size_t)lp, "depths_done", (int)k, "position", (int)pos));
}

/* Replays journal records 1.. (recs [n_rec]) from an empty state: checks that each continues the
 * ones before it and sets k_done, pos_done and wall_prev; with apply, also appends their lines to
 * the (rebuilt) TSVs and restores the warnings, twin checks and resumptions. Returns 0 or
 * SWEEP_ERROR naming the record. */
static int replay_records(sweep_state *st, const journal_rec *recs, size_t n_rec, int apply, char *err,
                          size_t errlen) {
    int ret = 0;
    st->k_done = st->pos_done = 0;
    st->pass_base_done = 0;
    st->wall_prev = 0;
    for (int a = 0; st->moe && a < st->n; a++) st->sa[a].route_n = st->sa[a].route_diff = 0;
    for (size_t r = 1; r < n_rec && !ret; r++) {
        journal_rd rd = { recs[r].data, recs[r].len, 0, 0 };
        switch (recs[r].type) {
        case JOURNAL_CHUNK: ret = replay_chunk(st, &rd, r, apply, err, errlen); break;
        case JOURNAL_DEPTH: ret = replay_depth(st, &rd, r, apply, err, errlen); break;
        case JOURNAL_PASSAGES: ret = replay_passages(st, &rd, r, apply, err, errlen); break;
        case JOURNAL_WARNING: ret = replay_warning(st, &rd, r, apply, err, errlen); break;
        case JOURNAL_RESUME: replay_resume(st, &rd, apply); break;
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
int sweep_journal_start_resume(sweep_state *st, char *err, size_t errlen) {
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
    if ((ret = sweep_tsv_sync(st, err, errlen))) goto done;
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
    ret = sweep_jn_append(st, JOURNAL_RESUME, &b, err, errlen);
    free(b.p);
    if (!ret) ret = sweep_jn_sync(st, err, errlen);
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
 * Text buffers for TSV lines (open_memstream)
 * ========================================================================================== */

int sweep_tb_open(sweep_text *t) {
    t->p = NULL;
    t->n = 0;
    t->f = open_memstream(&t->p, &t->n);
    return t->f ? 0 : -1;
}
/* Closes the stream (t->p [t->n] stays, the caller frees it); -1 when writing failed. */
int sweep_tb_close(sweep_text *t) {
    int bad = !t->f || ferror(t->f);
    if (t->f && fclose(t->f)) bad = 1;
    t->f = NULL;
    return bad ? -1 : 0;
}
void sweep_tb_free(sweep_text *t) {
    if (t->f) fclose(t->f);
    free(t->p);
    memset(t, 0, sizeof *t);
}
