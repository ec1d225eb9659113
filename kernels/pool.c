/* pool.c — see pool.h. Items are handed out through an atomic counter; a generation number (spun on
 * briefly, then a condition variable) wakes the helpers for each pool_run; the caller spins until the
 * helpers have finished their items. */
#include "kernels/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pool {
    int n_threads;
    pthread_t *threads;          /* [n_threads - 1] */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    unsigned long generation;    /* bumped by each pool_run (under mu) */
    atomic_ulong gen_pub;        /* the same, readable without the lock (spinning helpers) */
    atomic_int running;          /* helpers still working on the current generation */
    int quit;
    atomic_int quit_pub;
    pool_fn fn;
    void *ctx;
    int n_items;
    atomic_int next;             /* next item to hand out */
};

typedef struct { pool *p; int id; } pool_arg;

static void work(pool *p, int thread) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) break;
        p->fn(p->ctx, i, thread);
    }
}

/* A decode step makes a few hundred pool_run calls of ~20 us each: sleeping on the condition
 * variable between them costs a futex wake-up every time. Helpers first spin on the generation
 * number for up to SPIN_ROUNDS polls, and only then sleep. */
#define SPIN_ROUNDS 20000      /* helpers: ~0.5 ms of polling before they sleep */
#define CALLER_SPIN 2000       /* the caller: then it yields the core to a preempted helper */

/* The spin-wait hint: the one ISA test outside kernels/vec16*.h (docs/DESIGN.md §2.7); it paces the
 * polling only and touches no value. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *helper(void *arg) {
    pool_arg a = *(pool_arg *)arg;
    free(arg);
    pool *p = a.p;
    unsigned long seen = 0;
    for (;;) {
        for (int i = 0; i < SPIN_ROUNDS && atomic_load(&p->gen_pub) == seen && !atomic_load(&p->quit_pub); i++)
            cpu_relax();
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, a.id);
        atomic_fetch_sub(&p->running, 1);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pool_create(int n_threads, pool **out) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    pool *p = calloc(1, sizeof *p);
    if (!p) return -1;
    p->n_threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) goto fail;
    for (int t = 1; t < n_threads; t++) {
        pool_arg *a = malloc(sizeof *a);
        if (!a) goto fail;
        a->p = p;
        a->id = t;
        if (pthread_create(&p->threads[t - 1], NULL, helper, a)) { free(a); goto fail; }
        p->n_threads++;
    }
    *out = p;
    return 0;
fail:
    pool_free(p);
    return -1;
}

void pool_free(pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    atomic_store(&p->quit_pub, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int pool_threads(const pool *p) { return p->n_threads; }

void pool_run(pool *p, pool_fn fn, void *ctx, int n_items) {
    if (n_items <= 0) return;
    if (p->n_threads == 1 || n_items == 1) {
        for (int i = 0; i < n_items; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    atomic_store(&p->running, p->n_threads - 1);
    p->generation++;
    atomic_store(&p->gen_pub, p->generation);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    /* the helpers usually finish within microseconds of the caller: spin a little, then yield the
     * core (on a shared machine a helper may have been preempted and needs the core to finish) */
    for (int i = 0; atomic_load(&p->running) > 0; i++) {
        if (i < CALLER_SPIN) cpu_relax();
        else sched_yield();
    }
}
