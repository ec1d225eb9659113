/* check.h — the test harness every tests/test_*.c uses (header-only, no allocation).
 *
 * CHECK(cond, fmt, ...) records one assertion: prints "ok - ..." or "FAIL - ... (file:line)".
 * check_done() prints the closing line "N passed, N failed" and returns the exit code.
 * tests/run.sh sums the closing lines of all test programs into one. */
#ifndef STRATA_CHECK_H
#define STRATA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_passed, check_failed;

#define CHECK(cond, ...) do {                                                   \
        if (cond) { check_passed++; printf("ok - "); printf(__VA_ARGS__); printf("\n"); } \
        else { check_failed++; printf("FAIL - "); printf(__VA_ARGS__);          \
               printf("  (%s:%d: %s)\n", __FILE__, __LINE__, #cond); }          \
        fflush(stdout);                                                          \
    } while (0)

/* The threads a test's pool uses: dflt, or STRATA_TEST_THREADS when set (tests/neon.test.sh sets 1
 * where the emulator cannot start threads; no result depends on the thread count). */
static inline int check_threads(int dflt) {
    const char *e = getenv("STRATA_TEST_THREADS");
    int n = e ? atoi(e) : 0;
    return n >= 1 ? n : dflt;
}

static inline int check_done(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
