/* bench_attn.c — attention time per KV format at a given context (default 8192), SmolLM2's shape
 * (9 query heads, 3 KV heads, head dim 64), 2 threads: a prefill chunk of 512 queries at the end of
 * the context and 32 single-token decode steps. Every KV format is timed: each base format of
 * kvfmt.h, each of them with +rot, +roth and +rotp where that is a format (not q4_0r, tq3, tq4, which are
 * rotated already), and kivi2 / kivi4 (G 32, R 128). f16 runs first; every line prints the format's
 * bits per value and its times as a ratio to f16's, and its arithmetic rate: QKᵀ and PV are 2 multiply-
 * adds per (query head, key, dimension), 4·n_head·hd flops per query and key it attends to; given the
 * machine's f32 FMA peak (GFLOP/s, bench_roof's fma_F_T for the same threads), also the fraction of it.
 * A comma-separated FORMATS list times those formats only (f16 is timed first whatever it says).
 * BENCH_ATTN_SHAPE=H,G,D,L sets another shape: H query heads, G KV heads of dimension D, L layers
 * (each step runs every layer; e.g. Gemma 3 270M is 4,1,256,1; more layers put a long context out
 * of the last-level cache). Nothing is asserted (speed is not tested).
 * usage: bench_attn [context] [threads] [peak GFLOP/s, 0: none] [FORMATS] */
#include "kernels/pool.h"
#include "kernels/clock.h"
#include "kernels/attn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every format to time, f16 first, into out[cap]; returns how many. */
static int all_formats(kv_fmt *out, int cap) {
    static const int rots[4] = { 0, KV_ROT_B, KV_ROT_H, KV_ROT_P };
    int n = 0;
    out[n++] = KV_F16;
    for (int base = 0; base < KV_NFMT; base++)
        for (int r = 0; r < 4; r++) {
            kv_fmt f = (kv_fmt)(base | rots[r]);
            if (f != KV_F16 && kv_fmt_valid(f) && n < cap) out[n++] = f;
        }
    static const char *kivi[2] = { "kivi2", "kivi4" };
    for (int i = 0; i < 2; i++)
        if (n < cap && kv_fmt_parse(kivi[i], &out[n]) == 0) n++;
    return n;
}

/* f16, then the formats of the comma-separated list (at most 32 names), into out[cap]; returns how
 * many, or -1 naming the first it cannot parse. */
static int listed_formats(const char *list, kv_fmt *out, int cap) {
    char buf[512], *save = NULL;
    int n = 0;
    out[n++] = KV_F16;
    if (strlen(list) >= sizeof buf) return -1;
    strcpy(buf, list);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        kv_fmt f;
        if (kv_fmt_parse(tok, &f) != 0) {
            fprintf(stderr, "bench_attn: %s: not a KV format\n", tok);
            return -1;
        }
        if (f != KV_F16 && n < cap) out[n++] = f;
    }
    return n;
}

/* The attention's flops for T queries at pos0.. (each attends to keys 0..its position). */
static double attn_flops(int n_head, int hd, int pos0, int T) {
    double keys = 0;
    for (int t = 0; t < T; t++) keys += pos0 + t + 1;
    return 4.0 * n_head * hd * keys;
}

