/* test_worker.c — strata-worker as a process, for the defects of issue 15 found by probing it
 * (each check failed against the worker before its fix; STRATA_TEST_WORKER=PATH runs them against
 * another binary):
 *   - non-finite logits: the CLI (--prompt --max-new) and the server report an error, never token 0;
 *   - --max-context past the machine's memory: a clear error at once (--allow-overcommit starts);
 *   - the model file truncated under a listening worker: exit 1 with a message, not a silent SIGBUS,
 *     when it maps the file (--mmap-weights); unaffected when it copied it (the default);
 *   - one owner per worker: a second client cannot truncate, prefill or shut down the owner's
 *     session; the worker is free again (state reset) when the owner disconnects;
 *   - 30 connections holding half-sent frames: frames over nng's frame limit are closed at once, and
 *     past 4 connections the oldest that is not the owner's is, the worker's memory stays flat, the
 *     owner is still served;
 *   - a tokenize text that could exceed the reply's token cap is refused before tokenising;
 *   - --backend ref (kernels/backend_ref.c): the CLI's logits and greedy tokens byte-identical to
 *     cpu's, the handshake's device "ref-c", a MoE model refused naming the feature.
 * The worker is build/strata-worker beside this program's directory (make test builds it first). */
#include "tests/check.h"
#include "tests/gguf_edit.h"
#include "tests/proc.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char worker[1024], tmpdir[64], model[512];

static const char *describe(int st) {
    static char buf[64];
    if (st == -1) snprintf(buf, sizeof buf, "still running after the wait");
    else if (WIFEXITED(st)) snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(buf, sizeof buf, "killed by signal %d", WTERMSIG(st));
    else snprintf(buf, sizeof buf, "status 0x%x", st);
    return buf;
}

/* stories260K with output_norm.weight all NaN (every logit NaN), written to tmpdir/nan.gguf. */
static int make_nan_model(char *path, size_t len) {
    ge_src s;
    ge_out o;
    if (ge_load(model, &s)) return -1;
    ge_begin(&o, &s);
    ge_copy_kvs(&o, &s, NULL);
    ge_copy_tensors(&o, &s);
    ge_finish(&o, &s, 32);
    float *d = (float *)(o.p + o.data_off + ge_tensor_offset(&s, ge_find_tensor(&s, "output_norm.weight")));
    for (int i = 0; i < 64; i++) d[i] = NAN;
    snprintf(path, len, "%s/nan.gguf", tmpdir);
    int rc = ge_write(&o, path);
    ge_free_out(&o);
    ge_free_src(&s);
    return rc;
}

/* A client: dial url (waiting for the worker to listen) and say hello. Returns the hello's code. */
static int client(const char *url, nng_socket *s, char *err, size_t errlen) {
    int rc = proto_dial(url, 20000, 1 << 26, s, err, errlen);
    if (rc) return rc;
    proto_msg req, rep;
    proto_init(&req, PROTO_HELLO, 0, 1);
    rc = proto_call(*s, &req, &rep, 1 << 20, err, errlen);
    proto_msg_free(&rep);
    return rc;
}

static int call_simple(nng_socket s, proto_type type, uint64_t arg, uint64_t *n_past, char *err, size_t errlen) {
    static uint64_t id = 100;
    proto_msg req, rep;
    proto_init(&req, type, 0, ++id);
    if (type == PROTO_TRUNCATE) req.truncate_req.depth = arg;
    int rc = proto_call(s, &req, &rep, 1 << 24, err, errlen);
    if (rc == 0 && n_past) *n_past = type == PROTO_STATS ? rep.stats_rep.n_past : rep.truncate_rep.n_past;
    proto_msg_free(&rep);
    return rc;
}

static int prefill(nng_socket s, int n, int first, uint32_t rows, uint64_t *n_past, char *err, size_t errlen) {
    int32_t tok[64];
    for (int i = 0; i < n && i < 64; i++) tok[i] = first + i;
    proto_msg req, rep;
    proto_init(&req, PROTO_PREFILL, 0, 7);
    req.prefill_req.tokens = tok;
    req.prefill_req.n_tokens = (size_t)n;
    req.prefill_req.rows = rows;
    int rc = proto_call(s, &req, &rep, 1 << 24, err, errlen);
    if (rc == 0 && n_past) *n_past = rep.prefill_rep.n_past;
    proto_msg_free(&rep);
    return rc;
}

