/* test_lockout.c — a worker cannot be locked out (issue 22, F3) and answers an oversize request
 * (each check failed against the worker before its fix):
 *   - SERVE_MAX_PIPES + 1 (5) raw TCP connections that send only the SP header, and 3 that send
 *     nothing, to a plain-tcp worker on 127.0.0.1: the real driver still sweeps through it, and a
 *     protocol client still says hello at once (a new connection replaces the oldest one that is
 *     not the owner);
 *   - those connections are closed after --hello-timeout (2 s here), the owner's is not, and the
 *     worker says so on stderr;
 *   - a request over the worker's receive cap (a 20 MiB tokenize text, the cap being 16 MiB +
 *     64 KiB for stories260K) gets one PROTO_E_TOOBIG reply and the connection stays the owner's;
 *     the driver given a 20 MiB document prints that error, not "Connection reset";
 *   - --hello-timeout outside [1, 3600] is a usage error.
 * The worker and driver are build/strata-worker and build/strata-driver beside this program's
 * directory (make test builds them first); run from the repository root. */
#include "tests/check.h"
#include "tests/proc.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HELLO_S   2    /* the worker's --hello-timeout in this test */
#define N_SQUAT   5    /* SERVE_MAX_PIPES + 1 */
#define N_SILENT  3

static char worker[1024], driver[1024], tmpdir[64];
static const char *model = "tests/fixtures/models/stories260K.gguf";

/* A raw TCP connection to 127.0.0.1:port that sends nng's SP header as a req0 peer (header 1) or
 * nothing at all (header 0), then nothing more. Non-blocking. Returns the fd or -1. */
static int squat(int port, int header) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) { if (fd >= 0) close(fd); return -1; }
    static const unsigned char hdr[8] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0 };   /* req0 = 0x30 */
    if (header && send(fd, hdr, 8, MSG_NOSIGNAL) != 8) { close(fd); return -1; }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* 1 when the peer closed fd (EOF or reset), reading away anything it sent (its SP header). */
static int peer_closed(int fd) {
    char buf[256];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k == 0) return 1;
        if (k < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    }
}

/* A protocol client as the driver connects: dial, then hello at once. Returns the hello's code. */
static int client(const char *url, nng_socket *s, char *err, size_t errlen) {
    int rc = proto_dial(url, 10000, 1 << 26, s, err, errlen);
    if (rc) return rc;
    nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, 10000);
    proto_msg req, rep;
    proto_init(&req, PROTO_HELLO, 0, 1);
    rc = proto_call(*s, &req, &rep, 1 << 20, err, errlen);
    proto_msg_free(&rep);
    if (rc) nng_close(*s);
    return rc;
}

static int call_stats(nng_socket s, uint64_t id, char *err, size_t errlen) {
    proto_msg req, rep;
    proto_init(&req, PROTO_STATS, 0, id);
    int rc = proto_call(s, &req, &rep, 1 << 20, err, errlen);
    proto_msg_free(&rep);
    return rc;
}

