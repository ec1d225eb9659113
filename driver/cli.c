/* cli.c — the driver's shared command-line helpers (see cli.h). */
#include "driver/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cli_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata-driver: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        cli_errorf("%s needs an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    long v;
    if (cli_parse_long(opt, s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}