int main(int argc, char **argv) {
    int ctx = argc > 1 ? atoi(argv[1]) : 8192, threads = argc > 2 ? atoi(argv[2]) : 2;
    double peak = argc > 3 ? atof(argv[3]) : 0;   /* GFLOP/s; 0: not known */
    int n_head = 9, n_kv = 3, hd = 64, n_layer = 1, T = 512, rc = 1;
    const char *shape = getenv("BENCH_ATTN_SHAPE");
    if (shape && (sscanf(shape, "%d,%d,%d,%d", &n_head, &n_kv, &hd, &n_layer) != 4 || n_kv < 1 || n_kv > 64 ||
                  n_head < n_kv || n_head % n_kv || n_head > 256 || hd < 16 || hd > 512 || hd % 16 || n_layer < 1 ||
                  n_layer > 64)) {
        fprintf(stderr, "bench_attn: BENCH_ATTN_SHAPE is H,G,D,L (query heads, KV heads, head dim, layers)\n");
        return 2;
    }
    kv_fmt fmts[4 * KV_NFMT + 2];
    int n_fmt = argc > 4 ? listed_formats(argv[4], fmts, (int)(sizeof fmts / sizeof *fmts))
                         : all_formats(fmts, (int)(sizeof fmts / sizeof *fmts));
    pool *p = NULL;
    float *kv = NULL, *q = NULL, *o = NULL;
    if (n_fmt < 0 || ctx < T + 32 || ctx > (1 << 24) || threads < 1 || threads > 256 || !(peak >= 0) ||
        pool_create(threads, &p)) {
        fprintf(stderr, "usage: bench_attn [context >= 544] [threads >= 1] [peak GFLOP/s] [FORMATS]\n");
        return 2;
    }
    kv = malloc(sizeof(float) * n_kv * hd * 2);             /* [2][n_kv][hd]: K then V of one token */
    q = malloc(sizeof(float) * (size_t)T * n_head * hd);    /* [T][n_head][hd] */
    o = malloc(sizeof(float) * (size_t)T * n_head * hd);    /* [T][n_head][hd] */
    if (!kv || !q || !o) { fprintf(stderr, "bench_attn: out of memory\n"); goto done; }
    srand(1);
    for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX - 0.5f;
    double f16_prefill = 0, f16_decode = 0;
    double fl_prefill = n_layer * attn_flops(n_head, hd, ctx - 32 - T, T);
    double fl_decode = n_layer * attn_flops(n_head, hd, ctx - 32, 32);
    printf("attention at context %d, %d threads, %d/%d heads, head dim %d, %d layer(s), %d KV formats (ratios: time / "
           "f16's)\n", ctx, threads, n_head, n_kv, hd, n_layer, n_fmt);
    for (int f = 0; f < n_fmt; f++) {
        cache c;
        char err[256], name[32];
        kv_fmt_format(fmts[f], name, sizeof name);
        if (cache_create(&c, fmts[f], fmts[f], n_layer, n_kv, hd, ctx, err, sizeof err)) {
            fprintf(stderr, "bench_attn: %s: %s\n", name, err);
            goto done;
        }
        double bits = 8.0 * (double)cache_bytes_per_token(&c) / (2.0 * n_kv * hd);
        for (int pos = 0; pos < ctx; pos++) {
            for (int i = 0; i < n_kv * hd * 2; i++) kv[i] = (float)rand() / RAND_MAX * 2 - 1;
            for (int l = 0; l < n_layer; l++) cache_store(&c, l, pos, kv, kv + n_kv * hd);
        }
        int bad = 0;
        double t0 = clock_s();
        for (int l = 0; l < n_layer && !bad; l++) {
            attn_args a = { l, T, ctx - 32 - T, n_head, 0, 0.125f, q, o, NULL };
            bad = attn_run(p, &c, &a);
        }
        double t1 = clock_s();
        for (int i = 0; i < 32 && !bad; i++)
            for (int l = 0; l < n_layer && !bad; l++) {
                attn_args d = { l, 1, ctx - 32 + i, n_head, 0, 0.125f, q, o, NULL };
                bad = attn_run(p, &c, &d);
            }
        double t2 = clock_s();
        cache_free(&c);
        if (bad) { fprintf(stderr, "bench_attn: %s: attention failed\n", name); goto done; }
        if (fmts[f] == KV_F16) { f16_prefill = t1 - t0; f16_decode = t2 - t1; }
        double gp = fl_prefill / (t1 - t0) / 1e9, gd = fl_decode / (t2 - t1) / 1e9;
        printf("%-11s %5.2f bits  prefill chunk of %d: %8.2f ms (x%.2f of f16, %5.1f GFLOP/s", name, bits, T,
               1e3 * (t1 - t0), (t1 - t0) / f16_prefill, gp);
        if (peak > 0) printf(" %3.0f%% of peak", 100 * gp / peak);
        printf(")   decode: %7.3f ms/token (x%.2f of f16, %5.1f GFLOP/s", 1e3 * (t2 - t1) / 32, (t2 - t1) / f16_decode, gd);
        if (peak > 0) printf(" %3.0f%% of peak", 100 * gd / peak);
        printf(")\n");
        fflush(stdout);
    }
    rc = 0;
done:
    free(kv); free(q); free(o);
    pool_free(p);
    return rc;
}
