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
 *   truncate every arm back to d_k.
 * Every depth's rows are flushed, and meta.json rewritten, before the next depth starts, so an
 * interruption or a crash keeps what was measured.
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

/* ---- the run -------------------------------------------------------------------------------- */

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
    int chunk;                  /* tokens per prefill request, >= 1 */
    int ref;                    /* index of the reference arm */
    /* output */
    const char *out_dir;        /* exists; the files are created (truncated) here */
    const char *dump_rows_dir;  /* NULL, or a directory for raw teacher-forced rows (tests):
                                   DIR/<arm>-<depth>.f32 = n_vocab little-endian floats, where
                                   <arm> is the name with '/' and ':' replaced by '_' */
    int quiet;                  /* no progress line */
    size_t recv_max;            /* reply cap (bytes) for prefill replies */
    const volatile sig_atomic_t *stop;  /* raised by a signal: finish cleanly, keep the results */
    json_t *warnings;           /* array (borrowed): the sweep appends its warnings; written to meta */
} sweep_config;

enum { SWEEP_OK = 0, SWEEP_ERROR = 1, SWEEP_INTERRUPTED = 2 };

/* Runs the sweep on arms[n_arms] (connected, with hello replies that passed
 * arm_check_handshake). Writes meta.json (rewritten after every depth with "complete": false,
 * and at the end with true), depths.tsv, forks.tsv and, in per-position mode, positions.tsv into
 * out_dir; collects each arm's stats at the end (while the workers still run).
 * Returns SWEEP_OK; SWEEP_INTERRUPTED when *stop was raised (the rows measured so far are on
 * disk and meta.json says complete: false); SWEEP_ERROR with one message in err (a worker died,
 * a reply did not match the request, a non-finite logit, a write failure), the measured rows
 * again kept. *depths_done (may be NULL) receives the number of depths fully written.
 * Allocates only scratch memory, freed before return. */
int sweep_run(const sweep_config *cfg, arm *arms, int n_arms, int *depths_done, char *err,
              size_t errlen);

#endif