/* ---- non-finite logits ------------------------------------------------------------------------- */

static void test_nonfinite(void) {
    char nan[256], err[600];
    if (make_nan_model(nan, sizeof nan)) { CHECK(0, "write the NaN model"); return; }
    const char *args[] = { "--model", nan, "--prompt", "Once upon a time", "--max-new", "4", NULL };
    int st = proc_wait_for(proc_spawn(tmpdir, worker, "cli_nan", args), 20000);
    char out[64];
    snprintf(out, sizeof out, "%s", proc_slurp(tmpdir, "cli_nan", "out"));
    const char *e = proc_slurp(tmpdir, "cli_nan", "err");
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && out[0] == 0 && strstr(e, "non-finite"),
          "CLI --prompt --max-new on NaN logits: exit 1 with an error and no tokens (%s, stdout '%s', stderr %.200s)",
          describe(st), out, e);

    char url[128];
    snprintf(url, sizeof url, "ipc://%s/nan.ipc", tmpdir);
    const char *sargs[] = { "--model", nan, "--listen", url, NULL };
    pid_t pid = proc_spawn(tmpdir, worker, "srv_nan", sargs);
    nng_socket s;
    int rc = client(url, &s, err, sizeof err);
    CHECK(rc == 0, "the NaN model's worker answers hello (%s)", rc ? err : "ok");
    if (rc == 0) {
        err[0] = 0;
        rc = prefill(s, 5, 1, PROTO_ROWS_LAST, NULL, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "non-finite"), "server: a prefill with NaN logits gets an error reply (%s)", err);
        proto_msg req, rep;
        proto_init(&req, PROTO_GENERATE, 0, 9);
        req.generate_req.n = 4;
        err[0] = 0;
        rc = proto_call(s, &req, &rep, 1 << 20, err, sizeof err);
        int t0 = rc == 0 && rep.generate_rep.n ? rep.generate_rep.tokens[0] : -1;
        proto_msg_free(&rep);
        CHECK(rc != 0, "server: generate after it is an error too, not token %d (%s)", t0, err);
        nng_close(s);
    }
    kill(pid, SIGTERM);
    proc_wait_for(pid, 5000);
}

/* ---- the memory check ---------------------------------------------------------------------------- */

static void test_memory(void) {
    const char *cache = getenv("STRATA_CACHE");
    char smol[512];
    snprintf(smol, sizeof smol, "%s/smollm2-135m-instruct-q4_1.gguf", cache ? cache : "");
    if (!cache || access(smol, R_OK)) {
        const char *home = getenv("HOME");
        snprintf(smol, sizeof smol, "%s/.cache/strata/smollm2-135m-instruct-q4_1.gguf", home ? home : "");
    }
    /* stories260K, f32 cache, 4M tokens: 5 GiB per worker; as one of 64 arms: 320 GiB */
    const char *a1[] = { "--model", model, "--kv", "f32", "--max-context", "4194304", "--mem-arms", "64",
                         "--prompt", "hi", "--max-new", "1", NULL };
    double t0 = clock_s();
    int st = proc_wait_for(proc_spawn(tmpdir, worker, "mem1", a1), 20000);
    double dt = clock_s() - t0;
    const char *e = proc_slurp(tmpdir, "mem1", "err");
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, "--max-context") && strstr(e, "64 workers") &&
          strstr(e, "--allow-overcommit") && dt < 5,
          "64 arms of a 5 GiB cache: refused in %.1f s before reserving it (%s: %.300s)", dt, describe(st), e);
    if (access(smol, R_OK)) {
        printf("# skip: %s absent (make models)\n", smol);
        return;
    }
    /* the case: SmolLM2 at 4M tokens (90 GiB of f16 cache) proceeded on a 24 GB machine */
    const char *a2[] = { "--model", smol, "--max-context", "4194304", "--prompt", "hi", "--max-new", "1", NULL };
    t0 = clock_s();
    st = proc_wait_for(proc_spawn(tmpdir, worker, "mem2", a2), 60000);
    dt = clock_s() - t0;
    e = proc_slurp(tmpdir, "mem2", "err");
    int big = strstr(e, "MemAvailable") != NULL;
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && big && dt < 10,
          "SmolLM2 --max-context 4194304: a clear error in %.1f s (%s: %.300s)", dt, describe(st), e);
    const char *a3[] = { "--model", smol, "--max-context", "4194304", "--allow-overcommit", "--prompt", "hi",
                         "--max-new", "1", NULL };
    st = proc_wait_for(proc_spawn(tmpdir, worker, "mem3", a3), 60000);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "with --allow-overcommit it starts and runs (%s: %.200s)",
          describe(st), proc_slurp(tmpdir, "mem3", "err"));
}

