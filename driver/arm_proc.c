/* arm_proc.c — the driver's arms, part 2: worker processes (the launch template, spawning, exit
 * status, the log tail), stopping and reaping, the private temp directory and saving logs. See
 * arm.h; specs are in arm_spec.c, connections in arm.c.
 */

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
 * Processes
 * ========================================================================================== */

/* Async-signal-safe: decimal of a non-negative int into buf (>= 12 bytes), returns buf. */
static char *itoa_safe(int v, char *buf) {
    char t[12];
    int k = 0;
    if (v < 0) v = 0;
    do { t[k++] = (char)('0' + v % 10); v /= 10; } while (v && k < 11);
    for (int i = 0; i < k; i++) buf[i] = t[k - 1 - i];
    buf[k] = 0;
    return buf;
}

void arm_set_options(arm *arms, int n, const arm_options *o) {
    for (int i = 0; i < n; i++) arms[i].opt = o;
}

int arm_launch_check(const char *tpl, char *err, size_t errlen) {
    if (!tpl || !strstr(tpl, "{worker}"))
        return errmsg_set(err, errlen, ARM_E_SPEC, "--launch '%s': the template must contain {worker} (the "
                          "worker's command line), e.g. 'srun -N1 -n1 --gpus=1 {worker}' or 'ssh gpu1 {worker}'",
                          tpl ? tpl : "");
    return 0;
}

/* Appends c to out [outlen] at *off (NUL kept after it). Returns 0 or -1 (no room). */
static int put_char(char *out, size_t outlen, size_t *off, char c) {
    if (*off + 1 >= outlen) return -1;
    out[(*off)++] = c;
    out[*off] = 0;
    return 0;
}

/* Appends s, single-quoted for sh when quote (a ' inside becomes '\''). Returns 0 or -1. */
static int put_word(char *out, size_t outlen, size_t *off, const char *s, int quote) {
    if (quote && put_char(out, outlen, off, '\'')) return -1;
    for (; *s; s++) {
        if (quote && *s == '\'') {
            for (const char *q = "'\\''"; *q; q++)
                if (put_char(out, outlen, off, *q)) return -1;
        } else if (put_char(out, outlen, off, *s)) {
            return -1;
        }
    }
    return quote ? put_char(out, outlen, off, '\'') : 0;
}

int arm_launch_command(const char *tpl, const char *const *argv, const char *name, int i, char *out,
                       size_t outlen, char *err, size_t errlen) {
    size_t off = 0;
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    out[0] = 0;
    for (const char *p = tpl; *p;) {
        int bad = 0;
        if (!strncmp(p, "{worker}", 8)) {
            for (int k = 0; argv[k] && !bad; k++)
                bad = (k && put_word(out, outlen, &off, " ", 0)) || put_word(out, outlen, &off, argv[k], 1);
            p += 8;
        } else if (!strncmp(p, "{arm}", 5)) {
            bad = put_word(out, outlen, &off, name, 1);
            p += 5;
        } else if (!strncmp(p, "{i}", 3)) {
            bad = put_word(out, outlen, &off, num, 0);
            p += 3;
        } else {
            char one[2] = { *p++, 0 };
            bad = put_word(out, outlen, &off, one, 0);
        }
        if (bad) return errmsg_set(err, errlen, ARM_E_SPEC, "--launch: the command for arm %s is too long", name);
    }
    return 0;
}

void arm_signal(const arm *a, int sig) {
    if (kill(-a->pid, sig)) kill(a->pid, sig);
}

/* Closes a launched arm's pipes (the launcher's stdin closing tells a worker started through ssh or
 * srun to exit). */
static void launch_close(arm *a) {
    if (!a->launched) return;
    if (a->out_fd >= 0) close(a->out_fd);
    if (a->in_fd >= 0) close(a->in_fd);
    a->out_fd = a->in_fd = -1;
}

