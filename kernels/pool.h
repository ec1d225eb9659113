/* pool.h — a fixed set of worker threads that run "item i of n" callbacks.
 *
 * Which thread runs which item does not matter for the results: every kernel that uses the pool
 * computes each output element entirely inside one item, in a fixed order. */
#ifndef STRATA_POOL_H
#define STRATA_POOL_H

typedef void (*pool_fn)(void *ctx, int item, int thread);

typedef struct pool pool;

/* Starts n_threads - 1 helper threads (the caller is thread 0). Allocates *out, freed by
 * pool_free(). Returns 0, or -1 when a thread cannot be started (nothing is left running). */
int pool_create(int n_threads, pool **out);
void pool_free(pool *p);
int pool_threads(const pool *p);

/* Runs fn(ctx, i, thread) for i in [0, n_items) on all threads and returns when all are done. */
void pool_run(pool *p, pool_fn fn, void *ctx, int n_items);

#endif
