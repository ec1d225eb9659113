/* arm.c — the driver's arms: part 3: dialling workers and the handshake, requests (one and
 * concurrent), the handshake check across arms, restarting a worker, tokenizing through a worker.
 * See arm.h; specs are in arm_spec.c, processes (spawning, stopping, the temp directory) in
 * arm_proc.c. */

#include "driver/arm.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/arm_internal.h"

/* ============================================================================================
 * Connections
 * ========================================================================================== */

int arm_set_recv_max(arm *a, size_t recv_max, char *err, size_t errlen) {
    int rv = nng_socket_set_size(a->sock, NNG_OPT_RECVMAXSZ, recv_max);
    if (rv) return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set receive cap: %s", a->name, nng_strerror(rv));
    return 0;
}

int arm_call(arm *a, proto_msg *req, proto_msg *rep, size_t max_len, char *err, size_t errlen) {
    char e[600];
    req->id = a->next_id++;
    int rc = proto_call(a->sock, req, rep, max_len, e, sizeof e);
    if (rc) a->n_past = -1;   /* a failed request may have moved the stream */
    else if ((rc = arm_check_reply(a, req, rep, e, sizeof e))) proto_msg_free(rep);
    if (rc) errmsg_set(err, errlen, rc, "arm %s: %s", a->name, e);
    return rc;
}

#define ANNOUNCE "strata-worker: listening "

/* A launched arm: reads the launcher's stdout until the worker's "listening URL" line, into
 * a->url. Other lines are copied to the arm's log. Returns 0, ARM_E_DIED, PROTO_E_TIMEOUT,
 * ARM_E_SPEC (a URL that does not fit) or ARM_E_INTERRUPTED with a message. */
static int read_announce(arm *a, int64_t t0, int timeout_ms, const volatile sig_atomic_t *stop,
                         char *err, size_t errlen) {
    char line[ARM_URL_MAX + 64];   /* the line read so far: [n] bytes */
    size_t n = 0;
    for (;;) {
        if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
        if (clock_ms() - t0 > timeout_ms)
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: the launched worker did not say where it "
                              "listens within %d s (its log: %s)", a->name, timeout_ms / 1000, a->log_path);
        struct pollfd pfd = { .fd = a->out_fd, .events = POLLIN };
        int pr = poll(&pfd, 1, 100);
        if (pr < 0 && errno != EINTR)
            return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: poll: %s", a->name, strerror(errno));
        if (pr <= 0) continue;
        char c;
        ssize_t got = read(a->out_fd, &c, 1);   /* a line or two, once: byte by byte is fine */
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {   /* the launcher ended without the line: wait for it to be reaped */
            for (int t = 0; t < 100 && !arm_poll_exit(a); t++) arm_sleep_ms(20);
            if (arm_poll_exit(a)) return arm_died_error(a, "before saying where it listens", err, errlen);
            return errmsg_set(err, errlen, ARM_E_DIED, "arm %s: the launcher closed its output before the worker "
                              "said where it listens (its log: %s)", a->name, a->log_path);
        }
        if (c != '\n') {
            if (n + 1 < sizeof line) line[n++] = c;
            continue;
        }
        line[n] = 0;
        n = 0;
        if (strncmp(line, ANNOUNCE, strlen(ANNOUNCE))) {
            FILE *f = fopen(a->log_path, "a");
            if (f) { fprintf(f, "%s\n", line); fclose(f); }
            continue;
        }
        const char *url = line + strlen(ANNOUNCE);
        if (strlen(url) >= sizeof a->url || (strncmp(url, "tcp://", 6) && strncmp(url, "tls+tcp://", 10) &&
                                             strncmp(url, "ipc://", 6)))
            return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s: the launched worker announced '%s'", a->name, url);
        snprintf(a->url, sizeof a->url, "%s", url);
        return 0;
    }
}

#define HELLO_MS 10000   /* a listening worker answers hello at once */
#define HELLO_TRIES 3

