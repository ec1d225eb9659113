/* needle.h — the needle-in-a-haystack bench, `strata-driver needle` (docs/DESIGN.md §9): does a
 * KV-cache format change whether a model retrieves a fact buried in a long prompt?
 *
 * For every cell (length L, depth percent p, trial t) and template (raw, chat), every arm gets the
 * same prompt of at most L tokens:
 *
 *   [BOS] head | haystack with K needles | tail
 *
 *   haystack  tokens of the corpus from the trial's starting line (the same tokens for every
 *             length, position and template of a trial), cut back to a sentence boundary
 *   needle    "The special magic number is 4821337." (K = 1) or, with K > 1 needles,
 *             "The special magic number for Paris is 4821337." with K distinct labels and keys;
 *             needle 0 (the one asked for) at p % of the haystack, needle j at
 *             (p/100 + j/K) mod 1 (1 stays 1), each backed up to a sentence boundary: a token whose
 *             text ends in '.', '!', '?' or '\n' (trailing spaces ignored), or the start
 *   head/tail raw:  "" / "\nWhat is the special magic number mentioned in the text above? The
 *                   special magic number is"
 *             chat: the model's chat template (ChatML or Gemma, recognised from the GGUF's
 *                   tokenizer.chat_template; no Jinja engine) around the haystack and the question,
 *                   the answer prefix "The special magic number is" opening the assistant's turn
 *   keys      7-digit numbers from a splitmix64 stream seeded by (seed, L, p, t): the same for every
 *             arm and template, and independent of which other cells run
 *
 * Each arm prefills the prompt (rows = last), generates `gen` tokens greedily (exact match: the
 * first run of ASCII digits of the decoded continuation equals the key), truncates back to the
 * prompt and prefills the gold answer " KEY" (rows = all) for its teacher-forced log-probability
 * Σ ln p(gold_i | prompt, gold_<i). Consecutive cells share the longest common token prefix: the
 * arms truncate back to it instead of to 0, which is bit-identical to a fresh prefill (§2.4).
 *
 * This header: the pure parts (keys, templates, prompt assembly, answer matching, TSV escaping;
 * driver/needle/needle_prompt.c), the command (driver/needle/needle.c) and its results folder
 * (driver/report/report_needle.c).
 */
#ifndef STRATA_NEEDLE_H
#define STRATA_NEEDLE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NEEDLE_KEY_MIN   1000000u   /* keys are uniform in [KEY_MIN, KEY_MAX]: 7 digits */
#define NEEDLE_KEY_MAX   9999999u
#define NEEDLE_MAX_KEYS  16         /* --keys K: 1 <= K <= NEEDLE_MAX_KEYS (one label each) */
#define NEEDLE_TEXT_MAX  1024       /* head, tail, needle sentences, NUL included */

#define NEEDLE_CELLS_HEADER                                                                       \
    "length\tposition\ttrial\ttemplate\tkey\tarm\texact\tanswer\tlogprob\tn_prompt\tneedle_pos\t" \
    "generated\tgold_tokens\tgen_tokens"

/* ============================================================================================
 * Keys (pure)
 * ========================================================================================== */

/* splitmix64: advances *state and returns the next 64-bit output. */
uint64_t needle_splitmix64(uint64_t *state);

/* The needles of one cell: keys distinct, labels distinct, key[0] / label[0] / frac[0] the one
 * asked for (frac[0] = p / 100). */
typedef struct {
    int k;                           /* number of needles, 1..NEEDLE_MAX_KEYS */
    uint32_t key[NEEDLE_MAX_KEYS];   /* [k] */
    int label[NEEDLE_MAX_KEYS];      /* [k] indices for needle_label_name (unused when k = 1) */
    double frac[NEEDLE_MAX_KEYS];    /* [k] in [0, 1]: where in the haystack */
} needle_keys;

/* Draws the needles of cell (length, position p in percent, trial) with k needles from a
 * splitmix64 stream started at a mix of (seed, length, position, trial). Deterministic: the same
 * arguments give the same keys on every machine. Returns 0, or -1 for k outside
 * [1, NEEDLE_MAX_KEYS] or p outside [0, 100]. */