/* ---- the model file truncated under a running worker ------------------------------------------------ */

static void test_truncated(void) {
    /* mapped (--mmap-weights): the next prefill faults on the missing pages; copied (the default):
     * the worker read the file at start and keeps serving */
    for (int mapped = 1; mapped >= 0; mapped--) {
        char copy[256], url[128], err[600];
        const char *name = mapped ? "trunc" : "trunc-copy";
        snprintf(copy, sizeof copy, "%s/%s.gguf", tmpdir, name);
        snprintf(url, sizeof url, "ipc://%s/%s.ipc", tmpdir, name);
        ge_src s;
        if (ge_load(model, &s)) { CHECK(0, "read %s", model); return; }
        FILE *f = fopen(copy, "wb");
        int ok = f && fwrite(s.p, 1, s.n, f) == s.n;
        if (f) fclose(f);
        ge_free_src(&s);
        if (!ok) { CHECK(0, "write %s", copy); return; }
        const char *args_map[] = { "--model", copy, "--listen", url, "--mmap-weights", NULL };
        const char *args_copy[] = { "--model", copy, "--listen", url, NULL };
        pid_t pid = proc_spawn(tmpdir, worker, name, mapped ? args_map : args_copy);
        nng_socket c;
        int rc = client(url, &c, err, sizeof err);
        CHECK(rc == 0, "a worker on a copy of the model answers hello (%s; %s)", mapped ? "mapped" : "copied", rc ? err : "ok");
        if (rc) { kill(pid, SIGKILL); proc_wait_for(pid, 5000); return; }
        if (truncate(copy, 4096)) { CHECK(0, "truncate %s", copy); }
        rc = prefill(c, 8, 1, PROTO_ROWS_LAST, NULL, err, sizeof err);
        if (mapped) {
            int st = proc_wait_for(pid, 10000);
            const char *e = proc_slurp(tmpdir, name, "err");
            CHECK(rc != 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, "truncated"),
                  "--mmap-weights: after the file is truncated the next prefill makes the worker exit 1 with a message "
                  "(%s: %.300s)", describe(st), e);
        } else {
            int alive = kill(pid, 0) == 0;
            CHECK(rc == 0 && alive, "copied weights: after the file is truncated the worker still prefills (rc %d: %s)",
                  rc, rc ? err : "ok");
            kill(pid, SIGKILL);
            proc_wait_for(pid, 5000);
        }
        nng_close(c);
    }
}

/* ---- one owner per worker ------------------------------------------------------------------------ */