/* A worker's command line: argv [32] (NULL-terminated; the numbers are in w's buffers). */
typedef struct {
    char threads[16], prefill[16], ctx[16], arms[16], other[24];
    const char *argv[32];
} worker_cmd;

/* The command line of arm a's worker, listening on url (a launched worker also exits when its stdin
 * closes). */
static void worker_argv(const arm *a, const arm_launch *l, const char *url, worker_cmd *w) {
    const arm_options *o = a->opt;
    const char **argv = w->argv;
    snprintf(w->threads, sizeof w->threads, "%d", l->threads);
    snprintf(w->prefill, sizeof w->prefill, "%d", l->prefill);
    snprintf(w->ctx, sizeof w->ctx, "%d", l->max_context);
    snprintf(w->arms, sizeof w->arms, "%d", l->mem_arms);
    snprintf(w->other, sizeof w->other, "%llu", (unsigned long long)a->mem_other);
    int k = 0;
    argv[k++] = l->worker;
    if (a->backend[0]) { argv[k++] = "--backend"; argv[k++] = a->backend; }
    argv[k++] = "--model"; argv[k++] = a->model[0] ? a->model : l->model;
    argv[k++] = "--kv-k"; argv[k++] = a->kv_k;
    argv[k++] = "--kv-v"; argv[k++] = a->kv_v;
    argv[k++] = "--threads"; argv[k++] = w->threads;
    if (l->prefill > 0) { argv[k++] = "--prefill"; argv[k++] = w->prefill; }
    if (l->max_context > 0) { argv[k++] = "--max-context"; argv[k++] = w->ctx; }
    if (l->mem_arms > 1) { argv[k++] = "--mem-arms"; argv[k++] = w->arms; }
    if (o && o->allow_overcommit) argv[k++] = "--allow-overcommit";
    int own_rope = strncmp(a->backend, "llama", 5) != 0;   /* strata's RoPE: its own engine, or ref */
    if (o && o->rope_f32 && own_rope) { argv[k++] = "--rope-angles"; argv[k++] = "f32"; }
    if (o && o->mmap_weights) argv[k++] = "--mmap-weights";
    if (o && o->kv_host && !strncmp(a->backend, "llama", 5)) { argv[k++] = "--kv-resident"; argv[k++] = "host"; }
    if (a->mem_other) { argv[k++] = "--mem-other-weights"; argv[k++] = w->other; }
    argv[k++] = "--listen"; argv[k++] = url;
    if (o && o->launch) argv[k++] = "--exit-on-stdin-eof";
    argv[k] = NULL;
}

/* Closes the ends of the two pipes that are open (-1: not). */
static void close_pipes(const int in_pipe[2], const int out_pipe[2]) {
    for (int q = 0; q < 2; q++) {
        if (in_pipe[q] >= 0) close(in_pipe[q]);
        if (out_pipe[q] >= 0) close(out_pipe[q]);
    }
}

/* The child after fork: its own process group, killed with the driver (parent), stdin and stdout
 * from the pipes (launched) or /dev/null, stderr into the log; then argv (a local worker) or
 * sh_argv (the launcher). Only async-signal-safe calls until execv. */
static _Noreturn void exec_child(pid_t parent, int launched, const int in_pipe[2], const int out_pipe[2],
                                 int nullfd, int logfd, const char *const *argv, const char *const *sh_argv) {
    setpgid(0, 0);                              /* terminal Ctrl-C reaches the driver only */
    prctl(PR_SET_PDEATHSIG, SIGKILL);           /* the driver died: go too */
    if (getppid() != parent) _exit(126);
    dup2(launched ? in_pipe[0] : nullfd, 0);
    dup2(launched ? out_pipe[1] : nullfd, 1);   /* a local worker's stdout says only where it listens */
    dup2(logfd, 2);
    if (launched) execv(sh_argv[0], (char *const *)sh_argv);
    else execv(argv[0], (char *const *)argv);
    char num[12];
    const char *msg = "strata-driver: cannot execute the worker: errno ";
    (void)!write(2, msg, strlen(msg));
    itoa_safe(errno, num);
    (void)!write(2, num, strlen(num));
    (void)!write(2, "\n", 1);
    _exit(127);
}