int needle_cell_keys(uint64_t seed, int length, int position, int trial, int k, needle_keys *out);

/* The label of needle index i ("Paris", ...; a static string), NULL outside [0, NEEDLE_MAX_KEYS). */
const char *needle_label_name(int i);

/* The byte offset where trial t's haystack starts in text [n]: drawn from (seed, t), uniform in
 * [0, n − need], moved forward to the start of the next line; 0 when n <= need or no line starts
 * in the rest. */
size_t needle_hay_offset(uint64_t seed, int trial, const char *text, size_t n, size_t need);

/* The same draw from a stream also mixed with attempt (attempt 0 is needle_hay_offset's). */
size_t needle_hay_offset_try(uint64_t seed, int trial, int attempt, const char *text, size_t n, size_t need);

/* Where trial t's haystack starts so that it does not share text with the earlier trials': the
 * first of attempts 0 .. NEEDLE_HAY_ATTEMPTS − 1 (needle_hay_offset_try with need = span) whose
 * [off, off + span) overlaps none of [prev_off[j], prev_end[j]) (j < n_prev); attempt 0 with
 * *overlaps = 1 when every attempt overlaps (a corpus too short for disjoint haystacks). Depends
 * on (seed, t, the earlier trials) only, so trial t is the same whatever --trials is. */
#define NEEDLE_HAY_ATTEMPTS 64
size_t needle_hay_place(uint64_t seed, int trial, const char *text, size_t n, size_t span,
                        const size_t *prev_off, const size_t *prev_end, int n_prev, int *overlaps);

/* ============================================================================================
 * Templates (pure)
 * ========================================================================================== */

typedef enum { NEEDLE_CHAT_NONE = 0, NEEDLE_CHAT_CHATML = 1, NEEDLE_CHAT_GEMMA = 2 } needle_chat;

/* Recognises a chat template's format from its text tpl [len]: "<|im_start|>" ChatML,
 * "<start_of_turn>" Gemma, else NONE. For ChatML, a default system message that the template
 * writes as a literal ('<|im_start|>system\n' TEXT '<|im_end|>', TEXT without Jinja: no quote,
 * brace or '+') is copied into system [syslen] with "\n" escapes decoded; "" when none. */
needle_chat needle_chat_detect(const char *tpl, size_t len, char *system, size_t syslen);

/* "none", "chatml", "gemma" (static). */
const char *needle_chat_name(needle_chat c);

/* The texts of one prompt around its haystack. */
typedef struct {
    char head[NEEDLE_TEXT_MAX];            /* before the haystack ("" raw) */
    char tail[NEEDLE_TEXT_MAX];            /* after it: question, template end, answer prefix */
    char needle[NEEDLE_MAX_KEYS][256];     /* [k] the needle sentences ("The ... is 4821337.") */
    char key_text[16];                     /* key[0] in decimal: the answer */
} needle_texts;

/* Builds the texts for keys (k needles) in the raw form (chat = NEEDLE_CHAT_NONE) or a chat form,
 * system = the template's default system message ("" or NULL: none). Allocates nothing. Returns 0,
 * or -1 when a text does not fit. */
int needle_texts_build(needle_chat chat, const char *system, const needle_keys *keys,
                       needle_texts *out);

/* ============================================================================================
 * Prompt assembly (pure; token ids in, token ids out)
 * ========================================================================================== */

typedef struct {
    const int32_t *ids;
    size_t n;
} needle_span;

typedef struct {
    needle_span prefix;                    /* BOS (if any) + head */
    needle_span hay;                       /* the trial's haystack tokens */
    needle_span tail;
    needle_span needle_nl[NEEDLE_MAX_KEYS];/* [k] each needle as it reads after a newline or at the
                                              start ("The ... 4821337.\n") */
    needle_span needle_sp[NEEDLE_MAX_KEYS];/* [k] and after '.', '!' or '?' (" The ... 4821337.") */
    const double *frac;                    /* [k] */
    int k;
    const uint8_t *ends;                   /* [n_vocab] 1: the token ends a sentence */
    const uint8_t *ends_nl;                /* [n_vocab] 1: the token ends with '\n' */
    int n_vocab;
    size_t length;                         /* L: the prompt gets at most L tokens */
} needle_parts;

