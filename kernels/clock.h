/* clock.h — the one monotonic clock (CLOCK_MONOTONIC): clock_ms() in whole milliseconds, clock_s()
 * in seconds. For timeouts, deadlines and durations; never a date. Header-only, includes only libc:
 * every layer may include it (docs/DESIGN.md §1.1). */
#ifndef STRATA_CLOCK_H
#define STRATA_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline double clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
