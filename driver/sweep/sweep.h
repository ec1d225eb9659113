/* sweep.h — the one-pass sweep over nested prefixes (docs/DESIGN.md §2), run in lockstep on every arm,
 * and the results files it writes as it goes (meta.json, depths.tsv, positions.tsv, forks.tsv).
 *
 * for k = 1..K:
 *   prefill tokens [d_{k-1}, d_k) on every arm, in chunks of `chunk` tokens, the same request to
 *   all arms at once (per-position mode: every row comes back; each position's rows are compared
 *   against the reference's with stats_compare_rows and dropped);
 *   teacher-forced row = the row at position d_k - 1 (next token = token d_k) -> depths.tsv;
 *   fork probe: every arm generates fork_n tokens greedily; fork index = first i where an arm's
 *   tokens differ from the reference's, else fork_n (censored) -> depths.tsv, forks.tsv;
 *   truncate every arm back to d_k;
 *   optionally (cfg.n_sample_temps): sampled fork probes at each temperature, the same seed on
 *   every arm (common random numbers, kernels/sample.h) -> samples.tsv; (cfg.cross_score) every
 *   arm's greedy continuation scored teacher-forced by the reference and the f32 arm (truncate
 *   them to d_k - 1, prefill [token d_k - 1, continuation] with every row) -> cross.tsv; then
 *   truncate back to d_k again; (cfg.n_passages) every arm scores each target passage after the
 *   prefix and is truncated back to d_k (driver/passages.h; once at the start after the base
 *   prefix too) -> passages.tsv.
 * Journal (journal.h, records in sweep_journal.c): every per-position chunk and every completed depth is
 * appended to DIR/journal as a checksummed record holding exactly the TSV lines it adds; a depth's
 * record is fsync'd before the TSVs get its lines, before meta.json counts it and before the
 * progress line claims it. `sweep --resume` (cfg.resume) checks the journal against the plan,
 * rebuilds the TSVs from it byte for byte and continues: fresh workers are prefilled (no rows)
 * to the last journalled position, and the rows that follow are bit-identical to an
 * uninterrupted run's (the one-pass property below).
 *
 * Worker faults: a local worker that exits, drops its connection or does not answer within the
 * request timeout (--request-timeout, else scaled from the measured rate: see
 * sweep_request_timeout_ms) is reported (arm, request, its last stderr lines), killed, started
 * afresh, and the sweep continues from the last journalled position, at most cfg.max_restarts
 * times; then the sweep stops with SWEEP_ERROR, keeping what was measured.
 *
 * Arms with the same configuration (K/V formats, device, engine, git) must produce bit-identical
 * rows and tokens: each such arm is compared with memcmp to the first arm of its configuration,
 * and a difference is a loud warning on stderr and in meta.json's "warnings".
 */
#ifndef STRATA_SWEEP_H
#define STRATA_SWEEP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "driver/arm.h"

/* ---- planning (pure) ------------------------------------------------------------------------ */

/* d_k = round(k * D / K) for k = 1..K (halves round up) into depths[K]. Needs 1 <= K <= D: then
 * the depths strictly increase and d_K = D. Returns 0, or -1 when K < 1 or D < K. */
int sweep_depths(int D, int K, int *depths);

/* The deepest prefix D = min(n_tokens - 1 (the true next token must exist), max_depth (0: no
 * limit), n_ctx - fork_n (room for the fork probe)), checked against K depths. Returns D, or -1
 * with one clear message in err: the document is too short for K depths, or an explicit
 * max_depth exceeds the document or the context. */
int sweep_max_depth(size_t n_tokens, int max_depth, uint64_t n_ctx, int fork_n, int K, char *err,
                    size_t errlen);

/* Fork index of two greedy streams a[n], b[n]: the first i with a[i] != b[i] (*censored = 0), or
 * n when they are identical (*censored = 1). */
int sweep_fork_index(const int32_t *a, const int32_t *b, int n, int *censored);

/* The seed of the sampled fork probe at temperature index j of depth `depth`:
 * mix(base ^ mix(depth * 256 + j)), mix(x) = splitmix64's output for state x (add
 * 0x9e3779b97f4a7c15, then its finaliser). Pure. */
uint64_t sweep_sample_seed(uint64_t base, int depth, int j);

/* The f32 scorer of cross-scoring: the first arm other than the reference whose K and V are both
 * "f32" and that is not configured like an earlier arm (a repeat), or -1. */
