/* safeio.c — bounded, non-blocking, link-refusing reads of untrusted files (safeio.h). */
#include "proto/safeio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/errmsg.h"

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int safeio_open_regular(const char *path, int flags, off_t *size_out, char *err, size_t errlen) {
    int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    if (flags & SAFEIO_NOFOLLOW) oflags |= O_NOFOLLOW;
    int fd = open(path, oflags);
    if (fd < 0) {
        if (errno == ENOENT && (flags & SAFEIO_OPTIONAL)) return SAFEIO_ABSENT;
        if (errno == ELOOP && (flags & SAFEIO_NOFOLLOW))
            return errmsg_set(err, errlen, -1, "%s: is a symbolic link (refused: files are read, not followed)", path);
        return errmsg_set(err, errlen, -1, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return errmsg_set(err, errlen, -1, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return errmsg_set(err, errlen, -1, "%s: is %s, not a regular file (refused)", path, kind_of(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return errmsg_set(err, errlen, -1, "%s: fcntl: %s", path, strerror(e));
    }
    if (size_out) *size_out = st.st_size;
    return fd;
}

FILE *safeio_fopen_read(const char *path, int flags, int *absent, char *err, size_t errlen) {
    if (absent) *absent = 0;
    int fd = safeio_open_regular(path, flags, NULL, err, errlen);
    if (fd == SAFEIO_ABSENT) {
        if (absent) *absent = 1;
        return NULL;
    }
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        errmsg_set(err, errlen, -1, "%s: fdopen: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int safeio_read_all(const char *path, int flags, size_t max_bytes, char **out, size_t *len, char *err,
                    size_t errlen) {
    *out = NULL;
    *len = 0;
    off_t size = 0;
    int fd = safeio_open_regular(path, flags, &size, err, errlen);
    if (fd < 0) return fd;
    int rc = -1;
    char *buf = NULL;
    if (size < 0 || (unsigned long long)size > max_bytes) {
        errmsg_set(err, errlen, -1, "%s: %lld bytes, over the limit of %zu (refused)", path, (long long)size, max_bytes);
        goto done;
    }
    buf = malloc((size_t)size + 1);
    if (!buf) { errmsg_set(err, errlen, -1, "%s: out of memory", path); goto done; }
    size_t got = 0;
    /* read at most max_bytes + 1 so that a file grown since fstat is caught, not read on */
    for (;;) {
        if (got == (size_t)size) {
            char extra;
            ssize_t r = read(fd, &extra, 1);
            if (r == 0) break;
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) { errmsg_set(err, errlen, -1, "%s: read: %s", path, strerror(errno)); goto done; }
            errmsg_set(err, errlen, -1, "%s: the file grew while it was read (refused)", path);
            goto done;
        }
        ssize_t r = read(fd, buf + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { errmsg_set(err, errlen, -1, "%s: read: %s", path, strerror(errno)); goto done; }
        if (r == 0) { errmsg_set(err, errlen, -1, "%s: the file shrank while it was read", path); goto done; }
        got += (size_t)r;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}

ssize_t safeio_getline(char **line, size_t *cap, FILE *f, size_t max_len, const char *name, long lineno,
                       char *err, size_t errlen) {
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (n >= max_len) {
            errmsg_set(err, errlen, -1, "%s:%ld: line longer than %zu bytes (refused)", name, lineno, max_len);
            return -2;
        }
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            if (nc > max_len + 2) nc = max_len + 2;
            char *p = realloc(*line, nc);
            if (!p) {
                errmsg_set(err, errlen, -1, "%s:%ld: out of memory", name, lineno);
                return -2;
            }
            *line = p;
            *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
    }
    if (n == 0) return -1;
    (*line)[n] = '\0';
    return (ssize_t)n;
}

/* length of a valid UTF-8 sequence at s (1–4), or 0 when it is not one */
static size_t utf8_len(const unsigned char *s) {
    if (s[0] >= 0xc2 && s[0] <= 0xdf) return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (s[0] >= 0xe0 && s[0] <= 0xef) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
        if (s[0] == 0xe0 && s[1] < 0xa0) return 0;
        if (s[0] == 0xed && s[1] >= 0xa0) return 0;
        return 3;
    }
    if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
        if (s[0] == 0xf0 && s[1] < 0x90) return 0;
        if (s[0] == 0xf4 && s[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

char *safeio_escape(char *dst, size_t dstlen, const char *src) {
    static const char hex[] = "0123456789abcdef";
    if (!dstlen) return dst;
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)(src ? src : "");
    while (*s) {
        size_t n = *s >= 0x20 && *s < 0x7f ? 1 : (*s >= 0x80 ? utf8_len(s) : 0);
        if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) n = 0; /* U+0080..U+009F: the C1 controls (CSI …) */
        size_t need = n ? n : 4;
        if (o + need + 1 > dstlen) break;
        if (n) {
            memcpy(dst + o, s, n);
            o += n;
            s += n;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[*s >> 4];
            dst[o++] = hex[*s & 15];
            s++;
        }
    }
    dst[o] = '\0';
    return dst;
}
