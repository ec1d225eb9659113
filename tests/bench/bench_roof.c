/* bench_roof.c — the machine's limits for the roofline of `make bench` (issue 25), and the model's
 * work per token. Nothing is asserted (speed is not tested). Prints key=value lines on stdout:
 *   roof bw_T=GB/s          read bandwidth with T threads: each thread sums its share of a 1 GiB
 *                           buffer (8-byte words, 4 independent sums), best of 5 passes
 *   roof fma_F_T=GFLOP/s    f32 FMA peak of family F (c: scalar fmaf, avx2: 256-bit, avx512:
 *                           512-bit, where the CPU has it) with T threads: 12 independent chains
 *                           of fused multiply-adds per thread, 2 flops each per lane, best of 5
 *   model weight_bytes=B    bytes a decode step reads from the weights: every tensor, except the
 *                           token embedding when an output matrix exists (one row of it is read)
 *   model matmul_params=N   elements of the matrices a token multiplies (2·N flops per token)
 *   model n_layer= n_head= n_head_kv= head_dim= n_embd=   the attention's shape; window= and
 *                           global_layers= (Gemma 3: 1 layer in 6 reads the whole context, the
 *                           others the last `window` positions; otherwise window=0, all global)
 * usage: bench_roof MODEL.gguf [max_threads (default 2)] */
#include "worker/gguf.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double roof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- read bandwidth ---------------------------------------------------------------------- */

typedef struct {
    const uint64_t *p; /* [n] this thread's share */
    size_t n;
    uint64_t sum;      /* kept so the reads are not optimised away */
} roof_bw_job;

static void *roof_bw_run(void *arg) {
    roof_bw_job *j = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    for (; i < j->n; i++) s0 += j->p[i];
    j->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* Best read rate in GB/s over 5 passes of buf [n] words with t threads; -1 on failure. */
static double roof_bw(const uint64_t *buf, size_t n, int t) {
    pthread_t th[16];
    roof_bw_job job[16];
    double best = -1;
    if (t < 1 || t > 16) return -1;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = roof_now();
        for (int k = 0; k < t; k++) {
            job[k].p = buf + n / (size_t)t * (size_t)k;
            job[k].n = n / (size_t)t;
            if (pthread_create(&th[k], NULL, roof_bw_run, &job[k]) != 0) return -1;
        }
        uint64_t s = 0;
        for (int k = 0; k < t; k++) {
            pthread_join(th[k], NULL);
            s += job[k].sum;
        }
        double dt = roof_now() - t0;
        double gbs = (double)(n / (size_t)t * (size_t)t) * 8.0 / dt / 1e9;
        if (s == 42) fprintf(stderr, " "); /* uses the sum */
        if (gbs > best) best = gbs;
    }
    return best;
}

/* ---- FMA peak ---------------------------------------------------------------------------- */

enum { ROOF_CHAINS = 12, ROOF_ITERS = 20 * 1000 * 1000 };

typedef struct {
    int family; /* 0 c, 1 avx2, 2 avx512 */
    float out;
} roof_fma_job;

/* ROOF_ITERS rounds of ROOF_CHAINS independent FMAs of one lane. */
static float roof_fma_c(void) {
    float a[ROOF_CHAINS];
    for (int c = 0; c < ROOF_CHAINS; c++) a[c] = (float)c * 0.001f;
    const float m = 0.999999f, k = 1e-7f;
    for (long i = 0; i < ROOF_ITERS / 4; i++) /* a quarter: scalar is slow */
        for (int c = 0; c < ROOF_CHAINS; c++) a[c] = fmaf(a[c], m, k);
    float s = 0;
    for (int c = 0; c < ROOF_CHAINS; c++) s += a[c];
    return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static float roof_fma_avx2(void) {
    __m256 a[ROOF_CHAINS];
    for (int c = 0; c < ROOF_CHAINS; c++) a[c] = _mm256_set1_ps((float)c * 0.001f);
    const __m256 m = _mm256_set1_ps(0.999999f), k = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < ROOF_ITERS; i++)
        for (int c = 0; c < ROOF_CHAINS; c++) a[c] = _mm256_fmadd_ps(a[c], m, k);
    float s = 0, v[8];
    for (int c = 0; c < ROOF_CHAINS; c++) {
        _mm256_storeu_ps(v, a[c]);
        s += v[0];
    }
    return s;
}

__attribute__((target("avx512f"))) static float roof_fma_avx512(void) {
    __m512 a[ROOF_CHAINS];
    for (int c = 0; c < ROOF_CHAINS; c++) a[c] = _mm512_set1_ps((float)c * 0.001f);
    const __m512 m = _mm512_set1_ps(0.999999f), k = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < ROOF_ITERS; i++)
        for (int c = 0; c < ROOF_CHAINS; c++) a[c] = _mm512_fmadd_ps(a[c], m, k);
    float s = 0, v[16];
    for (int c = 0; c < ROOF_CHAINS; c++) {
        _mm512_storeu_ps(v, a[c]);
        s += v[0];
    }
    return s;
}
#endif

