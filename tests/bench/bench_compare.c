/* bench_compare.c — the driver's per-position comparison (driver/stats.c), per position of a sweep
 * with 3 non-reference arms: one-shot stats_compare_rows per arm (the reference's log-softmax
 * recomputed each time) against stats_ref_prepare once + stats_compare_prepared per arm (what
 * the sweep does, on one thread). Prints ms per position for SmolLM2's and Gemma 3's vocabulary
 * sizes and checks the two ways agree bit for bit. Nothing is asserted about speed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/stats.h"
#include "kernels/clock.h"

#define N_ARMS 3

/* xorshift64*: deterministic pseudo-logits in [-8, 8) */
static float next_logit(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t r = *s * 2685821657736338717ULL;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 16.0 - 8.0);
}

static int bench(int V, int reps) {
    int ret = 1;
    float *rows = malloc((size_t)(N_ARMS + 1) * (size_t)V * sizeof *rows);  /* [N_ARMS + 1][V]; 0 = ref */
    double *scratch = malloc(2 * (size_t)V * sizeof *scratch);              /* [2][V] ln p, p */
    if (!rows || !scratch) { fprintf(stderr, "out of memory\n"); goto done; }
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < V; i++) rows[i] = next_logit(&s);
    for (int a = 1; a <= N_ARMS; a++)
        for (int i = 0; i < V; i++) rows[(size_t)a * V + i] = rows[i] + 0.001f * (float)a * next_logit(&s);
    stats_row one[N_ARMS], pre[N_ARMS];
    double t0 = clock_s();
    for (int r = 0; r < reps; r++)
        for (int a = 0; a < N_ARMS; a++) stats_compare_rows(rows + (size_t)(a + 1) * V, rows, V, 7, &one[a]);
    double t1 = clock_s();
    for (int r = 0; r < reps; r++) {
        stats_ref ref;
        stats_ref_prepare(rows, V, scratch, scratch + V, &ref);
        for (int a = 0; a < N_ARMS; a++) stats_compare_prepared(rows + (size_t)(a + 1) * V, &ref, 7, &pre[a]);
    }
    double t2 = clock_s();
    int same = !memcmp(one, pre, sizeof one);
    printf("  vocab %6d, %d arms: one-shot %7.2f ms/position, prepared reference %7.2f ms/position (%.2fx)%s\n",
           V, N_ARMS, 1e3 * (t1 - t0) / reps, 1e3 * (t2 - t1) / reps, (t1 - t0) / (t2 - t1),
           same ? "" : "  RESULTS DIFFER");
    ret = same ? 0 : 1;
done:
    free(rows);
    free(scratch);
    return ret;
}

int main(void) {
    printf("== the driver's per-position comparison, 1 thread (the sweep splits positions over --compare-threads)\n");
    int rc = bench(49152, 40);
    rc |= bench(262144, 10);
    return rc;
}
