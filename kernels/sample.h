/* sample.h — the sampler of `generate` with temperature > 0 (docs/DESIGN.md §3.7): one exactly
 * specified computation, so that two arms given the same seed draw the same uniform at every
 * step (common random numbers) and differ only by their logit rows.
 *
 *   u_i     = splitmix64 output number i+1 of a generator whose state starts at `seed`
 *             (counter-based: z = seed + (i+1)·0x9e3779b97f4a7c15, then the splitmix64
 *             finaliser), top 53 bits · 2^-53: a double in [0, 1)
 *   w_t     = exp(((double)x_t − (double)max x) / T)                        (double)
 *   kept    = all tokens when top_p >= 1; else the smallest prefix of the tokens sorted by
 *             logit descending (ties: lower id first) whose w-sum, added in that order,
 *             reaches top_p · S, S = Σ w over the vocabulary in ascending id order
 *   token   = inverse CDF over the kept tokens in ascending id order: the first kept t with
 *             Σ_{kept t' <= t} w_t' > u_i · Z, Z = that sum over all kept tokens (the last kept
 *             token when rounding leaves none)
 *
 * Nothing here allocates except sample_token's sort scratch (freed before return); no state is
 * kept between calls.
 */
#ifndef STRATA_SAMPLE_H
#define STRATA_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* The uniform of step `step` (0-based) for `seed`: a double in [0, 1). Pure. */
double sample_uniform(uint64_t seed, uint64_t step);

/* The token drawn from row [n] (finite logits, n >= 1) at temperature T (finite, > 0) and top_p
 * in (0, 1] with the uniform u in [0, 1), as specified above. Returns the token id, or -1 on bad
 * arguments or when the sort scratch cannot be allocated. */
int sample_token(const float *row, int n, double temperature, double top_p, double u);

#endif