int arm_spawn(arm *a, int i, const arm_launch *l, char *err, size_t errlen) {
    char url[ARM_URL_MAX], logp[ARM_URL_MAX];
    if (snprintf(url, sizeof url, "ipc://%s/%d.ipc", l->tmpdir, i) >= (int)sizeof url ||
        snprintf(logp, sizeof logp, "%s/%d.log", l->tmpdir, i) >= (int)sizeof logp)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "temp dir path too long: %s", l->tmpdir);
    const arm_options *o = a->opt;
    const char *launch = o ? o->launch : NULL;
    if (launch) snprintf(url, sizeof url, "%s", o->launch_listen ? o->launch_listen : "tcp://127.0.0.1:0");
    worker_cmd w;
    worker_argv(a, l, url, &w);
    /* launched: sh -c COMMAND, with pipes for the launcher's stdin and stdout */
    char cmd[16384];          /* the launcher's command line (launched arms) */
    int in_pipe[2] = { -1, -1 }, out_pipe[2] = { -1, -1 };
    const char *sh_argv[4] = { "/bin/sh", "-c", cmd, NULL };
    if (launch) {
        int rc = arm_launch_command(launch, w.argv, a->name, i, cmd, sizeof cmd, err, errlen);
        if (rc) return rc;
        launch_close(a);   /* a restart: the previous launcher's pipes */
        if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC)) {
            int e = errno;
            close_pipes(in_pipe, out_pipe);
            return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: pipe: %s", a->name, strerror(e));
        }
    }

    /* appended to: a restarted worker continues its predecessor's log (the temp dir is new) */
    int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) return errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create %s: %s", logp, strerror(errno));
    int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd < 0) {
        close(logfd);
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot open /dev/null: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(logfd);
        close(nullfd);
        close_pipes(in_pipe, out_pipe);
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "arm %s: fork: %s", a->name, strerror(e));
    }
    if (pid == 0) exec_child(parent, launch != NULL, in_pipe, out_pipe, nullfd, logfd, w.argv, sh_argv);
    setpgid(pid, pid);   /* also here: a signal to the group cannot miss a child not yet running */
    close(logfd);
    close(nullfd);
    snprintf(a->url, sizeof a->url, "%s", launch ? "" : url);
    snprintf(a->log_path, sizeof a->log_path, "%s", logp);
    a->pid = pid;
    a->exited = 0;
    if (launch) {
        close(in_pipe[0]);
        close(out_pipe[1]);
        a->launched = 1;
        a->in_fd = in_pipe[1];
        a->out_fd = out_pipe[0];
        FILE *f = fopen(logp, "a");
        if (f) { fprintf(f, "strata-driver: launched: %s\n", cmd); fclose(f); }
    }
    return 0;
}

/* Reaps a local worker if it has exited. Returns 1 when it is (now or before) known dead. */
int arm_poll_exit(arm *a) {
    if (a->remote || a->pid <= 0) return 0;
    if (a->exited) return 1;
    int st;
    pid_t r = waitpid(a->pid, &st, WNOHANG);
    if (r == a->pid) {
        a->exited = 1;
        a->status = st;
        return 1;
    }
    return 0;
}

void arm_describe_status(int status, char *buf, size_t len) {
    if (WIFEXITED(status)) snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(buf, len, "status 0x%x", status);
}

