/* arm.h — the driver's arms: one strata-worker each, either spawned here (local, on an ipc://
 * socket in a private temp dir) or already running elsewhere (remote, tcp://). This module parses
 * the arms list, starts and dials the workers, checks their handshakes against each other, sends
 * the same kind of request to every arm at once, and stops and reaps the workers.
 *
 * Arm specs (the --arms list, comma separated):
 *   f16          K and V stored as f16
 *   int8/f16     K int8, V f16
 *   k:int8       K int8, V in the reference arm's V format (a K-only ablation)
 *   v:int8       V int8, K in the reference arm's K format
 *   int8+f16@0+f16@-1   a mix (kvfmt.h): here K and V int8 except the first and last layers
 *                (f16); int8+f16@h0: KV head 0 f16 in every layer; f16@0-3:h1 layers 0..3 of head
 *                1; it may stand for F in all the forms above (mix/f16, k:mix)
 *   q4_0+rot     a rotated format (kvfmt.h: +rot the Hadamard transform of each 64-value block,
 *                +roth of the whole head); in a mix, q4_0+rot@1-28+f16 or q4_0@1-28+rot+f16
 *   kivi4-g16-r64  KIVI-style 4-bit (kivi.h: K per channel over groups of 16 tokens, V per token,
 *                the 64+ most recent tokens in f16); kivi2 / kivi4 alone: G 32, R 128
 *   llama:SPEC   any form above run by llama.cpp instead of strata's own engine: the worker is
 *                started with --backend llama (a strata-worker built by `make llama`; llama.cpp's
 *                formats only: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1, no mixes), e.g.
 *                llama:f16, llama:q8_0/f16; the arm's name keeps the prefix, so every table says
 *                which engine ran it
 *   ref:SPEC     any form above run by strata's plain C reference pass (--backend ref,
 *                kernels/backend_ref.c: one thread, dense models only; the same bits as strata's
 *                own engine, so a ref:f16 arm beside f16 differs by nothing: a check of the kernels)
 * Weight arms (--arm-model, arm_add_model): "NAME=FILE" runs FILE instead of the run's --model, with
 * the reference arm's K and V formats; "NAME:SPEC=FILE" with SPEC's (any form above). NAME is free
 * (printable, no spaces, quotes, commas, ':', '#', '='); FILE is everything after the first '='.
 * Such an arm must share the tokenizer (tokenizer_hash, n_vocab, bos), not the weights.
 * Format names are kvfmt.h's KV_FMT_NAMES (f32 bf16 f16 int8 q8_0 q4_0 q4_0r fp8 q4_1 q5_0 q5_1
 * iq4_nl e5m2 e4m3s e5m2s nvfp4 mxfp4), each also with +rot or +roth (q4_0r = q4_0+roth). An arm's name is its spec; a
 * repeated name gets "#2", "#3", ... (arms "f16,int8,f16" are named f16, int8, f16#2).
 *
 * Process handling: a local worker runs in its own process group (a Ctrl-C at the terminal reaches
 * only the driver, which then stops the workers itself) and gets SIGKILL if the driver dies
 * (PR_SET_PDEATHSIG). Its stderr goes to a log file in the temp dir (its stdout, which in listen
 * mode only says where it listens, to /dev/null).
 *
 * Launched arms (arm_options.launch, the driver's --launch TEMPLATE): the local arm's worker is
 * started through a cluster's own tool, `/bin/sh -c TEMPLATE` with {worker} replaced by the worker's
 * command line (each word single-quoted), {arm} by the arm's name and {i} by its index, e.g.
 * `srun -N1 -n1 --gpus=1 {worker}` or `ssh gpu{i} {worker}`. The worker listens on launch_listen
 * (default tcp://127.0.0.1:0: a free port) with --exit-on-stdin-eof, and prints the URL it listens
 * on ("strata-worker: listening URL") on stdout, which reaches the driver through the launcher
 * (a pipe); the driver dials that URL. The launcher's stdin is a pipe the driver holds: when the
 * driver dies, ssh/srun pass the end of file on and the worker exits. Signals go to the
 * launcher's process group (the shell, srun/ssh and, when it runs here, the worker).
 */
