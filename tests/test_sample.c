/* test_sample.c — the sampler of kernels/sample.h (docs/DESIGN.md §3.7) against a plain reference
 * computation, its uniform stream against sequential splitmix64, and common random numbers: two
 * copies of the same row give the same token for every uniform. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/sample.h"
#include "tests/check.h"

/* splitmix64 as a sequential generator: state += golden gamma, then the finaliser */
static uint64_t seq_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The plain reference: probabilities p_t = e^(x_t/T) / Σ e^(x/T) in long double; the kept set by
 * sorting probabilities (a selection sort, ties by id) and adding until the sum reaches top_p;
 * the CDF over the kept ids in ascending order; the first id whose CDF exceeds u. *margin is
 * the distance of u·Z from the nearest CDF boundary (a draw closer than rounding is not checked). */
static int ref_sample(const float *x, int n, double T, double top_p, double u, double *margin) {
    long double p[64], Z = 0, S = 0;
    int order[64], kept[64] = { 0 };
    for (int t = 0; t < n; t++) S += p[t] = expl((long double)x[t] / T);
    for (int t = 0; t < n; t++) order[t] = t;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (x[order[j]] > x[order[i]] || (x[order[j]] == x[order[i]] && order[j] < order[i])) {
                int k = order[i];
                order[i] = order[j];
                order[j] = k;
            }
    long double c = 0;
    for (int i = 0; i < n; i++) {
        kept[order[i]] = 1;
        c += p[order[i]];
        if (top_p < 1 && c >= top_p * S) break;
    }
    for (int t = 0; t < n; t++) if (kept[t]) Z += p[t];
    long double r = u * Z, acc = 0;
    int tok = -1;
    *margin = INFINITY;
    for (int t = 0; t < n; t++) {
        if (!kept[t]) continue;
        acc += p[t];
        double m = fabs((double)(acc - r)) / (double)Z;
        if (m < *margin) *margin = m;
        if (tok < 0 && acc > r) tok = t;
    }
    return tok;
}

int main(void) {
    /* the uniform stream: counter-based = the sequential generator's outputs, in [0, 1) */
    {
        uint64_t s = 12345;
        int same = 1, in_range = 1;
        for (uint64_t i = 0; i < 1000; i++) {
            double want = (double)(seq_next(&s) >> 11) * 0x1.0p-53, u = sample_uniform(12345, i);
            same &= u == want;
            in_range &= u >= 0 && u < 1;
        }
        CHECK(same, "sample_uniform(seed, i) is output i+1 of sequential splitmix64 from seed");
        CHECK(in_range, "uniforms lie in [0, 1)");
        CHECK(sample_uniform(1, 0) != sample_uniform(2, 0), "different seeds give different uniforms");
        double mean = 0;
        for (int i = 0; i < 100000; i++) mean += sample_uniform(7, (uint64_t)i);
        mean /= 100000;
        CHECK(fabs(mean - 0.5) < 0.005, "the mean of 100000 uniforms is 0.5 (%.4f)", mean);
    }
    /* against the reference on small random rows, with and without top-p, over many uniforms */
    {
        uint64_t s = 99;
        long checked = 0, mismatched = 0, skipped = 0;
        static const double temps[] = { 0.3, 0.7, 1.0, 2.5 };
        static const double tops[] = { 1.0, 0.9, 0.5, 0.05 };
        for (int trial = 0; trial < 200; trial++) {
            int n = 1 + (int)(seq_next(&s) % 40);
            float x[64];
            for (int t = 0; t < n; t++) x[t] = (float)((double)(seq_next(&s) >> 11) * 0x1.0p-53 * 12 - 6);
            if (trial % 5 == 0 && n > 3) x[2] = x[1];   /* ties */
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    for (int k = 0; k < 50; k++) {
                        double u = sample_uniform((uint64_t)trial, (uint64_t)(k + 50 * (a * 4 + b))), margin;
                        int want = ref_sample(x, n, temps[a], tops[b], u, &margin);
                        if (margin < 1e-9) { skipped++; continue; }
                        int got = sample_token(x, n, temps[a], tops[b], u);
                        checked++;
                        if (got != want && mismatched++ < 5)
                            fprintf(stderr, "# n %d T %g top_p %g u %.17g: got %d, reference %d\n", n, temps[a],
                                    tops[b], u, got, want);
                    }
        }
        CHECK(mismatched == 0 && checked > 100000, "sampler equals the plain reference on %ld draws (%ld mismatches, "
              "%ld at a boundary skipped)", checked, mismatched, skipped);
    }
    /* common random numbers: two separately built copies of one row draw the same tokens */
    {
        int n = 49152, same = 1, distinct = 0, prev = -1;
        float *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
        uint64_t s = 5;
        for (int t = 0; t < n; t++) a[t] = (float)((double)(seq_next(&s) >> 11) * 0x1.0p-53 * 20 - 10);
        memcpy(b, a, sizeof *a * (size_t)n);
        for (int i = 0; i < 200; i++) {
            double u = sample_uniform(42, (uint64_t)i);
            int ta = sample_token(a, n, 1.0, i % 2 ? 0.9 : 1.0, u), tb = sample_token(b, n, 1.0, i % 2 ? 0.9 : 1.0, u);
            same &= ta == tb && ta >= 0;
            distinct += ta != prev;
            prev = ta;
        }
        CHECK(same, "identical rows give identical samples for the same uniforms");
        CHECK(distinct > 150, "a flat 49152-token row gives varied samples (%d changes in 200)", distinct);
        free(a);
        free(b);
    }
    /* edge cases */
    {
        float x[4] = { 1, 5, 5, 2 };
        int top = 1;
        for (int i = 0; i < 100; i++) top &= sample_token(x, 4, 1.0, 1e-9, sample_uniform(3, (uint64_t)i)) == 1;
        CHECK(top, "a tiny top_p keeps only the top token (the lower id of a tie)");
        CHECK(sample_token(x, 4, 0.0, 1.0, 0.5) == -1 && sample_token(x, 4, 1.0, 0.0, 0.5) == -1 &&
              sample_token(x, 4, 1.0, 1.0, 1.0) == -1 && sample_token(x, 0, 1.0, 1.0, 0.5) == -1 &&
              sample_token(NULL, 4, 1.0, 1.0, 0.5) == -1 && sample_token(x, 4, NAN, 1.0, 0.5) == -1,
              "bad arguments give -1");
        float y[3] = { 0, 0, 0 };
        CHECK(sample_token(y, 3, 1.0, 1.0, 0.0) == 0 && sample_token(y, 3, 1.0, 1.0, 0.34) == 1 &&
              sample_token(y, 3, 1.0, 1.0, 0.99) == 2, "a flat row of 3: u in thirds picks ids 0, 1, 2");
    }
    return check_done();
}