static void test_lockout(void) {
    char url[256], err[600], hs[16];
    snprintf(hs, sizeof hs, "%d", HELLO_S);
    const char *wargs[] = { "--model", model, "--kv", "int8", "--threads", "1", "--listen", "tcp://127.0.0.1:0",
                            "--hello-timeout", hs, NULL };
    pid_t w = proc_spawn(tmpdir, worker, "w", wargs);
    if (proc_listen_url(tmpdir, "w", w, url, sizeof url)) {
        CHECK(0, "the worker listens (%.300s)", proc_slurp(tmpdir, "w", "err"));
        proc_wait_for(w, 0);
        return;
    }
    int port = atoi(strrchr(url, ':') + 1);

    /* 1. squatters hold every slot; the real driver sweeps through the worker anyway */
    int fds[N_SQUAT + N_SILENT], n = 0;
    for (int i = 0; i < N_SQUAT + N_SILENT; i++)
        if ((fds[n] = squat(port, i < N_SQUAT)) >= 0) n++;
    proc_sleep_ms(300);
    char out[128], arm[300];
    snprintf(out, sizeof out, "%s/res", tmpdir);
    snprintf(arm, sizeof arm, "int8=%s", url);
    const char *dargs[] = { "sweep", "--model", model, "--doc", "tests/fixtures/stories260K/a.txt", "--arms", "f16",
                            "--arm", arm, "--threads", "1", "--depths", "3", "--fork", "6", "--quiet", "--out", out,
                            NULL };
    double t0 = clock_s();
    int st = proc_wait_for(proc_spawn(tmpdir, driver, "drv", dargs), 60000);
    double dt = clock_s() - t0;
    CHECK(n == N_SQUAT + N_SILENT && proc_exit_code(st) == 0 && dt < 30,
          "%d connections with only the SP header and %d silent ones: the driver's sweep through the worker exits 0 "
          "(%d, %.1f s; %.300s)", N_SQUAT, N_SILENT, proc_exit_code(st), dt, proc_slurp(tmpdir, "drv", "err"));
    for (int i = 0; i < n; i++) close(fds[i]);
    proc_sleep_ms(300);   /* (the worker sees them go) */

    /* 2. again, with a protocol client: hello answered at once */
    n = 0;
    for (int i = 0; i < N_SQUAT; i++)
        if ((fds[n] = squat(port, 1)) >= 0) n++;
    double t_squat = clock_s();
    proc_sleep_ms(300);
    nng_socket c;
    t0 = clock_s();
    int rc = client(url, &c, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(n == N_SQUAT && rc == 0 && dt < 3, "%d squatters: a client's hello is answered in %.2f s (%s)", n, dt,
          rc ? err : "ok");

    /* 3. the squatters are closed after the deadline; the owner is not */
    double closed_at[N_SQUAT];
    int n_closed = 0;
    for (int i = 0; i < n; i++) closed_at[i] = -1;
    while (n_closed < n && clock_s() - t_squat < HELLO_S + 4) {
        for (int i = 0; i < n; i++)
            if (closed_at[i] < 0 && peer_closed(fds[i])) { closed_at[i] = clock_s() - t_squat; n_closed++; }
        proc_sleep_ms(20);
    }
    int early = 0;   /* closed before the deadline: only those that made room for newer connections */
    double last = 0;
    for (int i = 0; i < n; i++) {
        if (closed_at[i] >= 0 && closed_at[i] < HELLO_S - 0.2) early++;
        if (closed_at[i] > last) last = closed_at[i];
    }
    for (int i = 0; i < n; i++) close(fds[i]);
    char e2[600] = "";
    int rc2 = rc ? -1 : call_stats(c, 2, e2, sizeof e2);
    CHECK(n_closed == n && early >= 2 && last < HELLO_S + 2.5 && rc2 == 0,
          "all %d squatters closed by the worker (%d), 2 or more at once to make room (%d), the others after the %d s "
          "deadline (the last at %.1f s); the owner's connection outlives it and is served (%s)", n, n_closed, early,
          HELLO_S, last, rc2 ? e2 : "ok");
    if (rc && (rc = client(url, &c, err, sizeof err))) {   /* the squatters are gone: an owner for what follows */
        CHECK(0, "a client's hello (%s)", err);
        kill(w, SIGKILL);
        proc_wait_for(w, 5000);
        return;
    }
    const char *we = proc_slurp(tmpdir, "w", "err");
    CHECK(strstr(we, "did not become the owner") && strstr(we, "--hello-timeout") && strstr(we, "make room"),
          "the worker says it closed them (%.600s)", we);

    /* 4. a request over the worker's receive cap: one TOOBIG reply, the connection kept */
    size_t big = 20u << 20;
    char *text = malloc(big);
    if (!text) { CHECK(0, "malloc"); return; }
    memset(text, 'a', big);
    proto_msg req, rep;
    proto_init(&req, PROTO_TOKENIZE, 0, 3);
    req.tokenize_req.text = text;
    req.tokenize_req.n_text = big;
    t0 = clock_s();
    err[0] = 0;
    rc = proto_call(c, &req, &rep, 1 << 26, err, sizeof err);
    dt = clock_s() - t0;
    proto_msg_free(&rep);
    free(text);
    CHECK(rc == PROTO_E_TOOBIG && strstr(err, "exceeds the limit") && dt < 10,
          "a 20 MiB request to a worker whose cap is 16 MiB + 64 KiB: a too-big reply in %.2f s (rc %d: %s)", dt, rc,
          err);
    err[0] = 0;
    rc = call_stats(c, 4, err, sizeof err);
    CHECK(rc == 0, "... on a connection that stays open and the owner's (%s)", rc ? err : "ok");

    proto_init(&req, PROTO_SHUTDOWN, 0, 5);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    proto_msg_free(&rep);
    nng_close(c);
    st = proc_wait_for(w, 5000);
    CHECK(rc == 0 && proc_exit_code(st) == 0, "the owner shuts the worker down (%s, exit %d)", rc ? err : "ok",
          proc_exit_code(st));
}

/* The driver given a document over the worker's receive cap: the worker's error, once. */
static void test_driver_toobig(void) {
    char doc[128], out[128];
    snprintf(doc, sizeof doc, "%s/big.txt", tmpdir);
    snprintf(out, sizeof out, "%s/big-res", tmpdir);
    FILE *f = fopen(doc, "w");
    static const char line[] = "Once upon a time there was a little cat that sat on the mat.\n";
    for (size_t n = 0; f && n < (20u << 20); n += sizeof line - 1) fputs(line, f);
    if (!f || fclose(f)) { CHECK(0, "write %s", doc); return; }
    const char *dargs[] = { "sweep", "--model", model, "--doc", doc, "--arms", "f16,int8", "--threads", "1", "--depths", "3",
                            "--fork", "6", "--quiet", "--out", out, NULL };
    int st = proc_wait_for(proc_spawn(tmpdir, driver, "drvbig", dargs), 60000);
    const char *e = proc_slurp(tmpdir, "drvbig", "err");
    int lines = 0;
    for (const char *p = e; (p = strstr(p, "error:")); p++) lines++;
    CHECK(proc_exit_code(st) > 0 && lines == 1 && strstr(e, "exceeds the limit") && !strstr(e, "reset"),
          "the driver with a 20 MiB document prints the worker's too-big error once (exit %d: %.400s)",
          proc_exit_code(st), e);
    unlink(doc);
}

static void test_usage(void) {
    const char *good[] = { "--model", model, "--listen", "tcp://127.0.0.1:0", "--hello-timeout", "3600", NULL };
    pid_t w = proc_spawn(tmpdir, worker, "usage1", good);
    char url[256];
    int listens = proc_listen_url(tmpdir, "usage1", w, url, sizeof url) == 0;
    kill(w, SIGTERM);
    int st = proc_wait_for(w, 5000), refused = 0;
    const char *bad[] = { "0", "3601", "x" };
    for (int i = 0; i < 3; i++) {
        const char *args[] = { "--model", model, "--listen", "tcp://127.0.0.1:0", "--hello-timeout", bad[i], NULL };
        refused += proc_exit_code(proc_wait_for(proc_spawn(tmpdir, worker, "usage", args), 10000)) == 2;
    }
    const char *nolisten[] = { "--model", model, "--hello-timeout", "5", "--prompt", "a", NULL };
    refused += proc_exit_code(proc_wait_for(proc_spawn(tmpdir, worker, "usage2", nolisten), 10000)) == 2;
    CHECK(listens && proc_exit_code(st) == 0 && refused == 4,
          "--hello-timeout 3600: the worker listens (exit %d after SIGTERM: %.200s); 0, 3601, x and without "
          "--listen: usage errors (%d of 4)", proc_exit_code(st), proc_slurp(tmpdir, "usage1", "err"), refused);
}

int main(int argc, char **argv) {
    (void)argc;
    char self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    const char *dir = dirname(self);
    const char *w = getenv("STRATA_TEST_WORKER");
    if (w) snprintf(worker, sizeof worker, "%s", w);
    else snprintf(worker, sizeof worker, "%s/../strata-worker", dir);
    snprintf(driver, sizeof driver, "%s/../strata-driver", dir);
    if (access(worker, X_OK) || access(driver, X_OK) || access(model, R_OK)) {
        printf("skip: needs %s, %s and %s\n0 passed, 0 failed, 1 skipped\n", worker, driver, model);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-lockout-XXXXXX");
    if (!mkdtemp(tmpdir)) { CHECK(0, "mkdtemp"); return check_done(); }
    test_usage();
    test_lockout();
    test_driver_toobig();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return check_done();
}
