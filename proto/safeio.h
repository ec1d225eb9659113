/* safeio.h — opening and reading files that came from elsewhere (a results folder, a journal, a
 * document, a model) without blocking, following a planted link, or reading without a bound.
 *
 * Every input the driver or a worker reads goes through these: a FIFO, a device or a directory where
 * a file is expected is refused before any read can block (the open is non-blocking and fstat is
 * checked before the first byte is read); SAFEIO_NOFOLLOW refuses a symbolic link at the last path
 * component (for files inside a results folder, which another user may have crafted); lines are read
 * up to a stated length and a longer one is an error, never an allocation that grows with the file.
 *
 * Who allocates: safeio_getline grows *line (malloc/realloc, like getline(3)); the caller frees it.
 * Nothing else allocates. Errors: a one-line message in err[errlen] (errmsg_set), naming the path.
 */
#ifndef STRATA_SAFEIO_H
#define STRATA_SAFEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum {
    SAFEIO_NOFOLLOW = 1, /* refuse a symbolic link at the last component (O_NOFOLLOW) */
    SAFEIO_OPTIONAL = 2, /* a missing file is not an error: return SAFEIO_ABSENT, err untouched */
};
#define SAFEIO_ABSENT (-2)

/* Opens path read-only as a regular file: returns the fd (O_CLOEXEC, blocking mode restored), or
 * -1 with a message (SAFEIO_ABSENT for a missing file with SAFEIO_OPTIONAL). *size_out (may be NULL)
 * receives the file's size at open time. */
int safeio_open_regular(const char *path, int flags, off_t *size_out, char *err, size_t errlen);

/* The same, as a stdio stream ("r"); NULL on failure. With SAFEIO_OPTIONAL, a missing file gives NULL
 * and *absent = 1 (absent may be NULL otherwise). */
FILE *safeio_fopen_read(const char *path, int flags, int *absent, char *err, size_t errlen);

/* Reads a whole regular file of at most max_bytes into a malloc'd buffer *out[*len] with a NUL after
 * it (the caller frees). Larger files, non-regular files and read errors are refused. */
int safeio_read_all(const char *path, int flags, size_t max_bytes, char **out, size_t *len, char *err,
                    size_t errlen);

/* Reads one line (the newline kept, like getline) of at most max_len bytes. Returns its length, -1 at
 * end of file, or -2 when the line would exceed max_len (the stream is left mid-line; err says so,
 * naming `name` and line number lineno). */
ssize_t safeio_getline(char **line, size_t *cap, FILE *f, size_t max_len, const char *name, long lineno,
                       char *err, size_t errlen);

/* Writes text for a terminal: printable ASCII and UTF-8 pass, control bytes (ESC, BEL, CR, …), the C1
 * controls U+0080..U+009F and invalid bytes become \xHH (byte by byte). Output is always NUL-terminated; returns dst. A string from a GGUF,
 * a worker or a results folder goes through this before it reaches stderr/stdout. */
char *safeio_escape(char *dst, size_t dstlen, const char *src);

#endif
