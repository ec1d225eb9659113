/* sweep_internal.h — what the files of the sweep module share; nothing outside driver/sweep*.c
 * includes it (the public API is sweep.h).
 *
 * The module, in the order a run goes:
 *   sweep.c          planning (pure), meta.json, and sweep_run: the state, the journal, the
 *                    measuring loop with its worker restarts, the closing meta.json
 *   sweep_journal.c  the journal's records (writing, replaying them for --resume), the warnings,
 *                    the TSV files and the text buffers their lines are built in
 *   sweep_call.c     requests to every arm: timeouts, test hooks, worker faults and restarts,
 *                    prefill / truncate / generate, bringing the arms to the journalled position
 *   sweep_depth.c    the progress line, comparing rows, and sweep_run_depths: every depth's
 *                    prefill, teacher-forced row, fork probe and commit
 *   sweep_extras.c   the optional measurements after a depth's fork probe: sampled probes,
 *                    cross-scoring, the passages
 *
 * Ownership: sweep_run owns the one sweep_state of a run (on its stack): it allocates every
 * buffer the state points to once, before anything is measured, and frees them all before it
 * returns; no function here allocates or frees them. Replies in st->rep belong to the caller of
 * the request that filled them (free them with sweep_free_reps) unless a function's comment says
 * it freed them. A sweep_text is opened and freed by the function that builds its lines. Every
 * other function here allocates nothing that outlives the call.
 */
#ifndef STRATA_SWEEP_INTERNAL_H
#define STRATA_SWEEP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "driver/arm.h"
#include "driver/journal.h"
#include "driver/pinfile.h"
#include "driver/stats.h"
#include "driver/sweep/sweep.h"

enum { SWEEP_FAULT = 3 };   /* internal: a local worker died or hung; restart it and continue */

/* the kind of a request, for its timeout and the measured rate (sweep_call) */
enum { SWEEP_KIND_PREFILL, SWEEP_KIND_DECODE, SWEEP_KIND_OTHER };

/* Progress on stderr (sweep_depth.c): a bar redrawn with \r on a terminal, else a plain line
 * every 5 s. */
typedef struct {
    int quiet, tty;
    double t0, last;
    long total;        /* prefill tokens of the whole sweep */
    long base;         /* position this session started from (the rate counts from here) */
    int n_depths;
    int drawn;         /* a \r line is on screen */
} sweep_progress;

#define SWEEP_MAX_FAULTS 8
typedef struct {
    char action;      /* 'k' kill, 's' stop, 'd' the driver dies, 't' torn journal record */
    long at;          /* request batch number (k, s, d) or record sequence number (t) */
    int arm;
} sweep_test_fault;

/* One arm's state in a sweep (sweep_state.sa [n], one allocation). */
typedef struct {
    int failed;               /* its worker died or hung in the last call */
    int need_full;            /* its stream must be rebuilt from position 0 */
    int twin;                 /* the first arm configured like it (find_twins), -1: none */
    int twin_warned;          /* a twin difference was reported (once per arm) */
    stats_row tf;             /* teacher-forced metrics of the current depth */
    int fork, censored;       /* the greedy fork probe of the current depth */
    /* MoE routing (docs/DESIGN.md §2.6) */
    uint64_t route_n, route_diff;   /* (token, layer) decisions compared with the reference's,
                                       and those whose expert set differed: journalled */
    uint32_t pend_n, pend_diff;     /* the same since the last journal record */
    /* meta.json */
    proto_stats_rep stats;    /* the worker's counters at the end (have_stats) */
    int have_stats;
} sweep_arm;

/* A growing text buffer for TSV lines (open_memstream): p [n] once closed. */
typedef struct {
    char *p;
    size_t n;
    FILE *f;
} sweep_text;