void arm_log_tail_lines(const arm *a, int nlines, char *buf, size_t len) {
    char ring[8][512];
    int have = 0;
    buf[0] = 0;
    if (!a->log_path[0] || len < 2 || nlines < 1) return;
    if (nlines > 8) nlines = 8;
    FILE *f = fopen(a->log_path, "r");
    if (!f) return;
    /* the last 64 KiB is plenty for a few lines */
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        fseek(f, size > 65536 ? size - 65536 : 0, SEEK_SET);
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        int whole = l && line[l - 1] == '\n';
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
        if (!strncmp(line, ARM_RESTART_MARK, strlen(ARM_RESTART_MARK))) have = 0;   /* the current worker's lines only */
        else if (l) snprintf(ring[have++ % nlines], sizeof ring[0], "%s", line);
        /* a longer line: skip its rest */
        while (!whole && fgets(line, sizeof line, f)) whole = strchr(line, '\n') != NULL;
    }
    fclose(f);
    int first = have > nlines ? have - nlines : 0;
    size_t off = 0;
    for (int k = first; k < have && off + 1 < len; k++) {
        int w = snprintf(buf + off, len - off, "%s%s", k > first ? " | " : "", ring[k % nlines]);
        if (w < 0) break;
        off += (size_t)w;
    }
}

void arm_log_tail(const arm *a, char *buf, size_t len) {
    arm_log_tail_lines(a, 1, buf, len);
}

char arm_proc_state(const arm *a) {
    if (a->remote || a->pid <= 0 || a->exited) return '?';
    char path[64], b[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)a->pid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t got = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[got] = 0;
    char *rp = strrchr(b, ')');   /* "pid (comm) S ..." */
    return rp && rp[1] == ' ' && rp[2] ? rp[2] : '?';
}

int arm_alive(arm *a) {
    return !arm_poll_exit(a);
}

/* "arm X: the worker exited (exit status 1) <when>: <last log line>" (the log's last line only when
 * the worker exited by itself: after a signal it is whatever it printed last, usually unrelated) */
int arm_died_error(arm *a, const char *when, char *err, size_t errlen) {
    char st[96], tail[600] = "";
    arm_describe_status(a->status, st, sizeof st);
    if (WIFEXITED(a->status)) arm_log_tail(a, tail, sizeof tail);
    return errmsg_set(err, errlen, ARM_E_DIED, "arm %s: the worker exited (%s) %s%s%s", a->name, st, when,
                   tail[0] ? ": " : "", tail[0] ? tail : " (its output is in workers.log)");
}


/* ============================================================================================
 * Stopping and reaping
 * ========================================================================================== */

/* Waits up to ms for every running local worker to exit. Returns 1 when none is left running. */
static int wait_all(arm *arms, int n, int ms) {
    int64_t end = clock_ms() + ms;
    for (;;) {
        int running = 0;
        for (int i = 0; i < n; i++)
            if (!arms[i].remote && arms[i].pid > 0 && !arm_poll_exit(&arms[i])) running++;
        if (!running) return 1;
        if (clock_ms() >= end) return 0;
        arm_sleep_ms(20);
    }
}

static void signal_all(arm *arms, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (!arms[i].remote && arms[i].pid > 0 && !arm_poll_exit(&arms[i])) arm_signal(&arms[i], sig);
}

void arm_stop_all(arm *arms, int n, int polite, int grace_ms) {
    int asked = 0;
    for (int i = 0; i < n; i++) {
        arm *a = &arms[i];
        if (!a->connected) continue;
        if (polite && !a->remote && !arm_poll_exit(a)) {
            proto_msg req, rep;
            char e[256];
            nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, 2000);
            nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, 2000);
            proto_init(&req, PROTO_SHUTDOWN, 0, 0);
            if (arm_call(a, &req, &rep, 4096, e, sizeof e) == 0) asked = 1;
            proto_msg_free(&rep);
        }
        nng_close(a->sock);
        a->connected = 0;
    }
    if (wait_all(arms, n, asked ? grace_ms : 0)) goto pipes;
    signal_all(arms, n, SIGTERM);
    if (wait_all(arms, n, grace_ms)) goto pipes;
    signal_all(arms, n, SIGKILL);
    for (int i = 0; i < n; i++) {
        arm *a = &arms[i];
        if (a->remote || a->pid <= 0 || a->exited) continue;
        int st;
        if (waitpid(a->pid, &st, 0) == a->pid) { a->exited = 1; a->status = st; }
    }
