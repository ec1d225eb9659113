/* workers.h — bringing up the arms of a run, the same way for `sweep` and `needle`
 * (docs/DESIGN.md §1.3–§1.4): a private temp dir (arm_tmpdir_create) when any arm is local, every
 * local worker spawned (arm_spawn), every arm dialled (arm_connect) and the handshake checked
 * (arm_check_handshake), its notes printed and added to the run's warnings (once: not again when
 * a resumed run restored them).
 * Also the one monotonic clock the driver's progress and timing lines use.
 */
#ifndef STRATA_WORKERS_H
#define STRATA_WORKERS_H

#include <signal.h>
#include <stddef.h>

#include <jansson.h>

#include "driver/arm.h"

#define WORKERS_DIAL_MS  60000                /* a worker loading its model (§1.5) */
#define WORKERS_REQ_MS   (30 * 60 * 1000)     /* hello and tokenize; sweeps scale theirs */

/* What a run's workers need. */
typedef struct {
    const char *worker;      /* strata-worker path (local arms) */
    const char *model;       /* GGUF path (local arms) */
    int threads;             /* per local worker; 0: max(1, online cores / local arms) */
    int prefill, max_context;
    int quiet;               /* no "started" line, no handshake table */
} workers_opts;

/* Outcomes (the driver's exit codes, §1.5). */
enum { WORKERS_OK = 0, WORKERS_ERROR = 1, WORKERS_MISMATCH = 3, WORKERS_INTERRUPTED = 130 };

/* Starts and dials arms[n] as above. tmpdir [tmplen] and *tmp_lock receive the temp dir and its
 * lock (unchanged when every arm is remote: the caller initialises them to "" and -1 and releases
 * them with arm_tmpdir_remove, also after a failure); *launch (may be NULL) how the local workers
 * were started (for restarts). warnings (borrowed array, may be NULL) gets the handshake's notes.
 * Returns WORKERS_OK, or WORKERS_ERROR / WORKERS_MISMATCH / WORKERS_INTERRUPTED with one message
 * in err. Allocates nothing the caller must free beyond the arms' own resources (arm_stop_all). */
int workers_start(arm *arms, int n, const workers_opts *o, const volatile sig_atomic_t *stop, char *tmpdir,
                  size_t tmplen, int *tmp_lock, arm_launch *launch, json_t *warnings, char *err, size_t errlen);

/* Seconds on CLOCK_MONOTONIC. */
double workers_now_s(void);

/* An arm's entry in a results folder's meta.json "arms" (sweep and needle alike): name, K/V
 * formats, KV bytes per token, url, remote, weight_arm, its model {path, sha256, arch, n_layer},
 * device; callers append their own keys. A new object the caller owns (json_decref). */
json_t *workers_arm_json(const arm *a);

#endif