int sweep_f32_arm(const arm *arms, int n, int ref);


/* ---- the run -------------------------------------------------------------------------------- */

#define SWEEP_MAX_TEMPS 16   /* temperatures of the sampled fork probes */

typedef struct {
    /* provenance, copied into meta.json (NULL -> "unknown") */
    const char *tag, *command, *git, *model_path;
    const char *doc_path, *doc_description;
    /* the document */
    const int32_t *tokens;      /* [n_tokens], every id < the arms' n_vocab */
    size_t n_tokens;
    /* the plan */
    const int *depths;          /* [n_depths], strictly increasing, depths[K-1] + fork_n <= n_ctx */
    int n_depths;
    int fork_n;                 /* >= 1 */
    int per_position;           /* stream and compare every row */
    int pin_experts;            /* MoE models: every other arm replays the reference arm's experts at
                                   the teacher-forced positions (docs/DESIGN.md §2.6) */
    const char *pin_file;       /* with pin_experts: NULL, or a routing file (driver/pinfile.h) that
                                   every arm replays when it exists, else the reference's routing is
                                   recorded into it */
    int chunk;                  /* tokens per prefill request, >= 1 */
    int worker_chunk;           /* the workers' prefill chunk (--prefill, else the worker's default
                                   SWEEP_WORKER_CHUNK), >= 1: for request timeouts only */
    int ref;                    /* index of the reference arm */
    int compare_threads;        /* threads comparing a reply's rows (1..SWEEP_COMPARE_THREADS_MAX;
                                   the numbers do not depend on it) */
    /* optional measurements after each depth's greedy fork probe (docs/DESIGN.md §2.2); all off:
     * the sweep and its files are exactly those of a run without these fields */
    int cross_score;            /* score every arm's greedy continuation teacher-forced under the
                                   reference arm and the f32 arm (sweep_f32_arm) -> cross.tsv */
    const double *sample_temps; /* [n_sample_temps] temperatures > 0 of the sampled fork probes
                                   (common random numbers: the same seed on every arm) -> samples.tsv */
    int n_sample_temps;
    double top_p;               /* nucleus cut of the sampled probes, in (0, 1] (1: none) */
    uint64_t sample_seed;       /* base seed of the sampled probes (sweep_sample_seed) */
    int n_passages;             /* the controlled depth design (driver/passages.h): 0 off, else N
                                   passages scored after every depth's prefix -> passages.tsv */
    int passage_len;            /* L tokens each */
    const int *passage_starts;  /* [n_passages] their first tokens (passages_plan) */
    /* recorded in meta.json for the report only (docs/DESIGN.md §4.15): 0 = not given */
    double margin_ppl, margin_top1;   /* "margins": {"ppl_pct", "top1_pp"} */
    const char *rope_angles;    /* "exact" or "f32" (NULL: exact), meta.json "rope_angles" */
    /* output */
    const char *out_dir;        /* exists; the files are created (truncated) here */
    const char *dump_rows_dir;  /* NULL, or a directory for raw teacher-forced rows (tests):
                                   DIR/<arm>-<depth>.f32 = n_vocab little-endian floats, where
                                   <arm> is the name with '/' and ':' replaced by '_' */
    int quiet;                  /* no progress line */
    size_t recv_max;            /* reply cap (bytes) for prefill replies */
    const volatile sig_atomic_t *stop;  /* raised by a signal: finish cleanly, keep the results */
    json_t *warnings;           /* array (borrowed): the sweep appends its warnings; written to meta */
    time_t date;                /* the run's date for meta.json (0: now; SOURCE_DATE_EPOCH in tests);
                                   a resumed run keeps the date its journal records */
    /* journal */
    int resume;                 /* continue out_dir's journal (it must exist and match the plan) */
    json_t *invocation;         /* borrowed or NULL: {"argv":[...],"cwd":...}, kept in the journal
                                   header (what --resume re-runs) and meta.json */
    /* worker faults */
    const arm_launch *launch;   /* how the local workers were started; NULL: never restart */
    int max_restarts;           /* worker restarts allowed in this run */
    int dial_ms;                /* dial timeout for a restarted worker */
    int request_timeout_ms;     /* > 0: every request's timeout; 0: sweep_request_timeout_ms */
    const char *test_fault;     /* tests only (STRATA_TEST_FAULT), NULL: none. Comma-separated:
                                   kill@N:ARM / stop@N:ARM  SIGKILL / SIGSTOP arm index ARM's worker
                                                          before the N-th request batch (from 1);
                                   die@N                  the driver SIGKILLs itself before batch N;
                                   tear@SEQ               journal record SEQ is written half, then
                                                          the driver SIGKILLs itself */
} sweep_config;