int arm_connect(arm *a, int timeout_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen) {
    char e[600];
    int64_t t0 = clock_ms();
    /* A local worker's socket file appears when it listens: dialling before that, in short
     * attempts closed after 200 ms, sometimes left the worker's end of a half-made connection
     * stuck, and the worker then answered nothing (seen under load). So wait for the file, then
     * dial once with time to spare. */
    if (a->launched && !a->url[0]) {
        int rc = read_announce(a, t0, timeout_ms, stop, err, errlen);
        if (rc) return rc;
    }
    const proto_tls *tls = !strncmp(a->url, "tls+", 4) && a->opt ? a->opt->tls : NULL;
    if (!strncmp(a->url, "tls+", 4) && !tls)
        return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s: %s is a TLS URL: give --tls-cert, --tls-key and "
                          "--tls-ca", a->name, a->url);
    int local_ipc = !a->remote && !strncmp(a->url, "ipc://", 6);
    for (struct stat sb; local_ipc && (stat(a->url + 6, &sb) || !S_ISSOCK(sb.st_mode));) {
        if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
        if (arm_poll_exit(a)) return arm_died_error(a, "before answering", err, errlen);
        if (clock_ms() - t0 > timeout_ms)
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: the worker did not listen on %s within %d s",
                              a->name, a->url, timeout_ms / 1000);
        arm_sleep_ms(20);
    }
    for (int attempt = 1;; attempt++) {
        for (;;) {
            if (stop && *stop) return errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
            if (arm_poll_exit(a)) return arm_died_error(a, "before answering", err, errlen);
            int rc = proto_dial_tls(a->url, local_ipc ? 2000 : tls ? 5000 : 200, recv_max, tls, &a->sock, e, sizeof e);
            if (rc == 0) break;
            if (rc != PROTO_E_TIMEOUT) return errmsg_set(err, errlen, rc, "arm %s: %s", a->name, e);
            if (clock_ms() - t0 > timeout_ms)
                return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "arm %s: no worker answered on %s within %d s%s",
                               a->name, a->url, timeout_ms / 1000, tls ? " (over TLS: does the worker's "
                               "certificate name that host, and does each side's --tls-ca sign the other's "
                               "certificate?)" : "");
        }
        a->connected = 1;
        int rv, hello_ms = request_ms < HELLO_MS ? request_ms : HELLO_MS;
        if ((rv = nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, hello_ms)) ||
            (rv = nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, hello_ms)))
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set timeouts: %s", a->name, nng_strerror(rv));
        proto_msg req, rep;
        proto_init(&req, PROTO_HELLO, 0, 0);
        int rc = arm_call(a, &req, &rep, recv_max, err, errlen);
        if (rc) {
            if (arm_poll_exit(a)) return arm_died_error(a, "during the handshake", err, errlen);
            /* a connected worker that does not answer hello: seen (rarely) as a request left
             * unread in the socket by nng; hello is harmless to repeat on a new connection */
            if (rc == PROTO_E_TIMEOUT && attempt < HELLO_TRIES) {
                nng_close(a->sock);
                a->connected = 0;
                continue;
            }
            return rc;
        }
        a->hello = rep.hello_rep;
        a->have_hello = 1;
        proto_msg_free(&rep);
        if ((rv = nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, request_ms)) ||
            (rv = nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, request_ms)))
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: set timeouts: %s", a->name, nng_strerror(rv));
        return 0;
    }
}

/* ---- concurrent calls ------------------------------------------------------------------------ */

typedef struct {
    nng_socket sock;
    proto_msg req;
    proto_msg *rep;
    size_t max_len;
    int rc;
    char err[600];
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *n_done;
} call_job;

static void *call_thread(void *p) {
    call_job *j = p;
    j->rc = proto_call(j->sock, &j->req, j->rep, j->max_len, j->err, sizeof j->err);
    pthread_mutex_lock(j->mu);
    (*j->n_done)++;
    pthread_cond_signal(j->cv);
    pthread_mutex_unlock(j->mu);
    return NULL;
}

/* Waits for the n_active started calls (started[n]) to finish, watching the stop flag: when it is
 * set, the started arms' workers are killed (local) or their sockets closed (remote). Returns 1
 * when that happened (the calls were interrupted), else 0. */