#ifndef STRATA_ARM_H
#define STRATA_ARM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "proto/proto.h"

#define ARM_NAME_MAX 64    /* names, NUL included */
#define ARM_FMT_MAX  64    /* a KV format name or per-layer mix (kv.h), NUL included */
#define ARM_URL_MAX  512
#define ARM_PATH_MAX 4096  /* a model file's path, NUL included */

/* Status codes beyond proto.h's PROTO_E_* (which arm_* functions also return). */
enum {
    ARM_E_INTERRUPTED = 100,   /* the stop flag was raised while waiting */
    ARM_E_DIED        = 101,   /* a local worker exited */
    ARM_E_MISMATCH    = 102,   /* handshakes differ in more than the KV formats */
    ARM_E_SPEC        = 103,   /* a bad arm spec, name or URL */
    ARM_E_SYSTEM      = 104,   /* fork/exec/file failure */
    ARM_E_REPLY       = 105,   /* a reply whose values do not fit its request or the handshake
                                  (arm_check_reply): nothing of it is used */
};

#define ARM_DEVICE_MAX 32            /* a --devices entry ("cuda:0"), NUL included */

typedef struct arm_options arm_options;

typedef struct {
    char name[ARM_NAME_MAX];   /* unique display name: "int8", "f16#2", "k:int8" */
    char kv_k[ARM_FMT_MAX];    /* local: the formats the worker is started with; remote: from */
    char kv_v[ARM_FMT_MAX];    /*   the name when it is a plain spec, else "" (hello says)     */
    char url[ARM_URL_MAX];     /* ipc://DIR/i.ipc (local) or the --arm URL (remote) */
    int remote;                /* 1: dialled only, never spawned or signalled */
    char model[ARM_PATH_MAX];  /* local: the GGUF its worker runs (workers_start fills in the run's
                                * --model where arm_add_model did not); remote: "" */
    int own_model;             /* 1: a weight arm (--arm-model): model is its own file, and the
                                * handshake requires the same tokenizer only, not the same weights */
    uint64_t mem_other;        /* local: bytes of the other arms' model files (weight arms), which its
                                * worker's memory check counts too (--mem-other-weights); 0 = none */
    char backend[8 + ARM_DEVICE_MAX];   /* local: the worker's --backend ("llama" for a llama:SPEC arm,
                                * "llama:cuda:1" with --devices, "ref" for a ref:SPEC arm), "" for
                                * strata's own (no option passed) */
    char spec[ARM_NAME_MAX];   /* a weight arm's KV spec ("" = the reference arm's formats); other
                                * arms' spec is their name without the "#k" suffix */
    pid_t pid;                 /* local worker while it runs; 0 before spawn / after reaping */
    int exited;                /* 1 once reaped; status = waitpid's status */
    int status;
    char log_path[ARM_URL_MAX];/* local worker's stderr ("" for remote arms) */
    nng_socket sock;
    int connected;             /* sock is open */
    proto_hello_rep hello;     /* valid when have_hello */
    int have_hello;
    uint64_t next_id;          /* request ids, from 1 */
    const arm_options *opt;    /* NULL, or how to start and connect (arm_set_options) */
    int launched;              /* 1: started through arm_launch.launch (url "" until announced) */
    int out_fd, in_fd;         /* launched: the launcher's stdout (read) and stdin (write) pipes */
    int64_t n_past;            /* the worker's stream length as its checked replies tell it (0 after
                                * hello, which starts a fresh session); -1 unknown (after a failed
                                * request, until a truncate says it) */
} arm;

/* ---- specs and names (pure) ---------------------------------------------------------------- */

/* 1 when s is a valid arm or KV format name for the results folder: 1..ARM_NAME_MAX-1 printable
 * ASCII characters, none of: space " ' \ | ` , (report.h's rule). */
int arm_valid_name(const char *s);