pipes:
    for (int i = 0; i < n; i++) launch_close(&arms[i]);
}

void arm_stop(arm *a, int polite, int grace_ms) {
    arm_stop_all(a, 1, polite, grace_ms);
}


/* ============================================================================================
 * The private temp directory
 * ========================================================================================== */

/* Removes the plain entries of dir, then dir (fails quietly on anything else). */
static void remove_flat(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p) unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Removes parent/strata-?????? directories of this user whose lock file nobody holds: a driver
 * that was killed (SIGKILL, a second Ctrl-C) could not remove its own. Directories without a lock
 * file (a driver still creating it, or an older version) are left alone. */
static void clean_stale_tmpdirs(const char *parent) {
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "strata-", 7) || strlen(e->d_name) != 13) continue;
        char dir[4096], lock[4200];
        struct stat st;
        if (snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name) >= (int)sizeof dir) continue;
        if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
        snprintf(lock, sizeof lock, "%s/lock", dir);
        int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) remove_flat(dir);
        close(fd);
    }
    closedir(d);
}

int arm_tmpdir_create(char *dir, size_t len, int *lock_fd, char *err, size_t errlen) {
    const char *td = getenv("TMPDIR");
    const char *parent = td && td[0] ? td : "/tmp";
    *lock_fd = -1;
    clean_stale_tmpdirs(parent);
    if (snprintf(dir, len, "%s/strata-XXXXXX", parent) >= (int)len)
        return errmsg_set(err, errlen, ARM_E_SYSTEM, "temp dir path too long: %s", parent);
    if (!mkdtemp(dir)) {
        int e = errno;
        errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create a temp dir %s: %s", dir, strerror(e));
        dir[0] = 0;
        return ARM_E_SYSTEM;
    }
    /* locked under a temporary name, then renamed: "lock" is never seen unlocked */
    char tmp[4200], lock[4200];
    snprintf(tmp, sizeof tmp, "%s/lock.new", dir);
    snprintf(lock, sizeof lock, "%s/lock", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) || rename(tmp, lock)) {
        int e = errno;
        if (fd >= 0) close(fd);
        remove_flat(dir);
        errmsg_set(err, errlen, ARM_E_SYSTEM, "cannot create the lock file in %s: %s", dir, strerror(e));
        dir[0] = 0;
        return ARM_E_SYSTEM;
    }
    *lock_fd = fd;
    return 0;
}

void arm_tmpdir_remove(const char *dir, int lock_fd) {
    if (dir && dir[0]) remove_flat(dir);
    if (lock_fd >= 0) close(lock_fd);
}

void arm_save_logs(const arm *arms, int n, const char *out_dir) {
    char path[PATH_MAX];
    int any = 0;
    for (int i = 0; i < n; i++) any |= !arms[i].remote && arms[i].log_path[0];
    if (!any) return;
    snprintf(path, sizeof path, "%s/workers.log", out_dir);
    FILE *o = fopen(path, "a");   /* --force removed an old one; a resumed run appends */
    if (!o) return;
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        if (a->remote || !a->log_path[0]) continue;
        char st[128] = "still running";
        if (a->exited) arm_describe_status(a->status, st, sizeof st);
        fprintf(o, "==== arm %s (pid %d, %s): %s ====\n", a->name, (int)a->pid, a->url, st);
        FILE *f = fopen(a->log_path, "r");
        char b[8192];
        size_t got;
        while (f && (got = fread(b, 1, sizeof b, f)) > 0) fwrite(b, 1, got, o);
        if (f) fclose(f);
    }
    fclose(o);
}