/* The state of one run: sweep_run's, on its stack (see Ownership above). */
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
    sweep_arm *sa;            /* [n] each arm's own state */
    /* the buffers below stay arrays over the arms, in the shapes their users take: arm_call_all's
     * requests, replies and codes [n], sweep_compare_block's rows [n] and its results [chunk][n]
     * (the rows of all arms side by side), score_texts' continuations [n][fork_n] */
    proto_msg *req, *rep;     /* [n] */
    int *codes;               /* [n] each arm's code from the last call */
    const float **rows;       /* [n] pointers into the replies */
    stats_row *pr;            /* [chunk][n] per-position metrics of one prefill reply (row 0: also the
                                 teacher-forced row's, copied into sa[a].tf) */
    int *bad;                 /* [chunk][n] pairs stats_compare_rows refused */
    int32_t *next;            /* [chunk] the true next token of each row */
    /* MoE routing (docs/DESIGN.md §2.6): moe = every arm reports experts of the reference's shape */
    int moe;
    size_t per_tok;           /* routing entries per token: n_layer * n_expert_used */
    int32_t *pin;             /* [chunk][per_tok] the reference's experts of one request (pinned mode) */
    pinfile *pf;              /* --pin-experts=FILE: replayed or being recorded; NULL: none */
    /* meta.json */
    char date[64], machine[512];
    double t0, wall_prev;     /* this session's start; seconds of earlier sessions */
    json_t *resumes;          /* [{"date","depths_done","position"}] from the journal */
    /* requests */
    double spt_prefill, spt_decode;   /* slowest seconds per token measured so far (0: none) */
    long n_calls;
    int restarts;
    char fault[2048];         /* the last worker fault, for messages */
    sweep_test_fault faults[SWEEP_MAX_FAULTS];
    int n_faults;
    sweep_progress pg;
} sweep_state;

/* ---- sweep.c ---------------------------------------------------------------------------------- */

/* json_string(s), or "unknown" for NULL */
json_t *sweep_jstr_or(const char *s);
/* The sampled fork probes' options (when there are any) into o: meta.json and the journal header. */
void sweep_put_sample_opts(json_t *o, const sweep_config *c);
/* Writes out_dir/meta.json durably (temp file, fsync, rename). Returns 0 or SWEEP_ERROR. */
int sweep_write_meta(sweep_state *st, const char *status, int complete, char *err, size_t errlen);

/* ---- sweep_journal.c -------------------------------------------------------------------------- */

/* Appends a record (test hook tear@SEQ: written torn, then the driver is killed). Returns 0 or
 * SWEEP_ERROR. */
int sweep_jn_append(sweep_state *st, uint32_t type, const journal_buf *b, char *err, size_t errlen);
int sweep_jn_sync(sweep_state *st, char *err, size_t errlen);
/* A warning: printed loudly on stderr, journalled, and added to cfg.warnings. arm_i (or -1): the
 * arm a twin check fired for. Returns 0 or SWEEP_ERROR. */
