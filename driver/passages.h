/* passages.h — the controlled depth design (docs/DESIGN.md §2.8): the same target passages scored
 * after every depth's nested prefix, so a depth effect is a within-passage difference.
 *
 * With `sweep --passages N --passage-len L`, N passages of L tokens each are taken from the
 * document beyond the deepest prefix and its fork room (passages_plan). At every depth d, after
 * the depth's other measurements, every arm prefills passage j after the prefix tokens [0, d)
 * (teacher-forced, a row at every passage position), each row is compared with the reference
 * arm's exactly as positions.tsv's rows are (the next token of passage position i is document
 * token start_j + i + 1), and every arm is truncated back to d. Once at the start the passages
 * are also scored after the base prefix alone (passages_base_depth: the document's BOS token, or
 * nothing), the baseline bin. The rows go to passages.tsv (PASSAGES_HEADER), journalled with their
 * depth, so a resumed run rebuilds it byte for byte.
 *
 * This file: the plan (pure), the TSV row writer, the measurement loop over the passages of one
 * depth (driving the sweep's requests through passages_ops), and the meta.json / plan objects.
 */
#ifndef STRATA_PASSAGES_H
#define STRATA_PASSAGES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "driver/stats.h"

#define PASSAGES_LEN_DEFAULT 256
#define PASSAGES_MAX 4096          /* --passages */
#define PASSAGES_LEN_MAX 65536     /* --passage-len */
#define PASSAGES_RECOMMENDED 4     /* fewer: the bootstrap over passages has too few units */

/* passages.tsv: one row per depth, passage, passage position and non-reference arm.
 *   depth        tokens of document prefix before the passage (the base depth for the baseline)
 *   passage      index j (0-based)          start   the passage's first token in the document
 *   i            position within the passage (0..L-1); its next token is document token start + i + 1
 *   the rest as positions.tsv (kl_arm_ref, kl_ref_arm, js, same_top1, nll_arm, nll_ref,
 *   entropy_ref, gap_ref: stats_compare_rows of the arm's row against the reference's) */
#define PASSAGES_HEADER                                                                          \
    "depth\tpassage\tstart\ti\tarm\tkl_arm_ref\tkl_ref_arm\tjs\tsame_top1\tnll_arm\tnll_ref\t"     \
    "entropy_ref\tgap_ref"
#define PASSAGES_FILE "passages.tsv"

/* The deepest prefix to use when --max-depth is not given: one that leaves the fork room and N
 * passages of L tokens (plus the last one's next token) in the document, and L tokens of context
 * after it: min(n_tokens - 1 - fork_n - N*L, n_ctx - L). Returns it, or 0 when none is left (then
 * passages_plan says why). Pure. */
int passages_default_max_depth(size_t n_tokens, uint64_t n_ctx, int fork_n, int N, int L);

/* The passages' first tokens into starts[N]: evenly spaced over the tokens after D + fork_n,
 * starts[j] = S + floor(j * (A - L) / (N - 1)) with S = D + fork_n and A = n_tokens - 1 - S the
 * tokens there that have a next token (starts[0] = S when N == 1); they do not overlap. Needs
 * N >= 1, L >= 1, A >= N*L and D + L <= n_ctx. Returns 0, or -1 with one clear message in err. */
int passages_plan(size_t n_tokens, int D, int fork_n, uint64_t n_ctx, int N, int L, int *starts, char *err,
                  size_t errlen);

/* The baseline's prefix length: 1 when the document starts with the model's BOS token (bos >= 0),
 * else 0 (the passage with nothing before it). Pure. */
int passages_base_depth(const int32_t *tokens, size_t n_tokens, int32_t bos);

/* Creates DIR/passages.tsv (truncated) with its header line. NULL with a message in err. */
FILE *passages_tsv_open(const char *dir, char *err, size_t errlen);
/* One passages.tsv row (numbers as positions.tsv's: %.17g, NaN as "nan"). 0, or -1 on a write
 * error or a bad arm name. */
int passages_tsv_row(FILE *f, int depth, int j, int start, int i, const char *arm, const stats_row *r);

/* What the measurement needs from the sweep (sweep_extras.c implements it with its own requests). */
typedef struct {
    void *ctx;
    int n_arms, ref;
    int V;                       /* the vocabulary (rows are [V] floats) */
    const char *const *names;    /* [n_arms] the arms' names */
    /* Every arm prefills document tokens [start, start + m) after the `at` tokens it holds, with
     * every row; each row is compared with the reference's (next = token start + i + 1) and
     * checked (non-finite logits, twins). *out = [m][n_arms] metrics, *rows = [n_arms] pointers
     * to each arm's m rows [m][V]; both valid until release. Returns 0 or a sweep code. */
    int (*score)(void *ctx, int at, int start, int m, const stats_row **out, const float *const **rows,
                 char *err, size_t errlen);
    void (*release)(void *ctx);
    /* Truncates every arm to `depth` tokens. Returns 0 or a sweep code. */
    int (*truncate)(void *ctx, int depth, char *err, size_t errlen);
} passages_ops;

/* Scores the N passages (starts[N], L tokens each) after the `depth` tokens every arm holds, in
 * requests of at most `chunk` tokens, writing the rows to out (passages_tsv_row, arms in order,
 * the reference skipped) and, with dump_dir, every arm's rows of passage j to
 * dump_dir/<arm>-p<depth>-<j>.f32 (L x V little-endian floats; '/' and ':' in the name become
 * '_'); after each passage every arm is truncated back to depth. Returns 0, a sweep code from
 * ops, or -1 (out of memory, a write error) with a message. */
int passages_measure(const passages_ops *ops, int depth, const int *starts, int N, int L, int chunk, FILE *out,
                     const char *dump_dir, char *err, size_t errlen);

/* {"n": N, "len": L, "base_depth": b, "starts": [...]} for meta.json; with starts NULL only
 * {"n", "len"} (the journal's plan). NULL when out of memory. */
json_t *passages_json(int N, int L, int base_depth, const int *starts);

#endif