typedef struct {
    int32_t *ids;                          /* [n] malloc'd: the prompt */
    size_t n;
    size_t hay_used;                       /* H: haystack tokens in the prompt */
    size_t cut[NEEDLE_MAX_KEYS];           /* [k] where needle j went in the haystack (0..H) */
    size_t at[NEEDLE_MAX_KEYS];            /* [k] index of needle j's first token in the prompt */
    size_t first_cut;                      /* the smallest cut: where the prompt leaves the plain
                                              haystack */
} needle_prompt;

/* Assembles prefix | haystack[0, H) with the needles | tail:
 *   H   = the largest sentence boundary <= L − |prefix| − |tail| − Σ max(|needle_nl|, |needle_sp|)
 *         (a boundary is 0 or an index h with ends[hay[h − 1]]);
 *   cut = the largest boundary <= floor(frac_j · H); needle j takes its _nl form at 0 or after a
 *         token ending in '\n', else its _sp form; needles at the same cut keep their index order.
 * So n <= L. Allocates out->ids (free with needle_prompt_free, also after a failure). Returns 0,
 * or -1 with a message: L too small for the fixed parts, a haystack too short for the budget, no
 * sentence boundary in it, a token id outside [0, n_vocab). */
int needle_assemble(const needle_parts *p, needle_prompt *out, char *err, size_t errlen);
void needle_prompt_free(needle_prompt *p);

/* Length of the longest common prefix of a [na] and b [nb]. */
size_t needle_common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb);

/* ============================================================================================
 * Answers and TSV text (pure)
 * ========================================================================================== */

/* The first run of ASCII digits in text [n] into out [outlen] (NUL-terminated, cut at outlen − 1);
 * "" when there is none. Returns its length (before any cut). */
size_t needle_first_digits(const char *text, size_t n, char *out, size_t outlen);

/* Writes text [n] as one TSV field: '\\' -> "\\\\", tab "\\t", newline "\\n", CR "\\r", other
 * control bytes, DEL and bytes that are not part of valid UTF-8 -> "\\xHH". */
void needle_escape(FILE *f, const char *text, size_t n);

/* Undoes needle_escape in place on the NUL-terminated s; returns the new length, or -1 for a bad
 * escape. */
long needle_unescape(char *s);

/* ============================================================================================
 * cells.tsv (driver/report/report_needle.c): one row per cell, template and arm (NEEDLE_CELLS_HEADER)
 * ========================================================================================== */

typedef struct {
    int length, position, trial;   /* the cell: L (as asked), p in percent, trial index */
    int chat;                      /* template: 0 raw, 1 chat */
    uint32_t key;                  /* the key asked for */
    char arm[64];
    int exact;                     /* 1: the first digit run of the continuation is the key */
    char answer[32];               /* that digit run ("" none; cut at 31 digits) */
    double logprob;                /* Σ ln p(gold token | prompt, earlier gold tokens), nats */
    long n_prompt;                 /* prompt tokens (BOS included) */
    long needle_pos;               /* index of the asked needle's first token in the prompt */
    char *generated;               /* [n_generated + 1] malloc'd: the decoded continuation, up to
                                      the first control token (EOS, end of turn) */
    size_t n_generated;
    int32_t *gold;                 /* [n_gold] malloc'd: the tokens of " KEY" after the prompt */
    size_t n_gold;
    int32_t *gen;                  /* [n_gen] malloc'd: the greedy tokens */
    size_t n_gen;
} needle_row;

/* Writes one cells.tsv row (generated text escaped with needle_escape, token ids comma-separated,
 * logprob with %.17g). Returns 0, or -1 on a bad arm name or a write error. */
int needle_row_write(FILE *f, const needle_row *r);

/* Reads path (header NEEDLE_CELLS_HEADER) into *rows [*n] (malloc'd; free with needle_rows_free,
 * also after a failure). A last line without its newline (a run killed mid-write) is dropped and
 * counted in *n_dropped (may be NULL). Returns 0, or -1 with a message naming the file and line. */