static int wait_calls(arm *arms, int n, const int *started, int n_active, pthread_mutex_t *mu,
                      pthread_cond_t *cv, const int *n_done, const volatile sig_atomic_t *stop) {
    int closed = 0;
    for (;;) {
        pthread_mutex_lock(mu);
        if (*n_done < n_active) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(cv, mu, &ts);
        }
        int all = *n_done >= n_active;
        pthread_mutex_unlock(mu);
        if (all) break;
        if (stop && *stop && !closed) {
            /* Interrupted: a local worker is killed, so its connection drops and the blocked call
             * returns at once (requests are never resent). Closing a socket while another thread
             * is blocked in it can hang nng 1.5.2's nng_close (seen here, rarely): only a remote
             * arm, which we must not kill, is closed that way. */
            for (int i = 0; i < n; i++) {
                if (!started[i]) continue;
                if (!arms[i].remote && arms[i].pid > 0) arm_signal(&arms[i], SIGKILL);
                else nng_close(arms[i].sock);
            }
            closed = 1;
        }
    }
    return closed;
}

/* The first failed call's error (the worker's death where it died), each arm's code in codes[i]
 * (NULL: not wanted), or dead (a death found before sending) when there is none. */
static int call_errors(arm *arms, int n, const proto_msg *reqs, const call_job *jobs,
                       const int *started, int dead, int *codes, char *err, size_t errlen) {
    int ret = 0;
    for (int i = 0; i < n; i++) {
        if (!started[i] || jobs[i].rc == 0) continue;
        arm *a = &arms[i];
        int rc = jobs[i].rc;
        char e[700];
        snprintf(e, sizeof e, "arm %s: %s", a->name, jobs[i].err);
        /* a dropped connection usually means the worker died: give it a moment to be reaped */
        if (!a->remote && rc == PROTO_E_TRANSPORT)
            for (int t = 0; t < 25 && !arm_poll_exit(a); t++) arm_sleep_ms(20);
        if (!a->remote && (rc == PROTO_E_TRANSPORT || rc == PROTO_E_TIMEOUT) && arm_poll_exit(a)) {
            char when[64];
            snprintf(when, sizeof when, "during a %s request", proto_type_name(reqs[i].type));
            rc = arm_died_error(a, when, e, sizeof e);
        }
        if (codes) codes[i] = rc;
        if (!ret && !dead) ret = errmsg_set(err, errlen, rc, "%s", e);
    }
    return ret ? ret : dead;
}

int arm_call_all(arm *arms, int n, const proto_msg *reqs, proto_msg *reps, size_t max_len,
                 int timeout_ms, const volatile sig_atomic_t *stop, int *codes, char *err,
                 size_t errlen) {
    call_job *jobs = calloc((size_t)n, sizeof *jobs);      /* [n] */
    pthread_t *th = calloc((size_t)n, sizeof *th);         /* [n] */
    int *started = calloc((size_t)n, sizeof *started);     /* [n] */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    pthread_condattr_t ca;
    int n_done = 0, n_active = 0, closed = 0, ret = 0, dead = 0;
    for (int i = 0; i < n; i++) memset(&reps[i], 0, sizeof reps[i]);
    if (codes)
        for (int i = 0; i < n; i++) codes[i] = 0;
    if (!jobs || !th || !started) {
        free(jobs); free(th); free(started);
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);

    for (int i = 0; i < n; i++) {
        if (reqs[i].type == PROTO_NONE) continue;
        if (!arms[i].connected) {
            ret = errmsg_set(err, errlen, PROTO_E_TRANSPORT, "arm %s: not connected", arms[i].name);
            if (codes) codes[i] = PROTO_E_TRANSPORT;
            break;
        }
        /* a worker that died since the last request: a request sent now would wait for a
         * connection that never comes (until the timeout), so it is not sent */
        if (arm_poll_exit(&arms[i])) {
            char when[64], e[700];
            snprintf(when, sizeof when, "before a %s request", proto_type_name(reqs[i].type));
            int rc = arm_died_error(&arms[i], when, e, sizeof e);
            if (codes) codes[i] = rc;
            if (!dead) dead = errmsg_set(err, errlen, rc, "%s", e);
            continue;
        }
        call_job *j = &jobs[i];
        if (timeout_ms > 0) {
            nng_socket_set_ms(arms[i].sock, NNG_OPT_RECVTIMEO, timeout_ms);
            nng_socket_set_ms(arms[i].sock, NNG_OPT_SENDTIMEO, timeout_ms);
        }
        j->sock = arms[i].sock;
        j->req = reqs[i];
        j->req.id = arms[i].next_id++;
        j->rep = &reps[i];
        j->max_len = max_len;
        j->mu = &mu;
        j->cv = &cv;
        j->n_done = &n_done;
        if (pthread_create(&th[i], NULL, call_thread, j)) {
            ret = errmsg_set(err, errlen, PROTO_E_INTERNAL, "arm %s: cannot start a thread", arms[i].name);
            break;
        }
        started[i] = 1;
        n_active++;
    }
    /* wait for all started calls, watching the stop flag */
    closed = wait_calls(arms, n, started, n_active, &mu, &cv, &n_done, stop);
    for (int i = 0; i < n; i++)
        if (started[i]) pthread_join(th[i], NULL);
    /* every reply is checked against its request before anyone uses it */
    for (int i = 0; i < n && !closed; i++) {
        if (!started[i]) continue;
        if (jobs[i].rc) arms[i].n_past = -1;
        else if ((jobs[i].rc = arm_check_reply(&arms[i], &jobs[i].req, &reps[i], jobs[i].err, sizeof jobs[i].err)))
            proto_msg_free(&reps[i]);
    }
    if (closed) {
        for (int i = 0; i < n; i++)
            if (started[i]) arms[i].connected = 0, arms[i].n_past = -1;
        ret = errmsg_set(err, errlen, ARM_E_INTERRUPTED, "interrupted");
    } else if (!ret) {
        ret = call_errors(arms, n, reqs, jobs, started, dead, codes, err, errlen);
    }
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
    free(jobs);
    free(th);
    free(started);
    return ret;
}