/* Resolves one spec to K and V format names (kv_k, kv_v: ARM_FMT_MAX bytes each); a "llama:" or "ref:" prefix
 * (the engine, not a format) is skipped here: arm_resolve_formats sets the arm's backend. ref_k/ref_v are
 * the reference arm's formats, needed for "k:" / "v:" specs (NULL when unknown: then those specs
 * are an error). Allocates nothing. Returns 0, or ARM_E_SPEC with a message in err. */
int arm_spec_parse(const char *spec, const char *ref_k, const char *ref_v, char *kv_k, char *kv_v,
                   char *err, size_t errlen);

/* Writes to out (ARM_NAME_MAX bytes) `base` if no arm among taken[0..n_taken) has that name, else
 * base#2, base#3, ... the first free one. Returns 0, or ARM_E_SPEC when the name is too long. */
int arm_unique_name(const char *base, const arm *taken, int n_taken, char *out, char *err,
                    size_t errlen);

/* Appends the local arms of a comma-separated spec list to *arms (realloc'd; the caller frees it
 * with free() after arm_stop_all) and *n. Names get unique suffixes against the arms already there.
 * Formats are resolved in arm_resolve_formats. Returns 0, or ARM_E_SPEC (empty item, bad name). */
int arm_add_local(const char *list, arm **arms, int *n, char *err, size_t errlen);

/* Appends a remote arm from "NAME=URL" (url tcp://, ipc:// or tls+tcp://). Returns 0 or ARM_E_SPEC. */
int arm_add_remote(const char *name_eq_url, arm **arms, int *n, char *err, size_t errlen);

/* Appends a local weight arm from "NAME=FILE" or "NAME:SPEC=FILE" (--arm-model; see the top):
 * sets name (unique-suffixed), model (FILE as given), spec and own_model. Checks the syntax and
 * SPEC's formats, not the file. Returns 0 or ARM_E_SPEC. */
int arm_add_model(const char *arg, arm **arms, int *n, char *err, size_t errlen);

/* Finds the reference arm: the first arm whose name equals ref_name. Then sets kv_k/kv_v of every
 * local arm from its spec (its name without a "#k" suffix, or a weight arm's spec), "k:"/"v:"
 * against the reference's formats (the reference's spec, or a remote reference's name, must then
 * be a plain spec); a weight arm without a spec gets the reference's formats.
 * Returns the reference's index, or -ARM_E_SPEC with a message. */
int arm_resolve_formats(arm *arms, int n, const char *ref_name, char *err, size_t errlen);

/* ---- processes and connections ------------------------------------------------------------- */

typedef struct {
    const char *worker;        /* path of the strata-worker executable */
    const char *model;         /* the run's --model (an arm's own a->model, when set, wins) */
    int threads;               /* > 0 */
    int prefill;               /* worker --prefill, 0 = its default */
    int max_context;           /* worker --max-context, 0 = its default (the model's) */
    const char *tmpdir;        /* private directory for sockets and logs */
    int mem_arms;              /* local workers started together: worker --mem-arms (its memory check
                                * counts that many caches), <= 1 = none passed */
} arm_launch;

/* Options of how arms start and connect, shared by the arms given them with arm_set_options
 * (the caller's; it outlives the arms). An arm without options (NULL) is started plainly. */
struct arm_options {
    const proto_tls *tls;      /* certificates for tls+tcp:// URLs (NULL: none) */
    const char *launch;        /* NULL, or a --launch template (see "Launched arms" above) */
    const char *launch_listen; /* the URL launched workers listen on (NULL: tcp://127.0.0.1:0) */
    int allow_overcommit;      /* local workers get --allow-overcommit */
    int rope_f32;              /* local workers get --rope-angles f32 (llama.cpp's f32 RoPE angles) */
    int mmap_weights;          /* local workers get --mmap-weights (they share the mapped model file) */
    int allow_kv_mismatch;     /* a remote arm whose worker runs other K/V formats than its name says
                                * is run (labelled by what it runs, arm_relabel_ran) instead of refused */
    int kv_host;               /* local llama workers get --kv-resident host */
};