static void test_owner(void) {
    char url[128], err[600];
    snprintf(url, sizeof url, "ipc://%s/own.ipc", tmpdir);
    const char *args[] = { "--model", model, "--listen", url, NULL };
    pid_t pid = proc_spawn(tmpdir, worker, "own", args);
    nng_socket a, b;
    uint64_t np = 0;
    int rc = client(url, &a, err, sizeof err);
    if (!rc) rc = prefill(a, 10, 1, PROTO_ROWS_NONE, &np, err, sizeof err);
    CHECK(rc == 0 && np == 10, "the first client says hello and prefills 10 tokens (%s)", rc ? err : "ok");
    if (rc) { kill(pid, SIGKILL); proc_wait_for(pid, 5000); return; }
    err[0] = 0;
    rc = client(url, &b, err, sizeof err);
    CHECK(rc == PROTO_E_BUSY && strstr(err, "owned by another driver"),
          "a second client's hello is refused: owned by another driver (rc %d: %s)", rc, err);
    int r1 = call_simple(b, PROTO_TRUNCATE, 0, NULL, err, sizeof err);
    int r2 = prefill(b, 3, 50, PROTO_ROWS_LAST, NULL, err, sizeof err);
    int r3 = call_simple(b, PROTO_SHUTDOWN, 0, NULL, err, sizeof err);
    CHECK(r1 == PROTO_E_BUSY && r2 == PROTO_E_BUSY && r3 == PROTO_E_BUSY,
          "its truncate, prefill and shutdown are refused (%d %d %d)", r1, r2, r3);
    np = 0;
    int st = 0;
    rc = call_simple(a, PROTO_STATS, 0, &np, err, sizeof err);
    int gone = waitpid(pid, &st, WNOHANG) == pid;
    CHECK(rc == 0 && np == 10 && !gone, "the owner's stream is untouched (n_past %llu) and the worker still runs (%s)",
          (unsigned long long)np, gone ? describe(st) : "running");
    if (gone) { nng_close(a); nng_close(b); return; }
    rc = prefill(a, 1, 11, PROTO_ROWS_LAST, &np, err, sizeof err);
    CHECK(rc == 0 && np == 11, "the owner goes on (n_past %llu)", (unsigned long long)np);
    nng_close(a);
    /* the owner gone: the next hello takes over a reset worker */
    proto_msg req, rep;
    rc = -1;
    nng_socket_set_ms(b, NNG_OPT_SENDTIMEO, 500);
    nng_socket_set_ms(b, NNG_OPT_RECVTIMEO, 500);
    for (int t = 0; t < 100 && rc != 0; t++) {
        proto_init(&req, PROTO_HELLO, 0, 5);
        rc = proto_call(b, &req, &rep, 1 << 20, err, sizeof err);
        proto_msg_free(&rep);
        if (rc) proc_sleep_ms(20);
    }
    np = 99;
    if (!rc) rc = call_simple(b, PROTO_STATS, 0, &np, err, sizeof err);
    CHECK(rc == 0 && np == 0, "after the owner disconnects the second client owns a reset worker (n_past %llu: %s)",
          (unsigned long long)np, rc ? err : "ok");
    err[0] = 0;
    rc = call_simple(b, PROTO_SHUTDOWN, 0, NULL, err, sizeof err);
    nng_close(b);
    st = proc_wait_for(pid, 5000);
    CHECK(rc == 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "its shutdown stops the worker (rc %d %s, %s)",
          rc, err, describe(st));
}

/* ---- --backend ref -------------------------------------------------------------------------------- */

/* The bytes of path (at most cap) into buf; their count, or -1. */
static long slurp_file(const char *path, char *buf, long cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long n = (long)fread(buf, 1, (size_t)cap, f);
    fclose(f);
    return n;
}