/* ============================================================================================
 * The handshake check
 * ========================================================================================== */

enum { F_ENGINE, F_GIT, F_DEVICE, F_SHA, F_ARCH, F_TOK, F_VOCAB, F_BOS, F_LAYER, F_CTX, F_THREADS,
       F_KVK, F_KVV, F_KVL, F_WIN, F_KVB, F_WEIGHTS, F_FILE, F_N };
static const char *const field_names[F_N] = {
    "engine", "git", "device", "model_sha256", "arch", "tokenizer_hash", "n_vocab", "bos", "n_layer",
    "n_ctx", "threads", "kv_k", "kv_v", "kv_layers", "window", "kv_bytes_per_token", "weights", "model_file" };
/* must be equal for a valid comparison: 1 among all arms, 2 among the arms that are not weight arms */
static const int field_must[F_N] = { 0, 0, 0, 2, 2, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
/* worth a note when different */
static const int field_note[F_N] = { 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0 };

/* A path's last component without ".gguf" into buf [len]. */
static void file_base(const char *path, char *buf, size_t len) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t l = strlen(b);
    if (l >= len) l = len - 1;   /* cut short (a table cell) */
    memcpy(buf, b, l);
    buf[l] = 0;
    if (l > 5 && !strcmp(buf + l - 5, ".gguf")) buf[l - 5] = 0;
}