int sweep_warn_loud(sweep_state *st, int arm_i, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Writes text [len] to a TSV file f (named name, for the message). Returns 0 or SWEEP_ERROR. */
int sweep_tsv_put(FILE *f, const char *name, const sweep_config *c, const void *text, size_t len,
                  char *err, size_t errlen);
/* fflush + fsync of every open TSV file. Returns 0 or SWEEP_ERROR (st->io_failed set). */
int sweep_tsv_sync(sweep_state *st, char *err, size_t errlen);
/* At the end of a run: syncs and closes the journal and the TSV files. Returns ret, or
 * SWEEP_ERROR with the message in e [elen] when ret was SWEEP_OK and one of them failed. */
int sweep_files_close(sweep_state *st, int ret, char *e, size_t elen);
/* A new run: creates the journal with its header, then the TSVs. */
int sweep_journal_start_new(sweep_state *st, char *err, size_t errlen);
/* --resume: opens (locks) the journal, checks it against the plan, rebuilds the TSVs from it and
 * journals the resumption. Allocates only scratch, freed before return. */
int sweep_journal_start_resume(sweep_state *st, char *err, size_t errlen);
/* MoE: the routing counts since the last record, appended to b; once b is journalled,
 * sweep_routing_committed moves them into the totals. */
void sweep_jbuf_routing(const sweep_state *st, journal_buf *b);
void sweep_routing_committed(sweep_state *st);
/* sweep_text: open (empty), close (t->p [t->n] stays: the caller frees it with sweep_tb_free);
 * both return 0, or -1 when out of memory. sweep_tb_free also closes an open stream. */
int sweep_tb_open(sweep_text *t);
int sweep_tb_close(sweep_text *t);
void sweep_tb_free(sweep_text *t);

/* ---- sweep_call.c ----------------------------------------------------------------------------- */

void sweep_free_reps(proto_msg *rep, int n);
/* Parses STRATA_TEST_FAULT into st->faults. Returns 0 or SWEEP_ERROR. */
int sweep_parse_faults(sweep_state *st, const char *spec, char *err, size_t errlen);
/* Sends st->req to every arm; the replies are in st->rep (freed on failure). Returns 0,
 * SWEEP_INTERRUPTED, SWEEP_FAULT (local workers died or hung: st->failed, st->fault) or
 * SWEEP_ERROR. */
int sweep_call(sweep_state *st, int kind, double tokens, const char *what, char *err, size_t errlen);
/* After SWEEP_FAULT: restarts the failed workers. Returns SWEEP_FAULT (continue), SWEEP_INTERRUPTED
 * or SWEEP_ERROR. */
int sweep_handle_fault(sweep_state *st, char *err, size_t errlen);
/* One prefill of positions pos..pos+m-1 on every arm (rebuild: on the arms marked need_full);
 * replies in st->rep. */
int sweep_prefill_step(sweep_state *st, int rebuild, int pos, int m, uint32_t rows, int count,
                       const char *what, char *err, size_t errlen);
/* MoE: the routing of m tokens in st->rep into the pending counts. */
int sweep_count_routing(sweep_state *st, int m, char *err, size_t errlen);
/* --pin-experts=FILE: opens it into st->pf (closed by sweep_run). */
int sweep_open_pin_file(sweep_state *st, char *err, size_t errlen);
/* Brings every arm to st->pos_done (rebuilding those marked need_full). */
int sweep_sync_arms(sweep_state *st, char *err, size_t errlen);
/* Checks a prefill reply against its request. Returns 0 or SWEEP_ERROR. */
int sweep_check_prefill(const arm *a, const proto_msg *rep, uint64_t n_past, uint32_t V, uint32_t rows,
                        char *err, size_t errlen);
/* Truncates the arms with which[a] (NULL: every arm) to depth; the replies are freed. */
int sweep_truncate_arms(sweep_state *st, int depth, const int *which, const char *why, char *err,
                        size_t errlen);
/* Every arm generates fork_n tokens at temperature T; the replies are kept in st->rep (the caller
 * frees them) unless it fails. */
int sweep_generate_all(sweep_state *st, int d, double T, double top_p, uint64_t seed, char *err,
                       size_t errlen);

/* ---- sweep_depth.c ---------------------------------------------------------------------------- */

void sweep_progress_start(sweep_state *st);
void sweep_progress_end(sweep_progress *p);
/* Compares rows 0..n_rows-1 of every arm (base[n], each [n_rows][V]) against the reference's:
 * out [n_rows][n], bad [n_rows][n], next [n_rows] are the caller's. Returns 0 or SWEEP_ERROR. */
int sweep_compare_block(const sweep_state *st, const float *const *base, int pos, int n_rows, stats_row *out,
                        int *bad, int32_t *next, char *err, size_t errlen);
/* Checks one position's comparison (rows[n], bad[n]): non-finite logits, twins. */
int sweep_check_position(sweep_state *st, const float *const *rows, const int *bad, int pos, int depth_for_msg,
                         char *err, size_t errlen);
/* Measures depths k_done.. from position pos_done on, journalling as it goes. */
int sweep_run_depths(sweep_state *st, char *err, size_t errlen);

/* ---- sweep_extras.c --------------------------------------------------------------------------- */

/* The sampled fork probes of depth d: samples.tsv lines into out, cross_samples.tsv into xout. */
int sweep_sampled_probes(sweep_state *st, int d, FILE *out, FILE *xout, char *err, size_t errlen);
/* Cross-scoring of the greedy continuations st->greedy at depth d: cross.tsv lines into out. */
int sweep_cross_score(sweep_state *st, int d, FILE *out, char *err, size_t errlen);
/* The passages after the d tokens of the prefix: their passages.tsv lines into tq (opened here;
 * the caller frees it with sweep_tb_free). */
int sweep_run_passages(sweep_state *st, int d, sweep_text *tq, char *err, size_t errlen);
/* The passages' baseline (every arm at 0), journalled before its lines reach passages.tsv. */
int sweep_passages_baseline(sweep_state *st, char *err, size_t errlen);

#endif