#define SWEEP_COMPARE_THREADS_MAX 64

enum { SWEEP_OK = 0, SWEEP_ERROR = 1, SWEEP_INTERRUPTED = 2 };

/* What a sweep_run left in its folder, for the driver's closing lines. */
typedef struct {
    int depths_done;   /* depths journalled and written (over all sessions); 0 when the run did not
                          start (a refused resume measured nothing and touched nothing) */
    int depths_kept;   /* depths the folder's journal holds: depths_done once started; for a refused
                          resume what its journal holds; -1 when unknown (no journal of this run) */
    int resumable;     /* 1: `sweep --resume DIR` can continue: the journal is this run's and it
                          stopped on an interrupt, a worker fault past the restarts, a failed write or
                          a lost connection; 0 after success, a refusal (the journal header not
                          written, the folder another driver's, the plan changed), a non-finite logit
                          or a bad reply (a resume would meet them again) */
} sweep_outcome;

/* Request timeouts when none is given: before anything is measured SWEEP_TIMEOUT_FIRST_MS; then
 * SWEEP_TIMEOUT_FACTOR x the predicted time (the request's tokens x the slowest seconds per token
 * seen so far for its kind), clamped to [SWEEP_TIMEOUT_MIN_MS, SWEEP_TIMEOUT_MAX_MS]. */
#define SWEEP_TIMEOUT_FIRST_MS (30 * 60 * 1000)
#define SWEEP_TIMEOUT_MIN_MS   (60 * 1000)
#define SWEEP_TIMEOUT_MAX_MS   (6 * 3600 * 1000)
#define SWEEP_TIMEOUT_FACTOR   10.0

/* The timeout (ms) of a request of `tokens` tokens: override_ms when > 0, else as above with
 * spt = seconds per token measured so far (<= 0: nothing measured yet). Pure. */
int sweep_request_timeout_ms(double spt, double tokens, int override_ms);
/* The tokens a worker computes for a prefill of m tokens after its first `at`: m, plus the
 * at mod worker_chunk tokens an aligned backend (llama.cpp, worker/engine.h) re-runs from its
 * chunk's start, so that a slow device's first request after a depth or a restart is not timed
 * out as if it were m tokens. A batch-invariant worker re-runs nothing: an upper bound there. */
double sweep_prefill_tokens(int at, int m, int worker_chunk);
#define SWEEP_WORKER_CHUNK 512   /* strata-worker's --prefill default (worker/main.c) */

/* Runs the sweep on arms[n_arms] (connected, with hello replies that passed
 * arm_check_handshake). Writes journal (created, or with cfg.resume continued), meta.json
 * (rewritten after every depth with "status": "running", "complete": false, and at the end with
 * the outcome), depths.tsv, forks.tsv and, in per-position mode, positions.tsv into out_dir;
 * collects each arm's stats at the end (while the workers still run).
 * Returns SWEEP_OK; SWEEP_INTERRUPTED when *stop was raised (the rows measured so far are on
 * disk and meta.json says complete: false); SWEEP_ERROR with one message in err (a worker fault
 * after the last allowed restart, a reply that did not match the request, a non-finite logit, a
 * write or fsync failure, a journal that does not belong to this plan), the measured rows again
 * kept. *out (may be NULL) says what the folder keeps and whether a resume can continue. A worker
 * may be restarted (arms[i] then holds the new process). Allocates only scratch memory, freed
 * before return. */
int sweep_run(const sweep_config *cfg, arm *arms, int n_arms, sweep_outcome *out, char *err,
              size_t errlen);

/* ---- the command (driver/sweep/sweep_cmd.c, its command line in driver/sweep/sweep_cli.c) ---------------- */

/* strata-driver sweep ARGS: argv[0] is "sweep". command_line = the driver's argv, shell-quoted,
 * and git = the driver build's git hash (both for meta.json); stop = the flag the driver's signal
 * handler raises. Returns the driver's exit code (0 ok, 1 runtime error, 2 usage error, 3 arms
 * mismatch, 130 interrupted). */
int sweep_main(int argc, char **argv, const char *command_line, const char *git, volatile sig_atomic_t *stop);

/* The usage text of the command. */
void sweep_usage(FILE *f);

#endif