/* Sets arms[0..n).opt = o. */
void arm_set_options(arm *arms, int n, const arm_options *o);

/* Checks a --launch template: it must contain {worker}; only {worker}, {arm} and {i} are
 * replaced. Returns 0 or ARM_E_SPEC with a message. */
int arm_launch_check(const char *tpl, char *err, size_t errlen);

/* Writes the shell command a launched arm runs into out [outlen]: tpl with {worker} replaced by
 * argv[0..] (NULL-terminated) single-quoted and joined by spaces, {arm} by name (quoted), {i} by i.
 * Returns 0, or ARM_E_SPEC when it does not fit. */
int arm_launch_command(const char *tpl, const char *const *argv, const char *name, int i, char *out,
                       size_t outlen, char *err, size_t errlen);

/* Starts the local worker of arms[i] (index i names its socket and log: TMPDIR/i.ipc, i.log), or
 * its launcher when a->opt->launch is set (then a->url is "" until arm_connect reads the worker's
 * announcement). Sets a->url, a->log_path, a->pid. Returns 0, or ARM_E_SYSTEM with a message. */
int arm_spawn(arm *a, int i, const arm_launch *l, char *err, size_t errlen);

/* For a launched arm, first waits (within timeout_ms) for the worker's "listening URL" line.
 * Dials a->url (over TLS with a->opt->tls for tls+tcp://; retrying while the worker loads, up to
 * timeout_ms), sets the receive cap to
 * recv_max, and sends hello (a->hello, have_hello) with a 10 s timeout, dialling again (3 tries in
 * all) when a live worker does not answer it; then sets the socket's send/receive timeouts to
 * request_ms.
 * For a local arm it notices the worker exiting and reports the last line of its log.
 * Returns 0; ARM_E_DIED, PROTO_E_TIMEOUT, PROTO_E_TRANSPORT, ARM_E_INTERRUPTED (*stop raised) or a
 * reply error, each with a message naming the arm in err. */
int arm_connect(arm *a, int timeout_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen);

/* Sets the receive cap (bytes) of a connected arm's socket. Returns 0 or PROTO_E_TRANSPORT. */
int arm_set_recv_max(arm *a, size_t recv_max, char *err, size_t errlen);

/* One request to one arm: gives *req the arm's next id and calls proto_call, then checks the reply
 * (arm_check_reply; a bad one is freed, *rep zeroed). *rep is the caller's to proto_msg_free.
 * Returns proto_call's code or ARM_E_REPLY, with err prefixed by the arm's name. */
int arm_call(arm *a, proto_msg *req, proto_msg *rep, size_t max_len, char *err, size_t errlen);

/* Sends reqs[i] to arms[i] for every i with reqs[i].type != PROTO_NONE, all at once (one thread
 * per arm), and waits for every reply. The request ids are set here (reqs is not modified).
 * timeout_ms > 0 sets each called arm's send/receive timeout first (else the socket keeps its own).
 * reps[n] receives the replies (each zeroed when it failed or was not sent); the caller frees each
 * with proto_msg_free, also on failure. Every reply is checked (arm_check_reply) before it is
 * returned: a bad one is freed and its arm fails with ARM_E_REPLY. codes[n] (may be NULL) receives each arm's code (0 for
 * success and for arms not called). While waiting it checks *stop every 100 ms: when raised it
 * kills the local workers (their calls fail at once) and closes the remote arms' sockets, marks
 * them disconnected, and returns ARM_E_INTERRUPTED. Otherwise returns 0 when every call succeeded,
 * else the first failing arm's code with a message naming it: ARM_E_DIED when a local worker
 * exited meanwhile, PROTO_E_TIMEOUT when it did not answer in time, PROTO_E_TRANSPORT, or the
 * worker's error reply. */
int arm_call_all(arm *arms, int n, const proto_msg *reqs, proto_msg *reps, size_t max_len,
                 int timeout_ms, const volatile sig_atomic_t *stop, int *codes, char *err,
                 size_t errlen);

