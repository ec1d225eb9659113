/* test_pool.c — kernels/pool.c under stress (issue 15's hang hypothesis): many runs after the
 * helpers slept, and create / run / free cycles; an alarm turns a hang into a FAIL. */
#include "tests/check.h"
#include "tests/proc.h"
#include "kernels/pool.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- the thread pool: no lost wake-up (issue 15's hang hypothesis) ----------------------------------
 * Runs many pool_run calls, half of them after a pause long enough for the helpers to stop spinning
 * and sleep on the condition variable (the path a lost wake-up would hang), with 2 and 4 threads
 * (more threads than cores here), each item counted exactly once. An alarm turns a hang into a FAIL. */
typedef struct { atomic_int *hits; } pool_job;
static void pool_item(void *ctx, int item, int thread) {
    (void)thread;
    atomic_fetch_add(&((pool_job *)ctx)->hits[item], 1);
}
static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "FAIL - the pool stress test hung (lost wake-up?)\n0 passed, 1 failed\n";
    (void)!write(1, m, sizeof m - 1);
    _exit(1);
}

static void test_pool_stress(void) {
    signal(SIGALRM, on_alarm);
    alarm(120);
    for (int nt = 2; nt <= 4; nt += 2) {
        pool *p;
        if (pool_create(nt, &p)) { CHECK(0, "pool_create(%d)", nt); continue; }
        static atomic_int hits[64];
        pool_job job = { hits };
        long runs = 0, bad = 0;
        double t0 = clock_s();
        srand(11);
        for (int r = 0; r < (nt == 2 ? 1500 : 400); r++) {
            int n = 1 + rand() % 64;
            for (int i = 0; i < n; i++) atomic_store(&hits[i], 0);
            if (r % 2) {   /* let the helpers fall asleep (they spin ~0.5 ms first) */
                struct timespec ts = { 0, 600000L + (long)(rand() % 400) * 1000L };
                nanosleep(&ts, NULL);
            }
            pool_run(p, pool_item, &job, n);
            for (int i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
            runs++;
        }
        pool_free(p);
        CHECK(bad == 0, "pool of %d threads: %ld runs (half after the helpers slept) in %.1f s, every item exactly once",
              nt, runs, clock_s() - t0);
    }
    /* create / run / free cycles (a wake-up lost at start or at quit would hang here) */
    int ok = 1;
    for (int c = 0; c < 300 && ok; c++) {
        pool *p;
        static atomic_int hits[8];
        pool_job job = { hits };
        if (pool_create(3, &p)) { ok = 0; break; }
        for (int i = 0; i < 8; i++) atomic_store(&hits[i], 0);
        pool_run(p, pool_item, &job, 8);
        for (int i = 0; i < 8; i++) ok &= atomic_load(&hits[i]) == 1;
        pool_free(p);
    }
    CHECK(ok, "300 pool create / run / free cycles");
    alarm(0);
}


int main(void) {
    test_pool_stress();
    return check_done();
}