static void field_value(const arm *a, int f, char *buf, size_t len) {
    const proto_hello_rep *h = &a->hello;
    switch (f) {
    case F_ENGINE: snprintf(buf, len, "%s", h->engine); break;
    case F_GIT: snprintf(buf, len, "%s", h->git); break;
    case F_DEVICE: snprintf(buf, len, "%s", h->device); break;
    case F_SHA: snprintf(buf, len, "%s", h->model_sha256); break;
    case F_ARCH: snprintf(buf, len, "%s", h->arch); break;
    case F_TOK: snprintf(buf, len, "%s", h->tokenizer_hash); break;
    case F_VOCAB: snprintf(buf, len, "%u", h->n_vocab); break;
    case F_BOS: snprintf(buf, len, "%d", h->bos); break;
    case F_LAYER: snprintf(buf, len, "%u", h->n_layer); break;
    case F_CTX: snprintf(buf, len, "%llu", (unsigned long long)h->n_ctx); break;
    case F_THREADS: snprintf(buf, len, "%u", h->threads); break;
    case F_KVK: snprintf(buf, len, "%s", h->kv_k); break;
    case F_KVV: snprintf(buf, len, "%s", h->kv_v); break;
    case F_KVL: snprintf(buf, len, "%s", h->kv_layers[0] ? h->kv_layers : "-"); break;
    case F_WIN:   /* "-" unknown (an older worker), "none", or "512: 3 of 18 full" */
        if (!h->has_window) snprintf(buf, len, "-");
        else if (!h->window) snprintf(buf, len, "none");
        else snprintf(buf, len, "%u: %u of %u full", h->window, h->layers_full, h->n_layer);
        break;
    case F_WEIGHTS: snprintf(buf, len, "%s", a->remote ? "remote" : a->own_model ? "--arm-model" : "--model"); break;
    case F_FILE: if (a->model[0]) file_base(a->model, buf, len); else snprintf(buf, len, "-"); break;
    default: snprintf(buf, len, "%llu", (unsigned long long)h->kv_bytes_per_token); break;
    }
}

static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    size_t l = strlen(buf);
    if (l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + l, len - l, fmt, ap);
    va_end(ap);
}

/* The steps of arm_check_handshake below. differs[f]: field f is not the same on every arm;
 * fatal[f]: the difference refuses the run; n_own: the arms with their own model (--arm-model). */

/* Which fields differ, and which of those refuse the run: the ones every arm must share, and those the
 * arms on the same model (the --model and remote arms) must share. Returns n_own. */
static int compare_fields(const arm *arms, int n, int differs[F_N], int fatal[F_N]) {
    char v[PROTO_STR_MAX], v0[PROTO_STR_MAX];
    int n_own = 0, first_plain = -1;
    for (int i = 0; i < n; i++) {
        n_own += arms[i].own_model;
        if (!arms[i].own_model && first_plain < 0) first_plain = i;
    }
    for (int f = 0; f < F_N; f++) {
        field_value(&arms[0], f, v0, sizeof v0);
        for (int i = 1; i < n; i++) {
            field_value(&arms[i], f, v, sizeof v);
            if (strcmp(v, v0)) differs[f] = 1;
        }
        fatal[f] = field_must[f] == 1 && differs[f];
        if (field_must[f] == 2 && first_plain >= 0) {   /* the same model among the --model / remote arms */
            field_value(&arms[first_plain], f, v0, sizeof v0);
            for (int i = 0; i < n; i++) {
                if (arms[i].own_model) continue;
                field_value(&arms[i], f, v, sizeof v);
                if (strcmp(v, v0)) fatal[f] = 1;
            }
        }
    }
    return n_own;
}

/* The handshake table on out: a row per field (weights and file only for runs with weight arms), a
 * column per arm (the first 64), '*' where the arms differ. */
static void print_table(FILE *out, const arm *arms, int n, const int differs[F_N], int n_own) {
    char v[PROTO_STR_MAX];
    /* column widths; long hashes are shown by their first 16 characters */
    int w0 = 0, w[64] = { 0 };
    int nc = n < 64 ? n : 64;
    for (int f = 0; f < F_N; f++) if ((int)strlen(field_names[f]) > w0) w0 = (int)strlen(field_names[f]);
    for (int i = 0; i < nc; i++) {
        w[i] = (int)strlen(arms[i].name);
        for (int f = 0; f < F_N; f++) {
            field_value(&arms[i], f, v, sizeof v);
            int l = (int)strlen(v);
            if (l > 19) l = 19;
            if (l > w[i]) w[i] = l;
        }
    }
    fprintf(out, "handshake (* = differs between arms):\n  %-*s", w0, "arm");
    for (int i = 0; i < nc; i++) fprintf(out, "  %-*s", w[i], arms[i].name);
    fprintf(out, "\n");
    for (int f = 0; f < F_N; f++) {
        if ((f == F_WEIGHTS || f == F_FILE) && !n_own) continue;   /* shown for runs with weight arms */
        fprintf(out, "%c %-*s", differs[f] ? '*' : ' ', w0, field_names[f]);
        for (int i = 0; i < nc; i++) {
            field_value(&arms[i], f, v, sizeof v);
            if (strlen(v) > 19) { v[16] = '.'; v[17] = '.'; v[18] = '.'; v[19] = 0; }
            fprintf(out, "  %-*s", w[i], v);
        }
        fprintf(out, "\n");
    }
    fflush(out);
}

