/* faultfs.c — an LD_PRELOAD shim for tests/resume.test.sh: makes the N-th fsync/fdatasync, or the
 * N-th write, of a file named "journal" fail with EIO, as a failing disk would.
 *   FAULTFS_FSYNC_AT=N   the N-th fsync or fdatasync of the journal (from 1) fails
 *   FAULTFS_WRITE_AT=N   the N-th write to the journal fails (nothing written)
 * Built by the test: cc -shared -fPIC -o faultfs.so tests/faultfs.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_journal(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    const char *slash = strrchr(path, '/');
    return slash && !strcmp(slash + 1, "journal");
}

/* 1 when this call is the one that must fail (counts calls on the journal only) */
static int due(const char *var, int *count) {
    const char *v = getenv(var);
    return v && ++*count == atoi(v);
}

static int n_sync, n_write;

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (is_journal(fd) && due("FAULTFS_FSYNC_AT", &n_sync)) { errno = EIO; return -1; }
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (is_journal(fd) && due("FAULTFS_FSYNC_AT", &n_sync)) { errno = EIO; return -1; }
    return real(fd);
}

ssize_t write(int fd, const void *buf, size_t len) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (is_journal(fd) && due("FAULTFS_WRITE_AT", &n_write)) { errno = EIO; return -1; }
    return real(fd, buf, len);
}