static void test_backend_ref(void) {
    static char dump[2][1 << 17];   /* stories260K: 8 + rows x 512 x 4 bytes */
    static const char *const kinds[2] = { "cpu", "ref" };
    char path[2][256], out[2][512], err[600];
    long n[2];
    int st[2];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/dump-%s.bin", tmpdir, kinds[k]);
        const char *args[] = { "--model", model, "--backend", kinds[k], "--kv", "int8", "--prompt", "Once upon a time",
                               "--max-new", "8", "--dump-logits", path[k], NULL };
        char tag[32];
        snprintf(tag, sizeof tag, "cli_%s", kinds[k]);
        st[k] = proc_wait_for(proc_spawn(tmpdir, worker, tag, args), 60000);
        snprintf(out[k], sizeof out[k], "%s", proc_slurp(tmpdir, tag, "out"));
        n[k] = slurp_file(path[k], dump[k], sizeof dump[k]);
    }
    CHECK(proc_exit_code(st[0]) == 0 && proc_exit_code(st[1]) == 0 && n[0] > 8 && n[0] == n[1] &&
          !memcmp(dump[0], dump[1], (size_t)n[0]) && out[0][0] && !strcmp(out[0], out[1]),
          "--backend ref: the prompt's logit rows (%ld bytes) and 8 greedy tokens byte-identical to --backend cpu (%s, %s)",
          n[1], describe(st[1]), proc_slurp(tmpdir, "cli_ref", "err"));
    char url[128];
    snprintf(url, sizeof url, "ipc://%s/ref.ipc", tmpdir);
    const char *sargs[] = { "--model", model, "--backend", "ref", "--threads", "2", "--listen", url, NULL };
    pid_t pid = proc_spawn(tmpdir, worker, "srv_ref", sargs);
    nng_socket s;
    proto_msg req, rep;
    int rc = proto_dial(url, 20000, 1 << 26, &s, err, sizeof err);
    if (rc == 0) {
        proto_init(&req, PROTO_HELLO, 0, 1);
        rc = proto_call(s, &req, &rep, 1 << 20, err, sizeof err);
        CHECK(rc == 0 && !strcmp(rep.hello_rep.device, "ref-c"), "a --backend ref worker's handshake: device ref-c (%s)",
              rc ? err : rep.hello_rep.device);
        if (rc == 0) proto_msg_free(&rep);
        uint64_t np = 0;
        rc = prefill(s, 12, 3, PROTO_ROWS_LAST, &np, err, sizeof err);
        CHECK(rc == 0 && np == 12, "it prefills (n_past %llu: %s)", (unsigned long long)np, rc ? err : "ok");
        nng_close(s);
    } else CHECK(0, "dial the --backend ref worker: %s", err);
    kill(pid, SIGTERM);
    proc_wait_for(pid, 5000);
    const char *moe[] = { "--model", "tests/fixtures/models/rand-qwen3moe.gguf", "--backend", "ref", "--prompt", "Hello", NULL };
    int sm = proc_wait_for(proc_spawn(tmpdir, worker, "ref_moe", moe), 20000);
    const char *e = proc_slurp(tmpdir, "ref_moe", "err");
    CHECK(proc_exit_code(sm) == 1 && strstr(e, "backend ref does not implement mixture-of-experts layers (n_expert 8)"),
          "--backend ref on a MoE model: exit 1 naming the feature (%s: %.200s)", describe(sm), e);
    const char *bad[] = { "--model", model, "--backend", "reff", "--prompt", "Hello", NULL };
    int sb = proc_wait_for(proc_spawn(tmpdir, worker, "ref_bad", bad), 20000);
    e = proc_slurp(tmpdir, "ref_bad", "err");
    CHECK(proc_exit_code(sb) == 2 && strstr(e, "cpu, ref, llama"), "--backend reff: exit 2 listing cpu, ref, llama (%.200s)", e);
}

/* ---- many connections with half-sent frames ------------------------------------------------------- */

static long vm_rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* A raw ipc connection speaking nng's SP header as a req0 peer. Returns the fd or -1. */
static int raw_connect(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) { if (fd >= 0) close(fd); return -1; }
    static const unsigned char hdr[8] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0 };   /* req0 = 0x30 */
    if (send(fd, hdr, 8, MSG_NOSIGNAL) != 8) { close(fd); return -1; }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Sends a frame header claiming len bytes, then up to part bytes of it (as much as goes). */
static size_t raw_half_frame(int fd, uint64_t len, size_t part) {
    unsigned char h[9] = { 1 };
    for (int i = 0; i < 8; i++) h[1 + i] = (unsigned char)(len >> (56 - 8 * i));
    if (send(fd, h, 9, MSG_NOSIGNAL) != 9) return 0;
    static char chunk[1 << 16];
    size_t sent = 0;
    double t0 = clock_s();
    while (sent < part && clock_s() - t0 < 2) {
        ssize_t k = send(fd, chunk, sizeof chunk, MSG_NOSIGNAL);
        if (k > 0) { sent += (size_t)k; continue; }
        if (k < 0 && errno == EAGAIN) { proc_sleep_ms(1); continue; }
        break;
    }
    return sent;
}

