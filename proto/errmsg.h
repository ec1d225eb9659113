/* errmsg.h — the one-line error message every module returns beside its error code.
 * errmsg_set writes a printf-formatted message into err[errlen] (when err is not NULL) and returns
 * code, so a failure reads `return errmsg_set(err, errlen, PROTO_E_BADARG, "...", ...);`.
 * Header-only, allocates nothing. */
#ifndef STRATA_ERRMSG_H
#define STRATA_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int errmsg_set(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int errmsg_set(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

#endif