/* The fatal differences of fields into err (after *bad earlier ones: "; " between). */
static void fatal_fields(const arm *arms, int n, const int fatal[F_N], int n_own, int *bad, char *err,
                         size_t errlen) {
    char v[PROTO_STR_MAX];
    for (int f = 0; f < F_N; f++) {
        if (!fatal[f]) continue;
        int tok = field_must[f] == 1;
        const char *lead = n_own && tok ? "a weight arm (--arm-model) must have the same tokenizer and vocabulary as "
                                          "the other arms: "
                                        : "the arms differ in more than the KV format: ";
        append(err, errlen, "%s%s differs:", *bad ? "; " : lead, field_names[f]);
        for (int i = 0; i < n; i++) {
            if (!tok && arms[i].own_model) continue;
            field_value(&arms[i], f, v, sizeof v);
            append(err, errlen, " %s=%s", arms[i].name, v);
        }
        *bad = 1;
    }
}

/* Arms whose worker reports other K/V formats than they were started or named with: fatal for a
 * local arm and for a remote one unless --allow-kv-mismatch (then a note). */
static void kv_mismatches(const arm *arms, int n, int *bad, char *notes, size_t noteslen, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        int fmt_differs = a->kv_k[0] && (strcmp(a->kv_k, a->hello.kv_k) || strcmp(a->kv_v, a->hello.kv_v));
        if (!fmt_differs) continue;
        if (!a->remote) {
            append(err, errlen, "%sarm %s was started with K/V %s/%s but reports %s/%s", *bad ? "; " : "",
                   a->name, a->kv_k, a->kv_v, a->hello.kv_k, a->hello.kv_v);
            *bad = 1;
        } else if (a->opt && a->opt->allow_kv_mismatch) {
            char label[ARM_NAME_MAX], e2[256];
            if (arm_ran_label(a, label, e2, sizeof e2)) snprintf(label, sizeof label, "?");
            append(notes, noteslen, "remote arm %s is named for K/V %s/%s but its worker runs %s/%s "
                   "(--allow-kv-mismatch): the results label it %s\n", a->name, a->kv_k, a->kv_v, a->hello.kv_k,
                   a->hello.kv_v, label);
        } else {
            append(err, errlen, "%sremote arm %s is named for K/V %s/%s but its worker runs %s/%s (give "
                   "--allow-kv-mismatch to run it, labelled by what it runs)", *bad ? "; " : "", a->name, a->kv_k,
                   a->kv_v, a->hello.kv_k, a->hello.kv_v);
            *bad = 1;
        }
    }
}

/* The notes of a run that passed: weight arms, and the fields that differ without refusing it. */
static void handshake_notes(const arm *arms, int n, const int differs[F_N], char *notes, size_t noteslen) {
    char v[PROTO_STR_MAX];
    for (int i = 0; i < n; i++) {
        if (!arms[i].own_model) continue;
        append(notes, noteslen, "arm %s runs its own model %s (sha256 %.16s..., %s, %u layers): the arms differ in "
               "weights, not only in KV; the handshake required the same tokenizer_hash, n_vocab and bos only\n",
               arms[i].name, arms[i].model, arms[i].hello.model_sha256, arms[i].hello.arch, arms[i].hello.n_layer);
    }
    for (int f = 0; f < F_N; f++) {
        if (!field_note[f] || !differs[f]) continue;
        append(notes, noteslen, "the arms differ in %s:", field_names[f]);
        for (int i = 0; i < n; i++) {
            field_value(&arms[i], f, v, sizeof v);
            append(notes, noteslen, " %s=%s", arms[i].name, v);
        }
        append(notes, noteslen, "\n");
    }
}