/* 1 when the peer closed fd (EOF or reset), reading away anything it sent. */
static int raw_closed(int fd) {
    char buf[256];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k == 0) return 1;
        if (k < 0) return errno != EAGAIN;
    }
}

static void test_flood(void) {
    char url[160], path[96], err[600];
    snprintf(path, sizeof path, "%s/flood.ipc", tmpdir);
    snprintf(url, sizeof url, "ipc://%s", path);
    const char *args[] = { "--model", model, "--listen", url, NULL };
    pid_t pid = proc_spawn(tmpdir, worker, "flood", args);
    nng_socket a;
    int rc = client(url, &a, err, sizeof err);
    CHECK(rc == 0, "the owner connects (%s)", rc ? err : "ok");
    if (rc) { kill(pid, SIGKILL); proc_wait_for(pid, 5000); return; }
    long rss0 = vm_rss_kb(pid);
    /* 30 connections, each claiming a frame just over nng's limit (PROTO_REQ_FRAME_MAX, 128 MiB + 64 KiB;
     * one under it is read and answered too-big) and sending 8 MiB of it */
    int fds[30], n_fd = 0;
    size_t sent = 0;
    for (int i = 0; i < 30; i++) {
        int fd = raw_connect(path);
        if (fd < 0) continue;
        fds[n_fd++] = fd;
        sent += raw_half_frame(fd, PROTO_REQ_FRAME_MAX + 1, 8u << 20);
    }
    proc_sleep_ms(300);
    long rss1 = vm_rss_kb(pid);
    int closed = 0;
    for (int i = 0; i < n_fd; i++) closed += raw_closed(fds[i]);
    for (int i = 0; i < n_fd; i++) close(fds[i]);
    printf("# frames over the limit: %d connections, %zu MiB sent, RSS %ld -> %ld MiB, %d closed by the worker\n", n_fd,
           sent >> 20, rss0 >> 10, rss1 >> 10, closed);
    CHECK(n_fd == 30 && rss1 - rss0 < 64 * 1024 && closed == 30,
          "30 half-sent frames over nng's limit: all 30 connections closed, RSS grew %ld MiB (< 64)", (rss1 - rss0) >> 10);
    /* 30 connections with frames under the cap: at most SERVE_MAX_PIPES (4) are kept, with the owner */
    n_fd = 0;
    for (int i = 0; i < 30; i++) {
        int fd = raw_connect(path);
        if (fd < 0) continue;
        fds[n_fd++] = fd;
        raw_half_frame(fd, 4u << 20, 1u << 20);
    }
    proc_sleep_ms(300);
    long rss2 = vm_rss_kb(pid);
    closed = 0;
    for (int i = 0; i < n_fd; i++) closed += raw_closed(fds[i]);
    printf("# 4 MiB frames: %d connections, RSS %ld MiB, %d closed\n", n_fd, rss2 >> 10, closed);
    CHECK(n_fd == 30 && closed >= 27 && rss2 - rss0 < 64 * 1024,
          "30 connections under the frame cap: %d of 30 closed (the owner + 3 kept), RSS grew %ld MiB",
          closed, (rss2 - rss0) >> 10);
    uint64_t np = 99;
    rc = call_simple(a, PROTO_STATS, 0, &np, err, sizeof err);
    CHECK(rc == 0 && np == 0, "the owner is still served (%s)", rc ? err : "ok");
    for (int i = 0; i < n_fd; i++) close(fds[i]);

    /* a tokenize text that could give more tokens than a reply carries: refused before tokenising */
    size_t big = 6u << 20;
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++) text[i] = "ab cd"[i % 5];
    proto_msg req, rep;
    proto_init(&req, PROTO_TOKENIZE, 0, 77);
    req.tokenize_req.text = text;
    req.tokenize_req.n_text = big;
    double t0 = clock_s();
    err[0] = 0;
    rc = proto_call(a, &req, &rep, 1 << 26, err, sizeof err);
    double dt = clock_s() - t0;
    proto_msg_free(&rep);
    CHECK(rc == PROTO_E_TOOBIG && strstr(err, "at most") && dt < 2,
          "a 6 MiB tokenize text (up to 4 tokens a byte: over the 16M cap) is refused in %.2f s (rc %d: %s)", dt, rc, err);
    req.tokenize_req.n_text = 1u << 20;
    rc = proto_call(a, &req, &rep, 1 << 26, err, sizeof err);
    size_t nt = rc == 0 ? rep.tokenize_rep.n_tokens : 0;
    proto_msg_free(&rep);
    CHECK(rc == 0 && nt > 0, "a 1 MiB text is tokenised (%zu tokens)", nt);
    free(text);

    /* vocab: the pieces decode a tokenised text back to the text (the SPM space prefix aside) */
    {
        const char *s = "One day, a little cat sat on the mat.";
        proto_msg tq, tr, vq, vr;
        proto_init(&tq, PROTO_TOKENIZE, 0, 78);
        tq.tokenize_req.text = (char *)s;
        tq.tokenize_req.n_text = strlen(s);
        proto_init(&vq, PROTO_VOCAB, 0, 79);
        int rc1 = proto_call(a, &tq, &tr, 1 << 26, err, sizeof err);
        int rc2 = rc1 ? rc1 : proto_call(a, &vq, &vr, 1 << 26, err, sizeof err);
        char back[256] = "";
        size_t w = 0;
        int ok = rc2 == 0 && vr.vocab_rep.n_vocab > 0 && tr.tokenize_rep.n_tokens > 0;
        for (size_t i = 0; ok && i < tr.tokenize_rep.n_tokens; i++) {
            int32_t t = tr.tokenize_rep.tokens[i];
            size_t k = (size_t)(vr.vocab_rep.offsets[t + 1] - vr.vocab_rep.offsets[t]);
            if (t < 0 || (uint32_t)t >= vr.vocab_rep.n_vocab || w + k >= sizeof back) { ok = 0; break; }
            memcpy(back + w, vr.vocab_rep.pieces + vr.vocab_rep.offsets[t], k);
            w += k;
        }
        back[w] = 0;
        CHECK(ok && !strcmp(back + (back[0] == ' '), s), "vocab: %u pieces decode the tokens of a text back to it "
              "(\"%s\"; %s)", rc2 == 0 ? vr.vocab_rep.n_vocab : 0, back, rc2 ? err : "ok");
        int ctl = 0;
        for (uint32_t t = 0; rc2 == 0 && t < vr.vocab_rep.n_vocab; t++) ctl += vr.vocab_rep.control[t];
        CHECK(rc2 == 0 && ctl >= 1 && vr.vocab_rep.n_template == 0,
              "vocab: %d control tokens, no chat template in stories260K", ctl);
        if (!rc1) proto_msg_free(&tr);
        if (!rc2) proto_msg_free(&vr);
    }
    rc = call_simple(a, PROTO_SHUTDOWN, 0, NULL, err, sizeof err);
    nng_close(a);
    int st = proc_wait_for(pid, 5000);
    CHECK(rc == 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the worker answers shutdown and exits 0 (%s)",
          describe(st));
}

int main(int argc, char **argv) {
    (void)argc;
    const char *w = getenv("STRATA_TEST_WORKER");
    char self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    if (w) snprintf(worker, sizeof worker, "%s", w);
    else snprintf(worker, sizeof worker, "%s/../strata-worker", dirname(self));
    snprintf(model, sizeof model, "tests/fixtures/models/stories260K.gguf");   /* run from the repo root */
    if (access(worker, X_OK) || access(model, R_OK)) {
        printf("skip: needs %s and %s\n0 passed, 0 failed, 1 skipped\n", worker, model);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-wtest-XXXXXX");
    if (!mkdtemp(tmpdir)) { CHECK(0, "mkdtemp"); return check_done(); }
    test_nonfinite();
    test_memory();
    test_truncated();
    test_owner();
    test_backend_ref();
    test_flood();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return check_done();
}
