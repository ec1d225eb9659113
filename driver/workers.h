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

/* The command-line options that name a run's arms besides --arms and say how their workers start
 * and connect, the same for `sweep` and `needle`: --arm NAME=URL, --arm-model NAME[:SPEC]=FILE,
 * --tls-cert/--tls-key/--tls-ca, --launch, --launch-listen, --allow-overcommit, --mmap-weights, --rope-angles,
 * --allow-kv-mismatch, --devices, --kv-resident. Strings are
 * borrowed (argv, or a resumed run's meta.json); the two arrays are malloc'd by workers_arm_opt and
 * freed by workers_arm_opts_free. */
typedef struct {
    const char **remote;      /* [n_remote] "NAME=URL" (--arm) */
    int n_remote;
    const char **arm_models;  /* [n_arm_models] "NAME=FILE" / "NAME:SPEC=FILE" (--arm-model) */
    int n_arm_models;
    const char *tls_cert, *tls_key, *tls_ca;   /* all three or none */
    const char *launch, *launch_listen;
    int allow_overcommit;
    int mmap_weights;         /* local workers map the model file (shared) instead of copying it */
    const char *rope_angles;  /* NULL, "exact" or "f32" (checked by workers_arm_opts_check) */
    int allow_kv_mismatch;    /* --allow-kv-mismatch: run a remote arm whose worker runs other K/V
                               * formats than its name says, labelled by what it runs */
    const char *devices;      /* --devices D1,D2,...: the local llama:SPEC arms' devices, in turn (one
                               * device per worker, no layer split), e.g. "cuda:0,cuda:1"; NULL: none */
    int kv_host;              /* --kv-resident host: those workers keep their KV cache in host memory */
} workers_arm_opts;

/* Their getopt_long entries (the codes workers_arm_opt takes), for a command's option table. */
#define WORKERS_ARM_LONGOPTS                                                                         \
    {"arm", 1, 0, 'A'}, {"arm-model", 1, 0, 'B'}, {"tls-cert", 1, 0, 1001}, {"tls-key", 1, 0, 1002}, \
    {"tls-ca", 1, 0, 1003}, {"launch", 1, 0, 1004}, {"launch-listen", 1, 0, 1005},                    \
    {"allow-overcommit", 0, 0, 1006}, {"rope-angles", 1, 0, 1007}, {"mmap-weights", 0, 0, 1008},      \
    {"allow-kv-mismatch", 0, 0, 1009}, {"devices", 1, 0, 1010}, {"kv-resident", 1, 0, 1011}

/* Takes getopt's code c and its argument: 1 when c is one of the options above (stored in *a), 0 when
 * it is not, -1 out of memory. */
int workers_arm_opt(workers_arm_opts *a, int c, const char *arg);

/* The checks once every option is read: TLS needs all three files, a --launch template must hold
 * {worker}, --launch-listen needs --launch, --rope-angles is exact or f32. 0, or -1 with one line in err (a usage error). */
int workers_arm_opts_check(const workers_arm_opts *a, char *err, size_t errlen);

/* Frees the arrays (not the strings) and clears *a. */
void workers_arm_opts_free(workers_arm_opts *a);

/* The arms of a run into *arms [*n] (appended; the caller frees *arms): the local arms of list
 * (comma-separated specs; NULL: none), the weight arms of --arm-model, the remote arms of --arm,
 * then the reference resolved and every arm given the start/connect options. *tls and *opt are the
 * caller's storage for those options and must outlive the arms. Returns the reference arm's index,
 * or -1 with one line in err (a usage error: a bad spec, an unknown reference). */
int workers_arms_build(const char *list, const char *ref, const workers_arm_opts *a, proto_tls *tls,
                       arm_options *opt, arm **arms, int *n, char *err, size_t errlen);

/* Outcomes (the driver's exit codes, §1.5). */
enum { WORKERS_OK = 0, WORKERS_ERROR = 1, WORKERS_MISMATCH = 3, WORKERS_INTERRUPTED = 130 };

/* Starts and dials arms[n] as above; a remote arm allowed to run other formats than its name says
 * (--allow-kv-mismatch) is then renamed by what it runs (arm_relabel_ran). tmpdir [tmplen] and *tmp_lock receive the temp dir and its
 * lock (unchanged when every arm is remote: the caller initialises them to "" and -1 and releases
 * them with arm_tmpdir_remove, also after a failure); *launch (may be NULL) how the local workers
 * were started (for restarts). warnings (borrowed array, may be NULL) gets the handshake's notes.
 * Returns WORKERS_OK, or WORKERS_ERROR / WORKERS_MISMATCH / WORKERS_INTERRUPTED with one message
 * in err. Allocates nothing the caller must free beyond the arms' own resources (arm_stop_all). */
int workers_start(arm *arms, int n, const workers_opts *o, const volatile sig_atomic_t *stop, char *tmpdir,
                  size_t tmplen, int *tmp_lock, arm_launch *launch, json_t *warnings, char *err, size_t errlen);

/* The worker's own counters at the end of a run (sweep and needle alike): a stats request to a
 * connected arm with a 5 s timeout. Returns 1 with *out filled, or 0: no reply (the counters are
 * then unavailable), or a reply whose values do not add up (arm_check_reply), which is also said on
 * stderr and appended to warnings (may be NULL). */
int workers_stats(arm *a, proto_stats_rep *out, json_t *warnings);

/* An arm's entry in a results folder's meta.json "arms" (sweep and needle alike): name, K/V
 * formats, KV bytes per token, url, remote, weight_arm, its model {path, sha256, arch, n_layer},
 * device; callers append their own keys. A new object the caller owns (json_decref). */
json_t *workers_arm_json(const arm *a);

/* A results folder's meta.json "model" (sweep and needle alike) from the reference arm's hello:
 * path (NULL: "unknown"), sha256, arch, n_vocab, n_ctx, n_layer, tokenizer_hash, and when the hello
 * said them (has_window) window and layers_full_context; callers append their own keys. A new object the caller owns (json_decref). */
json_t *workers_model_json(const char *path, const proto_hello_rep *h);

/* The twin of arms[i] (sweep and needle alike): the first earlier arm configured like it (the same
 * K/V formats, device, engine, git and model file, from the handshakes), whose rows and tokens it
 * must match bit for bit; -1 when none. */
int workers_twin(const arm *arms, int i);

#endif
