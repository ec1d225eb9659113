/* errmsg.h — the one-line error message every module returns beside its error code.
 * errmsg_set writes a printf-formatted message into err[errlen] (when err is not NULL) and yields
 * code, so a failure reads `return errmsg_set(err, errlen, PROTO_E_BADARG, "...", ...);`. It is a
 * macro over errmsg_format so that the compiler sees the code it yields (a variadic function is
 * never inlined); errmsg_vset is the same for a va_list (a module's own wrapper, e.g. one that
 * prefixes a path). Header-only, allocates nothing, includes only libc: every layer may include it
 * (docs/DESIGN.md §1.1). */
#ifndef STRATA_ERRMSG_H
#define STRATA_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int errmsg_vset(char *err, size_t errlen, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline int errmsg_vset(char *err, size_t errlen, int code, const char *fmt, va_list ap) {
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    return code;
}

static inline void errmsg_format(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void errmsg_format(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    errmsg_vset(err, errlen, 0, fmt, ap);
    va_end(ap);
}

static inline int errmsg_code(int code) { return code; }

/* errmsg_set(char *err, size_t errlen, int code, const char *fmt, ...) -> code */
#define errmsg_set(err, errlen, code, ...) (errmsg_format((err), (errlen), __VA_ARGS__), errmsg_code(code))

#endif
