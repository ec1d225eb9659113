/* pool.c — see pool.h. Items are handed out through an atomic counter; a generation number and a
 * condition variable wake the helpers for each pool_run. */
#include "kernels/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pool {
    int n_threads;
    pthread_t *threads;          /* [n_threads - 1] */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation;    /* bumped by each pool_run */
    int running;                 /* helpers still working on the current generation */
    int quit;
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

static void *helper(void *arg) {
    pool_arg a = *(pool_arg *)arg;
    free(arg);
    pool *p = a.p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, a.id);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->done);
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
    pthread_cond_init(&p->done, NULL);
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
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
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
    p->running = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
