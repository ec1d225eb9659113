/* test_ops.c — kernels/ops.c's exp (ops_expf, ops_exp_sub_sum; issue 15): NaN / ±inf / huge / very
 * negative inputs are well defined and the same in the scalar and vector paths, and every finite
 * result keeps its bits (against a frozen copy of the formula). */
#include "tests/check.h"
#include "kernels/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bitsf(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* ---- exp ------------------------------------------------------------------------------------- */

/* The formula of ops_expf as it was before the fix, for the inputs where it was defined
 * (EXP_MIN <= x, rint(x log2 e) <= 128): every finite result must keep these bits. */
static float exp_frozen(float x) {
    if (x < -87.3f) return 0.0f;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float r2 = r * r;
    p = fmaf(p, r2, r);
    p = p + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, 4);
    return p * s;
}

static int same_value(float a, float b) { return (isnan(a) && isnan(b)) || fbits(a) == fbits(b); }

static void test_exp(void) {
    const float nan = NAN, inf = INFINITY;
    CHECK(isnan(ops_expf(nan)), "ops_expf(NaN) is NaN (got %g)", ops_expf(nan));
    CHECK(isnan(ops_expf(-nan)), "ops_expf(-NaN) is NaN");
    CHECK(ops_expf(-inf) == 0.0f && !signbit(ops_expf(-inf)), "ops_expf(-inf) = +0");
    CHECK(ops_expf(inf) == inf, "ops_expf(+inf) = +inf (got %g)", ops_expf(inf));
    CHECK(ops_expf(100.0f) == inf && ops_expf(89.5f) == inf && ops_expf(3e38f) == inf,
          "ops_expf of 89.5, 100, 3e38 = +inf (got %g %g %g)", ops_expf(89.5f), ops_expf(100.0f), ops_expf(3e38f));
    CHECK(ops_expf(-1000.0f) == 0.0f && ops_expf(-3e38f) == 0.0f, "ops_expf of -1000, -3e38 = 0");

    /* the vector lanes (16-, 8-wide and the scalar tail) give the scalar's value for every input */
    float x[203], y[203];
    const float special[] = { nan, inf, -inf, 100.0f, 89.5f, 88.8f, 88.7f, 88.0f, -87.4f, -1000.0f, 3e38f, -3e38f,
                              0.0f, -0.0f, -1.0f, 1.0f, 50.0f };
    int ns = (int)(sizeof special / sizeof special[0]);
    srand(15);
    for (int i = 0; i < 203; i++) x[i] = i % 3 == 0 ? special[(i / 3) % ns] : (float)rand() / RAND_MAX * 120 - 100;
    int ok = 1, n_nan = 0, n_inf = 0;
    for (int n = 0; n <= 203; n++) {
        ops_exp_sub_sum(y, x, 0.0f, n);
        for (int i = 0; i < n; i++) ok &= same_value(y[i], ops_expf(x[i]));
    }
    for (int i = 0; i < 203; i++) { n_nan += isnan(y[i]); n_inf += isinf(y[i]); }
    CHECK(ok && n_nan > 0 && n_inf > 0, "ops_exp_sub_sum lanes == ops_expf for NaN, +-inf, huge and tiny inputs "
          "at every length (%d NaN, %d inf)", n_nan, n_inf);
    /* with a NaN among the inputs the sum is NaN (the softmax does not hide it) */
    CHECK(isnan(ops_exp_sub_sum(y, x, 0.0f, 203)), "a NaN input makes the sum NaN");

    /* every finite input where the old formula was defined: the same bits, scalar and vector */
    static float xs[4096], ys[4096];
    long checked = 0, diff_s = 0, diff_v = 0;
    uint32_t lo_neg = fbits(-0.0f), hi_neg = fbits(-87.3f), hi_pos = fbits(89.0f);   /* n <= 128 up to ~89.07 */
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t a = pass == 0 ? lo_neg : 0, b = pass == 0 ? hi_neg : hi_pos;
        for (uint64_t u = a; u <= b; u += 97) {
            float v = bitsf((uint32_t)u);
            float want = exp_frozen(v);
            checked++;
            if (fbits(ops_expf(v)) != fbits(want)) diff_s++;
            xs[k++] = v;
            if (k == 4096 || u + 97 > b) {
                ops_exp_sub_sum(ys, xs, 0.0f, k);
                for (int i = 0; i < k; i++) diff_v += fbits(ys[i]) != fbits(exp_frozen(xs[i]));
                k = 0;
            }
        }
    }
    CHECK(diff_s == 0 && diff_v == 0, "finite inputs in [-87.3, 89.0] (%ld, every 97th float): the old bits, "
          "scalar (%ld differ) and vector (%ld differ)", checked, diff_s, diff_v);
}

int main(void) {
    test_exp();
    return check_done();
}