static void *roof_fma_run(void *arg) {
    roof_fma_job *j = arg;
#if defined(__x86_64__)
    if (j->family == 1) { j->out = roof_fma_avx2(); return NULL; }
    if (j->family == 2) { j->out = roof_fma_avx512(); return NULL; }
#endif
    j->out = roof_fma_c();
    return NULL;
}

/* Best GFLOP/s of family f over 3 runs with t threads; -1 on failure. */
static double roof_fma(int f, int t) {
    static const int lanes[3] = {1, 8, 16};
    double flops = 2.0 * lanes[f] * ROOF_CHAINS * (double)(f ? ROOF_ITERS : ROOF_ITERS / 4) * t;
    pthread_t th[16];
    roof_fma_job job[16];
    double best = -1;
    if (t < 1 || t > 16) return -1;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = roof_now();
        for (int k = 0; k < t; k++) {
            job[k].family = f;
            if (pthread_create(&th[k], NULL, roof_fma_run, &job[k]) != 0) return -1;
        }
        float s = 0;
        for (int k = 0; k < t; k++) {
            pthread_join(th[k], NULL);
            s += job[k].out;
        }
        double g = flops / (roof_now() - t0) / 1e9;
        if (s == 42.0f) fprintf(stderr, " ");
        if (g > best) best = g;
    }
    return best;
}

/* ---- the model's work per token ---------------------------------------------------------- */

/* Prints the model lines; returns 0, or 1 when the file cannot be read. */
static int roof_model(const char *path) {
    gguf_file *g = NULL;
    char err[256], arch[64], key[128];
    if (gguf_open(path, &g, err, sizeof err) != 0) {
        fprintf(stderr, "bench_roof: %s\n", err);
        return 1;
    }
    int rc = 1;
    if (gguf_get_strz(g, "general.architecture", arch, sizeof arch) != 0) goto done;
    int tied = gguf_tensor_find(g, "output.weight") == NULL;
    uint64_t bytes = 0, params = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        int embd = strcmp(t->name, "token_embd.weight") == 0;
        if (!embd || tied) bytes += t->nbytes;
        else bytes += t->nbytes / (t->ne[1] ? t->ne[1] : 1);
        if (t->n_dims >= 2 && (!embd || tied)) params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    int64_t nl = 0, nh = 0, nkv = 0, ne = 0, hd = 0;
    snprintf(key, sizeof key, "%s.block_count", arch);
    if (gguf_meta_int(g, key, 1, 4096, &nl, err, sizeof err) != 0) goto done;
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    if (gguf_meta_int(g, key, 1, 4096, &nh, err, sizeof err) != 0) goto done;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    if (gguf_meta_int(g, key, 1, 4096, &nkv, err, sizeof err) != 0) nkv = nh;
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    if (gguf_meta_int(g, key, 1, 1 << 20, &ne, err, sizeof err) != 0) goto done;
    snprintf(key, sizeof key, "%s.attention.key_length", arch);
    if (gguf_meta_int(g, key, 1, 4096, &hd, err, sizeof err) != 0) hd = ne / nh;
    /* Gemma 3: every 6th layer attends to the whole context, the others to the last `window` */
    int64_t window = 0, global = nl;
    snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
    if (strcmp(arch, "gemma3") == 0 && gguf_meta_int(g, key, 1, INT32_MAX, &window, err, sizeof err) == 0)
        global = nl / 6;
    printf("model weight_bytes=%llu matmul_params=%llu n_layer=%lld n_head=%lld n_head_kv=%lld "
           "head_dim=%lld n_embd=%lld tied=%d window=%lld global_layers=%lld\n", (unsigned long long)bytes,
           (unsigned long long)params, (long long)nl, (long long)nh, (long long)nkv, (long long)hd,
           (long long)ne, tied, (long long)window, (long long)global);
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_roof: %s: no model shape (%s)\n", path, err);
    gguf_close(g);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_roof MODEL.gguf [max_threads]\n");
        return 2;
    }
    int tmax = argc > 2 ? atoi(argv[2]) : 2;
    if (tmax < 1 || tmax > 16) tmax = 2;
    if (roof_model(argv[1]) != 0) return 1;

    size_t n = (size_t)1 << 27; /* [n] words: 1 GiB */
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "bench_roof: no 1 GiB buffer\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
    for (int t = 1; t <= tmax; t++) printf("roof bw_%d=%.2f\n", t, roof_bw(buf, n, t));
    free(buf);

    static const char *const fam[3] = {"c", "avx2", "avx512"};
    int have[3] = {1, 0, 0};
#if defined(__x86_64__)
    __builtin_cpu_init();
    have[1] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have[2] = __builtin_cpu_supports("avx512f");
#endif
    for (int f = 0; f < 3; f++)
        for (int t = 1; t <= tmax && have[f]; t++) printf("roof fma_%s_%d=%.1f\n", fam[f], t, roof_fma(f, t));
    return 0;
}