int arm_check_handshake(const arm *arms, int n, FILE *out, char *notes, size_t noteslen,
                        char *err, size_t errlen) {
    int differs[F_N] = { 0 }, fatal[F_N] = { 0 };
    int n_own = compare_fields(arms, n, differs, fatal);
    if (out) print_table(out, arms, n, differs, n_own);
    if (err && errlen) err[0] = 0;
    int bad = 0;
    fatal_fields(arms, n, fatal, n_own, &bad, err, errlen);
    kv_mismatches(arms, n, &bad, notes, noteslen, err, errlen);
    if (bad) return ARM_E_MISMATCH;
    handshake_notes(arms, n, differs, notes, noteslen);
    return 0;
}


/* ============================================================================================
 * Restarting a worker
 * ========================================================================================== */

/* The hello fields a restarted worker must repeat exactly. */
static const char *hello_differs(const proto_hello_rep *a, const proto_hello_rep *b) {
    if (strcmp(a->model_sha256, b->model_sha256)) return "model_sha256";
    if (strcmp(a->tokenizer_hash, b->tokenizer_hash)) return "tokenizer_hash";
    if (strcmp(a->arch, b->arch)) return "arch";
    if (a->n_vocab != b->n_vocab) return "n_vocab";
    if (a->n_layer != b->n_layer) return "n_layer";
    if (a->n_ctx != b->n_ctx) return "n_ctx";
    if (strcmp(a->kv_k, b->kv_k)) return "kv_k";
    if (strcmp(a->kv_v, b->kv_v)) return "kv_v";
    if (strcmp(a->engine, b->engine)) return "engine";
    if (strcmp(a->git, b->git)) return "git";
    if (strcmp(a->device, b->device)) return "device";
    return NULL;
}

int arm_restart(arm *a, int i, const arm_launch *l, int dial_ms, int request_ms, size_t recv_max,
                const volatile sig_atomic_t *stop, char *err, size_t errlen) {
    if (a->remote)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: a remote worker cannot be restarted from here",
                          a->name);
    if (!a->have_hello)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: no handshake to compare a restart with", a->name);
    proto_hello_rep old = a->hello;
    if (a->connected) {
        /* no call is in flight (arm_call_all has joined its threads): closing is safe */
        nng_close(a->sock);
        a->connected = 0;
    }
    if (a->pid > 0 && !a->exited) {
        arm_signal(a, SIGKILL);           /* also ends a stopped (SIGSTOP) process */
        int st;
        while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR) {}
        a->exited = 1;
        a->status = st;
    }
    if (a->log_path[0]) {
        FILE *f = fopen(a->log_path, "a");
        if (f) {
            char st[96];
            arm_describe_status(a->status, st, sizeof st);
            fprintf(f, ARM_RESTART_MARK "worker pid %d ended (%s); starting a new one ====\n", (int)a->pid, st);
            fclose(f);
        }
    }
    if (!strncmp(a->url, "ipc://", 6)) unlink(a->url + 6);   /* the old listener's socket file */
    a->pid = 0;
    a->have_hello = 0;
    int rc = arm_spawn(a, i, l, err, errlen);
    if (!rc) rc = arm_connect(a, dial_ms, request_ms, recv_max, stop, err, errlen);
    if (rc) return rc;
    const char *f = hello_differs(&old, &a->hello);
    if (f)
        return errmsg_set(err, errlen, ARM_E_MISMATCH, "arm %s: the restarted worker differs from the first in %s",
                          a->name, f);
    return 0;
}

int arm_tokenize(arm *a, const char *text, size_t len, int add_bos, int special, size_t max_len,
                 int32_t **ids, size_t *n, char *err, size_t errlen) {
    proto_msg req, rep;
    proto_init(&req, PROTO_TOKENIZE, 0, 0);
    req.tokenize_req.text = (char *)text;   /* only read */
    req.tokenize_req.n_text = len;
    req.tokenize_req.add_bos = add_bos ? 1 : 0;
    req.tokenize_req.special = special ? 1 : 0;
    int rc = arm_call(a, &req, &rep, max_len, err, errlen);
    if (!rc) {
        *ids = rep.tokenize_rep.tokens;     /* taken over from the reply */
        *n = rep.tokenize_rep.n_tokens;
        rep.tokenize_rep.tokens = NULL;
    }
    proto_msg_free(&rep);
    return rc;
}