/* Compares the hello replies of arms[0..n) (all must have one). Writes a table of the fields per
 * arm to out (NULL: none), marking with '*' the fields that differ. The model sha256, architecture,
 * tokenizer hash, vocabulary size, BOS id and layer count must be equal: else returns ARM_E_MISMATCH
 * with the differences in err. Weight arms (own_model) need only the same tokenizer hash,
 * vocabulary size and BOS id (the other arms still the same model among themselves); each one is
 * noted in notes ("arm q8 runs its own model ...: the arms differ in weights, not only KV"). Differences that do not invalidate the comparison but deserve a
 * note (engine or git version, device, max context) are appended to notes as lines "...\n" (cut
 * short at noteslen). Also checks that each local arm reports the formats it was started with, and
 * that each remote arm named by a spec (int8, k:int8, ...) runs those formats (arm_kv_mismatch):
 * one that does not is refused, unless its options allow it (allow_kv_mismatch: then a note says
 * what it runs and the label arm_relabel_ran will give it). Returns 0 or ARM_E_MISMATCH. */
int arm_check_handshake(const arm *arms, int n, FILE *out, char *notes, size_t noteslen,
                        char *err, size_t errlen);

/* ---- what workers say (arm_check.c) --------------------------------------------------------- */

/* Checks a hello reply before anything uses it: every string printable ASCII (kv_k and kv_v also
 * arm_valid_name: they label the arm in the results), n_vocab >= 1, bos in [-1, n_vocab), n_ctx in
 * [1, INT32_MAX], n_layer in [1, 4096], threads >= 1, n_expert <= 4096 with n_expert_used in
 * [1, n_expert] (both 0 for a dense model), kv_bytes_per_token <= INT64_MAX, and when the attention
 * layout was sent (has_window) window in [0, INT32_MAX] with layers_full = n_layer for window 0 and
 * layers_full < n_layer otherwise. Returns 0, or ARM_E_REPLY with one line naming the field (not the
 * arm) in err. */
int arm_check_hello(const proto_hello_rep *h, char *err, size_t errlen);

/* Checks rep, the successful reply to req, against the request and the arm's handshake (a->hello;
 * for a hello reply, arm_check_hello) and keeps a->n_past up to date:
 *   tokenize  every id in [0, n_vocab)
 *   vocab     1 <= its n_vocab <= the hello's
 *   prefill   n_vocab = the hello's; n_rows = 0 / 1 / n_tokens for rows none / last / all; n_past =
 *             the stream's length + n_tokens (when known), <= n_ctx; experts: n_tokens x n_layer x
 *             n_expert_used ids in [0, n_expert) when asked (and the model has experts), else none
 *   generate  n tokens as asked, each in [0, n_vocab); gaps finite and >= 0; n_past = the length
 *             + n - 1 (when known), <= n_ctx
 *   truncate  n_past = depth
 *   stats     n_past = the length (when known), <= n_ctx; kv_bytes = n_past x kv_bytes_per_token;
 *             seconds finite and >= 0; counters <= INT64_MAX
 * Returns 0, or ARM_E_REPLY with one line naming the reply and its field (not the arm: callers
 * prefix it) in err; a->n_past is then unknown (-1). */
int arm_check_reply(arm *a, const proto_msg *req, const proto_msg *rep, char *err, size_t errlen);

/* 1 when a is a remote arm named by a spec whose formats (a->kv_k, a->kv_v) differ from the ones
 * its worker reported in hello, else 0. */
int arm_kv_mismatch(const arm *a);

/* The label of an arm by what its worker runs, into out [ARM_NAME_MAX]: NAME[ran:K] (K/V when they
 * differ) with NAME its name without a "#k" suffix, which follows the label: int8#2 running f16
 * becomes int8[ran:f16]#2. Returns 0, or ARM_E_SPEC when it does not fit (or is not a valid name). */
int arm_ran_label(const arm *a, char *out, char *err, size_t errlen);

/* Renames every arm of arms[n] with arm_kv_mismatch to its arm_ran_label (the results then label
 * it by what it ran). Returns 0, or ARM_E_SPEC (a label too long or taken by another arm). */
