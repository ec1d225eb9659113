/* test_safeio.c — proto/safeio.h: the opens that refuse what is not a regular file (before any read
 * can block), links refused with SAFEIO_NOFOLLOW, the byte and line bounds, and terminal escaping. */
#include "proto/safeio.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"

static void write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(text, 1, n, f); fclose(f); }
}

int main(void) {
    char dir[] = "/tmp/strata-safeio-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char reg[256], fifo[256], link[256], none[256], err[256];
    snprintf(reg, sizeof reg, "%s/reg.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(none, sizeof none, "%s/none", dir);
    write_file(reg, "one\ntwo\nthree", 13);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(symlink(reg, link) == 0, "symlink");

    /* 1. opens */
    off_t size = 0;
    int fd = safeio_open_regular(reg, 0, &size, err, sizeof err);
    CHECK(fd >= 0 && size == 13, "a regular file opens, its size given (%lld)", (long long)size);
    if (fd >= 0) close(fd);
    err[0] = 0;
    fd = safeio_open_regular(fifo, 0, NULL, err, sizeof err);
    CHECK(fd == -1 && strstr(err, "FIFO"), "a FIFO is refused at once, not read: %s", err);
    fd = safeio_open_regular(dir, 0, NULL, err, sizeof err);
    CHECK(fd == -1 && strstr(err, "directory"), "a directory is refused: %s", err);
    fd = safeio_open_regular("/dev/zero", 0, NULL, err, sizeof err);
    CHECK(fd == -1 && strstr(err, "character device"), "a device is refused: %s", err);
    fd = safeio_open_regular(link, 0, NULL, err, sizeof err);
    CHECK(fd >= 0, "a link is followed without SAFEIO_NOFOLLOW");
    if (fd >= 0) close(fd);
    fd = safeio_open_regular(link, SAFEIO_NOFOLLOW, NULL, err, sizeof err);
    CHECK(fd == -1 && strstr(err, "symbolic link"), "a link is refused with SAFEIO_NOFOLLOW: %s", err);
    strcpy(err, "untouched");
    fd = safeio_open_regular(none, SAFEIO_OPTIONAL, NULL, err, sizeof err);
    CHECK(fd == SAFEIO_ABSENT && !strcmp(err, "untouched"), "a missing optional file is SAFEIO_ABSENT, no error");
    fd = safeio_open_regular(none, 0, NULL, err, sizeof err);
    CHECK(fd == -1 && strstr(err, "cannot open"), "a missing file is an error: %s", err);
    int absent = 0;
    FILE *f = safeio_fopen_read(none, SAFEIO_OPTIONAL, &absent, err, sizeof err);
    CHECK(!f && absent == 1, "safeio_fopen_read: a missing optional file sets *absent");

    /* 2. whole-file reads with a byte cap */
    char *buf = NULL;
    size_t len = 0;
    CHECK(safeio_read_all(reg, 0, 13, &buf, &len, err, sizeof err) == 0 && len == 13 && buf && buf[13] == 0 &&
              !memcmp(buf, "one\ntwo\nthree", 13), "read_all at exactly the cap reads the file, NUL after it");
    free(buf);
    buf = NULL;
    CHECK(safeio_read_all(reg, 0, 12, &buf, &len, err, sizeof err) == -1 && !buf && strstr(err, "over the limit"),
          "read_all one byte over the cap is refused: %s", err);
    CHECK(safeio_read_all(fifo, 0, 100, &buf, &len, err, sizeof err) == -1 && !buf, "read_all refuses a FIFO");

    /* 3. lines with a length cap */
    f = safeio_fopen_read(reg, 0, NULL, err, sizeof err);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n1 = f ? safeio_getline(&line, &cap, f, 8, reg, 1, err, sizeof err) : -9;
    CHECK(n1 == 4 && !strcmp(line, "one\n"), "getline: the first line with its newline");
    ssize_t n2 = f ? safeio_getline(&line, &cap, f, 8, reg, 2, err, sizeof err) : -9;
    ssize_t n3 = f ? safeio_getline(&line, &cap, f, 8, reg, 3, err, sizeof err) : -9;
    CHECK(n2 == 4 && n3 == 5 && !strcmp(line, "three"), "getline: a last line without a newline is returned whole");
    ssize_t n4 = f ? safeio_getline(&line, &cap, f, 8, reg, 4, err, sizeof err) : -9;
    CHECK(n4 == -1, "getline: -1 at the end");
    if (f) fclose(f);
    free(line);
    line = NULL;
    cap = 0;
    f = safeio_fopen_read(reg, 0, NULL, err, sizeof err);
    ssize_t n5 = f ? safeio_getline(&line, &cap, f, 3, reg, 1, err, sizeof err) : -9;
    CHECK(n5 == -2 && strstr(err, "longer than 3"), "getline: a line over the cap is -2 with a message: %s", err);
    CHECK(cap <= 5, "getline: the buffer never grows past the cap + 2 (%zu)", cap);
    if (f) fclose(f);
    free(line);

    /* 4. escaping for a terminal */
    char out[64];
    safeio_escape(out, sizeof out, "llama");
    CHECK(!strcmp(out, "llama"), "plain ASCII passes");
    safeio_escape(out, sizeof out, "\x1b]0;t\x07\x1b[2J");
    CHECK(!strcmp(out, "\\x1b]0;t\\x07\\x1b[2J"), "ESC and BEL become \\xHH: %s", out);
    safeio_escape(out, sizeof out, "a\xc2\x9b" "b");
    CHECK(!strcmp(out, "a\\xc2\\x9bb"), "a C1 control (U+009B CSI) is escaped byte by byte: %s", out);
    safeio_escape(out, sizeof out, "K\xc3\xa4se \xe2\x82\xac");
    CHECK(!strcmp(out, "K\xc3\xa4se \xe2\x82\xac"), "valid UTF-8 passes: %s", out);
    safeio_escape(out, sizeof out, "x\xff\xc3");
    CHECK(!strcmp(out, "x\\xff\\xc3"), "invalid and cut UTF-8 is escaped: %s", out);
    char small[6];
    safeio_escape(small, sizeof small, "\x1b\x1b");
    CHECK(!strcmp(small, "\\x1b"), "output is cut at a whole escape and NUL-terminated: %s", small);

    unlink(reg);
    unlink(fifo);
    unlink(link);
    rmdir(dir);
    return check_done();
}
