/* bench_attn.c — attention time per KV format at a given context (default 8192), SmolLM2's shape
 * (9 query heads, 3 KV heads, head dim 64), 2 threads: a prefill chunk of 512 queries at the end of
 * the context and 32 single-token decode steps. Prints one line per format and the ratio to f16.
 * usage: bench_attn [context] [threads] */
#include "kernels/pool.h"
#include "kernels/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int ctx = argc > 1 ? atoi(argv[1]) : 8192, threads = argc > 2 ? atoi(argv[2]) : 2;
    int n_head = 9, n_kv = 3, hd = 64, T = 512;
    pool *p;
    if (ctx < T + 32 || pool_create(threads, &p)) { fprintf(stderr, "usage: bench_attn [context >= 544] [threads]\n"); return 2; }
    float *kv = malloc(sizeof(float) * n_kv * hd * 2);             /* [2][n_kv][hd] */
    float *q = malloc(sizeof(float) * (size_t)T * n_head * hd);    /* [T][n_head][hd] */
    float *o = malloc(sizeof(float) * (size_t)T * n_head * hd);
    srand(1);
    for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX - 0.5f;
    double f16_prefill = 0, f16_decode = 0;
    static const kv_fmt fmts[] = { KV_F16, KV_F32, KV_BF16, KV_INT8, KV_Q8_0, KV_Q4_0, KV_Q4_0R, KV_FP8 };
    printf("attention at context %d, %d threads, 9/3 heads, head dim 64\n", ctx, threads);
    for (size_t f = 0; f < sizeof fmts / sizeof *fmts; f++) {
        cache c;
        char err[256];
        if (cache_create(&c, fmts[f], fmts[f], 1, n_kv, hd, ctx, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        for (int pos = 0; pos < ctx; pos++) {
            for (int i = 0; i < n_kv * hd * 2; i++) kv[i] = (float)rand() / RAND_MAX * 2 - 1;
            cache_store(&c, 0, pos, kv, kv + n_kv * hd);
        }
        cache_attn a = { 0, T, ctx - 32 - T, n_head, 0, 0.125f, q, o, NULL };
        double t0 = now_s();
        cache_attend(p, &c, &a);
        double t1 = now_s();
        for (int i = 0; i < 32; i++) {
            cache_attn d = { 0, 1, ctx - 32 + i, n_head, 0, 0.125f, q, o, NULL };
            cache_attend(p, &c, &d);
        }
        double t2 = now_s();
        if (fmts[f] == KV_F16) { f16_prefill = t1 - t0; f16_decode = t2 - t1; }
        printf("%-6s prefill chunk of %d: %8.2f ms (x%.2f of f16)   decode: %7.3f ms/token (x%.2f of f16)\n",
               kv_fmt_name(fmts[f]), T, 1e3 * (t1 - t0), (t1 - t0) / f16_prefill, 1e3 * (t2 - t1) / 32,
               (t2 - t1) / f16_decode);
        cache_free(&c);
    }
    free(kv); free(q); free(o);
    pool_free(p);
    return 0;
}