int arm_relabel_ran(arm *arms, int n, char *err, size_t errlen);

/* 0 when the arm's local worker has exited (it is reaped then), else 1 (also for remote arms). */
int arm_alive(arm *a);

/* Sends sig to a local arm's process group: the worker, or a launched arm's launcher and what it
 * started on this machine (a worker that srun or ssh runs elsewhere sees its launcher end, and its
 * stdin close). a->pid must be > 0. */
void arm_signal(const arm *a, int sig);

/* The last non-empty line of a local arm's log (at most len-1 bytes) into buf; "" if none. */
void arm_log_tail(const arm *a, char *buf, size_t len);

/* The last n (<= 8) non-empty lines of a local arm's log joined with " | " into buf [len]: the
 * current worker's lines only (a restarted worker appends to its predecessor's log). */
void arm_log_tail_lines(const arm *a, int n, char *buf, size_t len);

/* A running local worker's state letter from /proc/PID/stat ('R' running, 'S' sleeping,
 * 'T' stopped, 'Z' zombie, ...), '?' when unknown (remote, exited, no /proc). */
char arm_proc_state(const arm *a);

/* Replaces the local worker of arms[i] (index i, as for arm_spawn) with a fresh process: closes
 * its socket, kills the old process (SIGKILL, also when stopped) and reaps it, notes it in the
 * log, spawns a new worker with l, dials it (arm_connect with dial_ms, request_ms, recv_max) and
 * checks that its hello repeats the old one's (model, tokenizer, formats, context, engine, git,
 * device). Returns 0, or ARM_E_SYSTEM (a remote arm), ARM_E_MISMATCH, or arm_spawn's /
 * arm_connect's code, with a message. */
int arm_restart(arm *a, int i, const arm_launch *l, int dial_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen);

/* The driver's private temp directory for the local workers' sockets and logs: creates
 * $TMPDIR/strata-XXXXXX (TMPDIR unset: /tmp) into dir [len] holding a lock file that *lock_fd
 * keeps locked for the driver's life. First removes the strata-XXXXXX directories of this user
 * whose lock nobody holds (left by a driver that was killed). Returns 0, or ARM_E_SYSTEM with a
 * message (dir = "" then). */
int arm_tmpdir_create(char *dir, size_t len, int *lock_fd, char *err, size_t errlen);
/* Removes the directory's files and the directory, and releases the lock (lock_fd < 0: none). */
void arm_tmpdir_remove(const char *dir, int lock_fd);

/* Stops one arm: a local worker, if connected and polite, is sent shutdown (2 s timeout); the
 * socket is closed; a local worker is given grace_ms to exit, then SIGTERM, grace_ms more, then
 * SIGKILL, and is reaped. A remote worker is only disconnected (it belongs to whoever started it
 * and keeps serving). Never blocks forever. Safe to call twice. */
void arm_stop(arm *a, int polite, int grace_ms);

/* arm_stop on every arm, all signals sent before any waiting (so the grace periods overlap). */
void arm_stop_all(arm *arms, int n, int polite, int grace_ms);

/* A description of a wait status ("exit status 1", "killed by signal 9") into buf. */
void arm_describe_status(int status, char *buf, size_t len);

/* Appends the local arms' worker logs to out_dir/workers.log, one section per arm headed by its
 * name, pid, URL and exit status (a resumed run adds its own sections). Best effort: a file that
 * cannot be written is skipped. */
void arm_save_logs(const arm *arms, int n, const char *out_dir);

/* text [len] tokenised by the arm (add_bos: BOS first; special: parse special-token texts), the
 * reply read with the cap max_len, into *ids [*n] (malloc'd, the caller frees; may be NULL for
 * n = 0). Returns arm_call's code (0 on success) with a message in err. */
int arm_tokenize(arm *a, const char *text, size_t len, int add_bos, int special, size_t max_len,
                 int32_t **ids, size_t *n, char *err, size_t errlen);

#endif