int needle_rows_read(const char *path, needle_row **rows, size_t *n, size_t *n_dropped, char *err,
                     size_t errlen);
void needle_rows_free(needle_row *rows, size_t n);

/* ============================================================================================
 * The retrieval test over units (driver/needle/needle_stats.c; docs/DESIGN.md §9.5)
 *
 * A unit is one (trial, length, depth) cell with its templates (raw and chat twins count as one
 * unit). Per unit, x = Σ over its templates (arm exact − reference exact), an integer in
 * [−NEEDLE_STATS_XMAX, NEEDLE_STATS_XMAX]; the unit's accuracy difference is x / templates.
 * ========================================================================================== */

#define NEEDLE_STATS_XMAX 2   /* templates per unit: raw and chat */

/* Exact sign-flip test of H0 "the arm and the reference are exchangeable within each unit": under
 * H0 each unit's x keeps or flips its sign with probability ½, independently; S = Σ x [n];
 * two-sided p = P(|S*| >= |S|) (1 when S = 0), the distribution of S* by convolution. With x in
 * {−1, 0, 1} (one template) this is McNemar's exact test (stats_mcnemar_exact). Above 65536 for
 * Σ|x| the normal approximation 2·Q((|S| − ½)/√Σx²) is used. Allocates [2Σ|x| + 1] doubles twice,
 * freed before return. NAN on x NULL with n > 0, an x outside ±NEEDLE_STATS_XMAX or no memory. */
double needle_stats_signflip_p(const int *x, size_t n);

/* The grid's power: the smallest accuracy difference (a share, arm − reference) that the sign-flip
 * test at alpha detects with the given power on n_units units of n_tpl templates, in the most
 * favourable case (every discordant unit differs in one template and in the same direction):
 * q / n_tpl, q the smallest share of discordant units with P(Binomial(n_units, q) >= m) >= power,
 * m the fewest one-way units that reach alpha (2·2^(−m) <= alpha: 6 at 0.05). Any other pattern
 * needs a larger difference, so no difference below this can be detected with that power.
 * INFINITY when n_units < m (no power at all), NAN on bad input. Allocates nothing. */
double needle_stats_grid_mdd(size_t n_units, int n_tpl, double alpha, double power);

/* The one-sided (1 − alpha) Clopper–Pearson upper bound on the share of discordant units (k_disc
 * of n_units differ in at least one template): Beta⁻¹(1 − alpha; k + 1, n − k), 1 when k = n. As
 * |accuracy difference| <= that share, "equivalent within M" at level alpha holds when the bound
 * is below M. NAN on n_units == 0, k_disc > n_units or alpha outside (0, 1). */
double needle_stats_disc_bound(size_t k_disc, size_t n_units, double alpha);

/* ============================================================================================
 * The command (driver/needle/needle.c)
 * ========================================================================================== */

/* strata-driver needle ARGS: argv[0] is "needle". command_line = the driver's argv, shell-quoted,
 * and git = the driver build's git hash (both for meta.json); stop = the flag the driver's signal
 * handler raises. Returns the driver's exit code (0 ok, 1 runtime error, 2 usage error, 3 arms
 * mismatch, 130 interrupted). */
int needle_main(int argc, char **argv, const char *command_line, const char *git,
                volatile sig_atomic_t *stop);

/* The usage text of the command. */
void needle_usage(FILE *f);

/* ============================================================================================
 * The results folder (driver/report/report_needle.c)
 * ========================================================================================== */

/* 1 when DIR/meta.json says "kind": "needle", else 0 (also when it cannot be read). */
int needle_is_results(const char *dir);

/* Reads DIR/meta.json and DIR/cells.tsv and writes DIR/README.md, DIR/summary.json and
 * DIR/plots/ (heat maps, PNG + SVG through gnuplot). The same raw files always give byte-identical
 * README.md and summary.json. Returns 0, or -1 with a message in err. Frees what it allocates. */
int needle_report_render(const char *dir, char *err, size_t errlen);

/* Two needle results folders side by side as Markdown on out (setup, accuracy per arm and
 * template, the paired statistics). Writes nothing into the folders. Returns 0 or -1 with err. */
int needle_report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen);

#endif
