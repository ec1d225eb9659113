/* proc.h — the clock and the child processes of the tests that run strata-worker or strata-driver
 * as programs (header-only; static inline, so a test uses only what it needs; nothing is
 * allocated: proc_slurp returns a static buffer, the rest write into the caller's). The folder a
 * child's output goes to and the program it runs are parameters, never globals.
 *
 *   clock_s()                             the monotonic clock, in seconds (kernels/clock.h)
 *   proc_sleep_ms(ms)
 *   proc_spawn(dir, prog, tag, args)      starts prog with args (NULL-terminated, at most
 *                                         PROC_MAX_ARGS), stdin /dev/null, stdout and stderr into
 *                                         dir/<tag>.out and dir/<tag>.err; returns its pid
 *   proc_wait_for(pid, ms)                its wait status, or -1 after ms (then killed and reaped)
 *   proc_exit_code(st)                    the exit code of such a status, or -1
 *   proc_slurp(dir, tag, ext)             the first 8 KiB of dir/<tag>.<ext> ("" when absent)
 *   proc_listen_url(dir, tag, pid, url)   the URL of a worker's "strata-worker: listening URL"
 *                                         line in dir/<tag>.out
 */
#ifndef STRATA_PROC_H
#define STRATA_PROC_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/clock.h"

#define PROC_MAX_ARGS 40

static inline void proc_sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Starts prog with args (NULL-terminated; the ones past PROC_MAX_ARGS are dropped), stdin from
 * /dev/null, stdout and stderr into dir/<tag>.out and dir/<tag>.err. Returns the child's pid (-1
 * when fork fails); the child exits 126 when it cannot open those files, 127 when exec fails. */
static inline pid_t proc_spawn(const char *dir, const char *prog, const char *tag, const char *const *args) {
    char out[512], errp[512];
    snprintf(out, sizeof out, "%s/%s.out", dir, tag);
    snprintf(errp, sizeof errp, "%s/%s.err", dir, tag);
    const char *argv[PROC_MAX_ARGS + 2];
    int k = 0;
    argv[k++] = prog;
    for (int i = 0; args[i] && i < PROC_MAX_ARGS; i++) argv[k++] = args[i];
    argv[k] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open("/dev/null", O_RDONLY);
        if (fo < 0 || fe < 0 || fi < 0) _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits up to ms for pid; returns its status, or -1 (then it is killed and reaped). */
static inline int proc_wait_for(pid_t pid, int ms) {
    int st;
    for (int t = 0; t < ms; t += 10) {
        if (waitpid(pid, &st, WNOHANG) == pid) return st;
        proc_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* The exit code of a status from proc_wait_for; -1 when it timed out or the child was killed. */
static inline int proc_exit_code(int st) { return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

/* The contents of dir/<tag>.<ext>, at most 8 KiB - 1 ("" when it cannot be read). A static buffer:
 * one at a time, overwritten by the next call. */
static inline const char *proc_slurp(const char *dir, const char *tag, const char *ext) {
    static char buf[8192];
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%s", dir, tag, ext);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The URL in the "strata-worker: listening URL" line of worker pid, started by proc_spawn(dir, ...,
 * tag, ...), into url[len]. Waits up to 20 s, or until the worker exits (it is not reaped).
 * Returns 0 or -1. */
static inline int proc_listen_url(const char *dir, const char *tag, pid_t pid, char *url, size_t len) {
    static const char mark[] = "strata-worker: listening ";
    for (int t = 0; t < 2000; t++) {
        siginfo_t si;
        si.si_pid = 0;
        if (!waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid) return -1;
        const char *o = strstr(proc_slurp(dir, tag, "out"), mark);
        const char *nl = o ? strchr(o, '\n') : NULL;
        if (nl) {
            o += strlen(mark);
            snprintf(url, len, "%.*s", (int)(nl - o), o);
            return 0;
        }
        proc_sleep_ms(10);
    }
    return -1;
}

#endif
