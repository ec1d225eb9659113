/* sample.c — see sample.h (docs/DESIGN.md §3.7). */
#include "kernels/sample.h"

#include <math.h>
#include <stdlib.h>

double sample_uniform(uint64_t seed, uint64_t step) {
    uint64_t z = seed + (step + 1) * 0x9e3779b97f4a7c15ull;   /* splitmix64's state after step+1 draws */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* qsort order of the top-p cut: logit descending, ties by lower id. */
typedef struct { float x; int id; } sample_key;
static int cmp_key(const void *a, const void *b) {
    const sample_key *p = a, *q = b;
    if (p->x != q->x) return p->x > q->x ? -1 : 1;
    return (p->id > q->id) - (p->id < q->id);
}

int sample_token(const float *row, int n, double temperature, double top_p, double u) {
    if (!row || n < 1 || !(temperature > 0) || !isfinite(temperature) || !(top_p > 0) || !(top_p <= 1) ||
        !(u >= 0) || !(u < 1))
        return -1;
    float mx = row[0];
    for (int t = 1; t < n; t++)
        if (row[t] > mx) mx = row[t];
    /* threshold: the kept tokens are those with logit > cut_x, or == cut_x and id <= cut_id */
    float cut_x = -INFINITY;
    int cut_id = n - 1;
    if (top_p < 1) {
        sample_key *k = malloc(sizeof *k * (size_t)n);   /* [n] tokens in the cut's order */
        if (!k) return -1;
        double S = 0;
        for (int t = 0; t < n; t++) {
            k[t].x = row[t];
            k[t].id = t;
            S += exp(((double)row[t] - (double)mx) / temperature);
        }
        qsort(k, (size_t)n, sizeof *k, cmp_key);
        double c = 0, goal = top_p * S;
        int j = 0;
        for (; j < n; j++) {
            c += exp(((double)k[j].x - (double)mx) / temperature);
            if (c >= goal) break;
        }
        if (j == n) j = n - 1;
        cut_x = k[j].x;
        cut_id = k[j].id;
        free(k);
    }
    /* Z over the kept tokens in id order, then the inverse CDF in the same order */
    double Z = 0;
    int last = -1;
    for (int t = 0; t < n; t++) {
        if (row[t] < cut_x || (row[t] == cut_x && t > cut_id)) continue;
        Z += exp(((double)row[t] - (double)mx) / temperature);
        last = t;
    }
    double r = u * Z, acc = 0;
    for (int t = 0; t < n; t++) {
        if (row[t] < cut_x || (row[t] == cut_x && t > cut_id)) continue;
        acc += exp(((double)row[t] - (double)mx) / temperature);
        if (acc > r) return t;
    }
    return last;
}
