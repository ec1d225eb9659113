/* report_needle_md.c — README.md of a needle results folder (see report_needle_internal.h): the
 * setup, accuracy, the paired statistics, the cells where arms disagree, what the numbers support.
 *
 * Reading order: cells of a table; the sections in README order; needle_readme_write. */
#include "driver/report/report_needle_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SHOWN_DISAGREE 12     /* cells listed where an arm and the reference disagree */

/* Generated text for a Markdown table cell: '|' and '`' escaped, newlines as ⏎, cut at 60 bytes
 * (on a UTF-8 boundary). */
static void md_text(FILE *o, const char *s, size_t n) {
    size_t lim = n > 60 ? 60 : n;
    while (lim < n && lim > 0 && ((unsigned char)s[lim] & 0xC0) == 0x80) lim--;
    fputc('`', o);
    for (size_t i = 0; i < lim; i++) {
        if (s[i] == '\n') fputs("⏎", o);
        else if (s[i] == '|') fputs("\\|", o);
        else if (s[i] == '`') fputc('\'', o);
        else if ((unsigned char)s[i] < 0x20) fputc(' ', o);
        else fputc(s[i], o);
    }
    fputc('`', o);
    if (lim < n) fputs("…", o);
}

static void readme_setup(FILE *o, const needle_results *R, const needle_analysis *A) {
    fprintf(o, "## Setup\n\n| | |\n|---|---|\n");
    /* strings from meta.json: control bytes were escaped on loading, '|' is escaped here */
    fputs("| Model | `", o); report_md_cell(o, R->model_path); fputs("` — ", o); report_md_cell(o, R->model_arch);
    report_md_model_sizes(o, R->n_layer, R->n_vocab, R->n_ctx);
    fputs(" |\n| Model sha256 | `", o); report_md_cell(o, R->model_sha); fputs("` |\n", o);
    fputs("| Chat template | ", o); report_md_cell(o, R->chat_template);
    if (R->chat_system[0] && strcmp(R->chat_system, "unknown")) {
        fputs(" (default system message: \"", o); report_md_cell(o, R->chat_system); fputs("\")", o);
    }
    fprintf(o, " |\n| Reference arm | %s (K ", R->arms[R->ref].name);
    report_md_cell(o, R->arms[R->ref].kv_k); fputs(", V ", o); report_md_cell(o, R->arms[R->ref].kv_v); fputs(") |\n", o);
    fprintf(o, "| Lengths | ");
    for (int i = 0; i < R->n_lengths; i++) {
        fprintf(o, "%s%d", i ? ", " : "", R->lengths[i]);
        if (!isnan(A->prompt_mean[i])) fprintf(o, " (prompts %.0f tokens on average)", A->prompt_mean[i]);
    }
    if (!isnan(R->cap_len)) fprintf(o, "; lengths above %.0f capped at %.0f (the context minus the answer)", R->cap_len, R->cap_len);
    fprintf(o, " |\n| Depths | ");
    for (int i = 0; i < R->n_positions; i++) fprintf(o, "%s%d %%", i ? ", " : "", R->positions[i]);
    fprintf(o, " of the haystack, backed up to a sentence boundary |\n");
    fprintf(o, "| Needles per prompt | %d%s |\n", R->keys, R->keys > 1 ? " (labelled by city; the one at the depth is asked for, the others spread evenly)" : "");
    fprintf(o, "| Trials | %d per (length, depth, template), each with its own haystack |\n", R->trials);
    json_t *hs = json_object_get(json_object_get(R->meta, "plan"), "haystacks");
    fprintf(o, "| Haystacks | ");
    if (!json_is_array(hs) || !json_array_size(hs)) fprintf(o, "%d (offsets not recorded in meta.json)", R->trials);
    for (size_t i = 0; json_is_array(hs) && i < json_array_size(hs) && i < 16; i++) {
        json_t *h = json_array_get(hs, i);
        fprintf(o, "%strial %.0f from byte %.0f", i ? ", " : "", needle_results_num(h, "trial"), needle_results_num(h, "offset"));
    }
    if (json_is_array(hs) && json_array_size(hs) > 16) fprintf(o, ", … (%zu in meta.json)", json_array_size(hs));
    fprintf(o, " of the corpus |\n");
    fprintf(o, "| Templates | ");
    for (int i = 0; i < R->n_tpl; i++) fprintf(o, "%s%s", i ? ", " : "", R->tpl_chat[i] ? "chat" : "raw");
    fprintf(o, " |\n| Seed | %ld (keys and haystack offsets; the same for every arm) |\n", R->seed);
    fprintf(o, "| Answer | %d greedy tokens; exact match = its first run of digits is the key |\n", R->gen);
    fputs("| Corpus | `", o); report_md_cell(o, R->corpus_path); fputs("` — ", o); report_md_cell(o, R->corpus_desc);
    fputs(" |\n", o);
    fprintf(o, "| Cells | %zu rows in cells.tsv", R->n_rows);
    if (!isnan(R->n_cells_plan)) fprintf(o, " (%.0f cells × %d arms planned)", R->n_cells_plan, R->n_arms);
    fputs("; status: ", o); report_md_cell(o, R->status); fprintf(o, "%s |\n", R->sessions > 1 ? " (resumed)" : "");
    if (!isnan(R->prefill_tokens))
        fprintf(o, "| Cost | %.0f prompt tokens per arm, %.0f of them prefilled (consecutive prompts share their "
                "longest common prefix) |\n", R->prompt_tokens, R->prefill_tokens);
    fputs("| Engine | ", o); report_md_cell(o, R->engine); fputs(" |\n| Git | `", o); report_md_cell(o, R->git);
    fputs("` |\n| Machine | ", o); report_md_cell(o, R->machine); fputs(" |\n| Date | ", o); report_md_cell(o, R->date);
    fputs(" |\n", o);
    fprintf(o, "| Wall time | ");
    if (isnan(R->wall)) fprintf(o, "unknown");
    else fprintf(o, "%.1f s (%.1f min)", R->wall, R->wall / 60);
    if (!isnan(R->est_seconds)) fprintf(o, "; estimated before the run: %.0f s", R->est_seconds);
    fprintf(o, " |\n\n| Arm | K cache | V cache | KV bytes per token | Role |\n|---|---|---|---:|---|\n");
    for (int i = 0; i < R->n_arms; i++) {
        fprintf(o, "| %s | ", R->arms[i].name);
        report_md_cell(o, R->arms[i].kv_k); fputs(" | ", o); report_md_cell(o, R->arms[i].kv_v); fputs(" | ", o);
        report_md_num(o, R->arms[i].kv_bytes, "");
        fprintf(o, " | %s |\n", needle_role_name(R->arms[i].role));
    }
    fprintf(o, "\n");
}

static void readme_accuracy(FILE *o, const needle_results *R, const needle_analysis *A) {
    char a[96];
    fprintf(o, "## Accuracy\n\nShare of cells whose greedy answer starts with the key, with the Wilson "
            "95%% interval; mean log-probability of the key's tokens (teacher-forced, nats).\n\n| Arm |");
    for (int set = 0; set < A->n_sets; set++) fprintf(o, " %s: accuracy | %s: mean ln p(key) |", needle_set_name(R, A, set), needle_set_name(R, A, set));
    fprintf(o, "\n|---|");
    for (int set = 0; set < A->n_sets; set++) fprintf(o, "---:|---:|");
    fprintf(o, "\n");
    for (int i = 0; i < R->n_arms; i++) {
        fprintf(o, "| %s |", R->arms[i].name);
        for (int set = 0; set < A->n_sets; set++) {
            const needle_arm_stat *S = needle_stat_at(A, R, set, i);
            report_fmt_pct_ci(&S->acc, a, sizeof a);
            fprintf(o, " %zu/%zu = %s | ", S->exact, S->n, a);
            if (isnan(S->mean_lp)) fprintf(o, REPORT_NA " |");
            else fprintf(o, "%.3f |", S->mean_lp);
        }
        fprintf(o, "\n");
    }
    fprintf(o, "\nBy length (rows) and needle depth (columns), cells answered exactly / cells:\n\n");
    for (int ti = 0; ti < R->n_tpl; ti++)
        for (int i = 0; i < R->n_arms; i++) {
            const needle_arm_stat *S = needle_stat_at(A, R, ti, i);
            fprintf(o, "**%s, %s prompts**\n\n| Length |", R->arms[i].name, R->tpl_chat[ti] ? "chat" : "raw");
            for (int p = 0; p < R->n_positions; p++) fprintf(o, " %d %% |", R->positions[p]);
            fprintf(o, " all |\n|---:|");
            for (int p = 0; p <= R->n_positions; p++) fprintf(o, "---:|");
            fprintf(o, "\n");
            for (int l = 0; l < R->n_lengths; l++) {
                size_t rn = 0, rk = 0;
                fprintf(o, "| %d |", R->lengths[l]);
                for (int p = 0; p < R->n_positions; p++) {
                    size_t g = (size_t)l * (size_t)R->n_positions + (size_t)p;
                    rn += S->g_n[g];
                    rk += S->g_exact[g];
                    if (S->g_n[g]) fprintf(o, " %zu/%zu |", S->g_exact[g], S->g_n[g]);
                    else fprintf(o, " " REPORT_NA " |");
                }
                fprintf(o, " %zu/%zu |\n", rk, rn);
            }
            fprintf(o, "\n");
        }
}

static void readme_paired(FILE *o, const needle_results *R, const needle_analysis *A) {
    const char *ref = R->arms[R->ref].name;
    fprintf(o, "## Paired statistics\n\nEach arm against %s on the same prompts. A *unit* is one (trial, "
            "length, depth) cell; in the pooled set its raw and chat twins are one unit (they share the key "
            "and the haystack), its accuracy difference the mean over its templates. The units of one trial "
            "share that trial's haystack (%d haystack%s here)%s. *b*: cells only the arm answers exactly; "
            "*c*: cells only %s does. *Differing*: units where a template's outcome differs. *Sign-flip p*: "
            "the exact two-sided sign-flip test of the summed per-unit differences (McNemar's exact test "
            "when a unit is one cell), Holm-adjusted over the arms of the set beside it. *MDD*: the smallest "
            "accuracy difference the test detects with %.0f %% power on these units, at best (every "
            "differing unit one way, in one template); ∞: no power at all. *Bound*: the one-sided 95 %% "
            "Clopper–Pearson bound on the share of differing units, which bounds |difference|. Δ log-prob: "
            "the arm's log-probability of the key minus %s's, per unit, mean with a circular bootstrap 95%% "
            "interval over units (%d resamples, seed %lu, blocks of 1) and its MDD (2.80 × the standard "
            "error). *Identical*: cells with the same greedy tokens and a bit-identical log-prob.\n\n",
            ref, R->trials, R->trials == 1 ? "" : "s",
            R->trials == 1 ? ": every unit rests on the same haystack, so the units are not independent draws"
                           : "",
            ref, 100 * NEEDLE_POWER, ref, STATS_BOOT_B, (unsigned long)STATS_BOOT_SEED);
    fprintf(o, "| Arm | Prompts | Cells | Accuracy arm / %s | b | c | Units | Differing | Sign-flip p (Holm) | MDD | "
            "Bound | Mean Δ log-prob (nats) | Δ log-prob MDD | Identical |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", ref);
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref) continue;
        for (int set = 0; set < A->n_sets; set++) {
            const needle_arm_stat *S = needle_stat_at(A, R, set, i);
            char pa[32], pb[32], pp[32], ph[32], ci[96], md[32], bd[32], lm[32];
            needle_fmt_pct(S->pairs ? (double)(S->ref_exact + S->b - S->c) / (double)S->pairs : NAN, pa, sizeof pa);
            needle_fmt_pct(S->pairs ? (double)S->ref_exact / (double)S->pairs : NAN, pb, sizeof pb);
            needle_fmt_p(S->p, pp, sizeof pp);
            needle_fmt_p(S->p_holm, ph, sizeof ph);
            needle_fmt_lp_ci(&S->dlp, ci, sizeof ci);
            if (isinf(S->mdd)) snprintf(md, sizeof md, "∞");
            else needle_fmt_pct(S->mdd, md, sizeof md);
            needle_fmt_pct(S->bound, bd, sizeof bd);
            if (isnan(S->dlp_mdd)) snprintf(lm, sizeof lm, REPORT_NA);
            else snprintf(lm, sizeof lm, "%.2g", S->dlp_mdd);
            fprintf(o, "| %s | %s | %zu | %s / %s | %zu | %zu | %zu | %zu | %s (%s) | %s | %s | %s | %s | %zu of %zu |\n",
                    R->arms[i].name, needle_set_name(R, A, set), S->pairs, pa, pb, S->b, S->c, S->units, S->disc_units,
                    pp, ph, md, bd, ci, lm, S->identical, S->pairs);
        }
    }
    fprintf(o, "\n");
}

static void readme_disagree(FILE *o, const needle_results *R) {
    int shown = 0, total = 0;
    for (int ti = 0; ti < R->n_tpl; ti++)
        for (int li = 0; li < R->n_lengths; li++)
            for (int pi = 0; pi < R->n_positions; pi++)
                for (int t = 0; t < R->trials; t++) {
                    const needle_row *q = needle_results_row(R, ti, li, pi, t, R->ref);
                    for (int a = 0; q && a < R->n_arms; a++) {
                        const needle_row *r = needle_results_row(R, ti, li, pi, t, a);
                        if (a == R->ref || !r || r->exact == q->exact) continue;
                        if (!total++)
                            fprintf(o, "## Cells where an arm and the reference disagree\n\n| Template | Length "
                                    "| Depth | Trial | Key | Arm | Arm's answer | %s's answer |\n|---|---:|---:|"
                                    "---:|---:|---|---|---|\n", R->arms[R->ref].name);
                        if (shown >= MAX_SHOWN_DISAGREE) continue;
                        shown++;
                        fprintf(o, "| %s | %d | %d %% | %d | %u | %s | ", r->chat ? "chat" : "raw", r->length,
                                r->position, r->trial, r->key, r->arm);
                        md_text(o, r->generated, r->n_generated);
                        fprintf(o, " | ");
                        md_text(o, q->generated, q->n_generated);
                        fprintf(o, " |\n");
                    }
                }
    if (total > shown) fprintf(o, "\n(%d more in cells.tsv)\n", total - shown);
    if (total) fprintf(o, "\n");
}

/* The plain-language summary: sentences generated from the statistics. */
/* The parts of "What the numbers support" below judge the pooled set (or the only template). */

/* The bench itself: how often the reference retrieves the key, by length, and what that leaves
 * accuracy able to show. */
static void support_bench(FILE *o, const needle_results *R, const needle_analysis *A) {
    const char *ref = R->arms[R->ref].name;
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    const needle_arm_stat *Q = needle_stat_at(A, R, pooled, R->ref);
    char a[96], b[96];
    report_fmt_pct_ci(&Q->acc, a, sizeof a);
    fprintf(o, "- **The bench itself.** %s retrieves the key in %zu of %zu cells (%s)", ref, Q->exact, Q->n, a);
    if (R->n_lengths > 1) {
        fprintf(o, "; by length:");
        for (int l = 0; l < R->n_lengths; l++) {
            size_t n = 0, k = 0;
            for (int p = 0; p < R->n_positions; p++) {
                n += Q->g_n[(size_t)l * (size_t)R->n_positions + (size_t)p];
                k += Q->g_exact[(size_t)l * (size_t)R->n_positions + (size_t)p];
            }
            needle_fmt_pct(n ? (double)k / (double)n : NAN, b, sizeof b);
            fprintf(o, " %d: %s%s", R->lengths[l], b, l + 1 < R->n_lengths ? "," : "");
        }
    }
    if (Q->n && Q->exact == 0)
        fprintf(o, ". The model never retrieves the key here, so accuracy cannot tell the arms apart: only "
                "the log-probability comparison is informative.\n");
    else if (Q->n && Q->exact == Q->n)
        fprintf(o, ". Every cell is retrieved, so accuracy has no room to show a loss below the ceiling; "
                "the log-probability comparison still does.\n");
    else fprintf(o, ".\n");
}

/* Arm i against the reference: identical, or the retrieval and log-probability verdicts. */
static void support_arm(FILE *o, const needle_results *R, const needle_analysis *A, int i) {
    const char *ref = R->arms[R->ref].name;
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    char a[96], b[96];
    const needle_arm_stat *S = needle_stat_at(A, R, pooled, i);
    const char *nm = R->arms[i].name, *what = R->arms[i].role == ROLE_FLOOR ? " (the fp32 control)"
                                              : R->arms[i].role == ROLE_REPEAT ? " (a repeat of an arm)" : "";
    if (!S->pairs) { fprintf(o, "- **%s**%s: no cell measured on both arms.\n", nm, what); return; }
    char un[128], pw[256], w[64], ph[32];
    needle_fmt_units(R, A, pooled, S->units, un, sizeof un);
    needle_fmt_p(S->p_holm, ph, sizeof ph);
    needle_fmt_pct((double)(S->ref_exact + S->b - S->c) / (double)S->pairs, a, sizeof a);
    needle_fmt_pct((double)S->ref_exact / (double)S->pairs, b, sizeof b);
    fprintf(o, "- **%s**%s: ", nm, what);
    if (S->identical == S->pairs) {
        fprintf(o, "identical to %s in all %zu cells (same greedy tokens, bit-identical log-probabilities).\n",
                ref, S->pairs);
        return;
    }
    needle_verdict_words(S->v_acc, 0, w, sizeof w);
    needle_fmt_power_acc(S, pw, sizeof pw);
    fprintf(o, "retrieval **%s** against %s: %s vs %s of %zu cells, %zu of %s differ (exact sign-flip test, "
            "Holm p = %s); %s", w, ref, a, b, S->pairs, S->disc_units, un, ph, pw);
    needle_fmt_lp_ci(&S->dlp, a, sizeof a);
    needle_verdict_words(S->v_lp, 1, w, sizeof w);
    needle_fmt_power_lp(S, pw, sizeof pw);
    needle_fmt_p(S->dlp_holm, ph, sizeof ph);
    if (isnan(S->dlp.est)) fprintf(o, ".\n");
    else
        fprintf(o, ". The key's log-probability: **%s**, mean Δ %s nats (bootstrap over units, Holm p = %s); "
                "%s.\n", w, a, ph, pw);
}

/* Against the fp32 control: how much fp32 moves the outcome, beside each arm. */
static void support_control(FILE *o, const needle_results *R, const needle_analysis *A) {
    const char *ref = R->arms[R->ref].name;
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    char a[96], b[96];
    if (R->floor < 0) return;
    const needle_arm_stat *F = needle_stat_at(A, R, pooled, R->floor);
    needle_fmt_lp_ci(&F->dlp, a, sizeof a);
    fprintf(o, "- **Against the control:** fp32 vs %s changes the outcome of %zu cells and moves the key's "
            "log-probability by %s nats on average; ", ref, F->b + F->c, a);
    int first = 1;
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref || i == R->floor) continue;
        const needle_arm_stat *S = needle_stat_at(A, R, pooled, i);
        needle_fmt_lp_ci(&S->dlp, b, sizeof b);
        fprintf(o, "%s%s changes %zu (Δ %s)", first ? "" : "; ", R->arms[i].name, S->b + S->c, b);
        first = 0;
    }
    fprintf(o, ".\n");
}

/* How the tests work, and how independent the units are. */
static void support_definitions(FILE *o, const needle_results *R, const needle_analysis *A) {
    const char *ref = R->arms[R->ref].name;
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    fprintf(o, "\nDefinitions: every test compares an arm with %s over *units* — one (trial, length, depth) "
            "cell, its raw and chat twins together (they share the key and the haystack) — at α = %.2g, "
            "Holm-adjusted over the arms. *Retrieval*: the exact sign-flip test of the per-unit accuracy "
            "differences (McNemar's exact test when a unit is one cell) says **lower** or **higher**; "
            "**equivalent within ±%.0f points** when the one-sided 95 %% Clopper–Pearson bound on the share "
            "of differing units is below %.0f %%; else **no detected difference**, which is not \"equal\". "
            "*Log-probability*: the bootstrap over units says lower or higher; equivalent within ±%.2g nats "
            "when the 90 %% interval lies inside the margin (TOST). Each verdict states its power: the "
            "smallest difference the grid detects with %.0f %% power (for retrieval at best: every differing "
            "unit one way, in one template), \"no power\" when that is above the margin. ",
            ref, NEEDLE_ALPHA, 100 * NEEDLE_EQ_SHARE, 100 * NEEDLE_EQ_SHARE, NEEDLE_LOGPROB_EPS,
            100 * NEEDLE_POWER);
    if (R->trials == 1)
        fprintf(o, "**This run rests on one haystack**: every unit shares it, so the units are not independent "
                "draws and the tests speak for this haystack only; equivalence is not assessed (run with "
                "`--trials 3` or more for independent haystacks). ");
    else
        fprintf(o, "The units of a trial share its haystack (%d haystacks); the tests treat the units as "
                "independent. ", R->trials);
    fprintf(o, "The table judges %s prompts; a template's verdict is added where it differs (every verdict is "
            "in summary.json).\n\n", needle_set_name(R, A, pooled));
}

static void readme_support(FILE *o, const needle_results *R, const needle_analysis *A, const needle_claim *cl, int n_cl) {
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    fprintf(o, "## What the numbers support\n\n");
    support_bench(o, R, A);
    for (int i = 0; i < R->n_arms; i++)
        if (i != R->ref) support_arm(o, R, A, i);
    support_control(o, R, A);
    support_definitions(o, R, A);
    fprintf(o, "| Claim | Verdict | Evidence |\n|---|---|---|\n");
    const char *pn = needle_set_name(R, A, pooled);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_cl; i++) {
            int is_pooled = !strcmp(cl[i].set, pn), differs = 0;
            for (int j = 0; j < n_cl && !is_pooled; j++)
                if (!strcmp(cl[j].set, pn) && !strcmp(cl[j].arm, cl[i].arm) && cl[j].kind == cl[i].kind)
                    differs = cl[j].verdict != cl[i].verdict && cl[i].verdict != STATS_NOT_COMPUTABLE;
            if (pass == 0 ? is_pooled : differs)
                fprintf(o, "| %s | **%s** | %s |\n", cl[i].claim, cl[i].words, cl[i].evidence);
        }
    if (!n_cl) fprintf(o, "| (no arm besides the reference) | **not measured** | |\n");
    fprintf(o, "\n");
}

void needle_readme_write(FILE *o, const needle_results *R, const needle_analysis *A, const needle_claim *cl, int n_cl, const int *drawn) {
    fprintf(o, "# strata needle results: %s\n\n", R->tag);
    for (int i = 0; i < R->n_warnings; i++)
        if (strstr(R->warnings[i], "NOT bit-identical"))
            fprintf(o, "> **WARNING — %s**\n\n", R->warnings[i]);
    if (!R->complete)
        fprintf(o, "> **Partial results:** the run stopped before every cell was measured (%s); continue it "
                "with `strata-driver needle --resume <this folder>`.\n\n", R->status);
    fprintf(o, "Needle in a haystack: does the KV-cache format change whether %s retrieves a 7-digit key "
            "hidden in a long prompt? Each cell is one prompt (length, needle depth, trial, template). "
            "Every arm answers it greedily — exact match: the first digits of the answer are the key — "
            "and scores the key teacher-forced: the sum of the log-probabilities of its tokens, in nats. "
            "Every arm is compared with the reference, %s, unit by unit (a unit: one length, depth and trial, "
            "its templates together).\n\n", R->model_path,
            R->arms[R->ref].name);
    readme_setup(o, R, A);
    if (R->n_warnings) {
        fprintf(o, "## Warnings recorded by the run\n\n");
        for (int i = 0; i < R->n_warnings; i++) fprintf(o, "- %s\n", R->warnings[i]);
        fprintf(o, "\n");
    }
    readme_support(o, R, A, cl, n_cl);
    readme_accuracy(o, R, A);
    readme_paired(o, R, A);
    readme_disagree(o, R);

    fprintf(o, "## Plots\n\n");
    for (int diff = 0; diff < 2; diff++)
        for (int a = 0; a < R->n_arms; a++) {
            if (!drawn[diff * R->n_arms + a]) continue;
            char stem[64];
            snprintf(stem, sizeof stem, "%s_%d", diff ? "diff" : "accuracy", a);
            fprintf(o, "%s %s%s%s by length and depth ([script](plots/%s.gp)):\n\n"
                    "![%s](plots/%s.png)\n\n", diff ? "Accuracy difference" : "Accuracy of", R->arms[a].name,
                    diff ? " − " : "", diff ? R->arms[R->ref].name : "", stem, stem, stem);
        }

    fprintf(o, "## Method\n\n");
    fprintf(o, "- **Prompt**: [BOS] + template head + haystack with the needle(s) + the question. The "
            "haystack is the corpus from a line drawn per trial (the same tokens for every length, depth "
            "and template of a trial), cut to fill the length and backed up to a sentence boundary (a "
            "token ending in '.', '!', '?' or a newline). The needle, \"The special magic number is "
            "NNNNNNN.\", goes in at the depth's share of the haystack, backed up to a sentence boundary. "
            "Raw prompts end \"… What is the special magic number mentioned in the text above? The special "
            "magic number is\"; chat prompts put the haystack and the question in the user turn of the "
            "model's template and open the assistant turn with \"The special magic number is\".\n");
    fprintf(o, "- **Keys**: 7-digit numbers from splitmix64 seeded by (seed, length, depth, trial): the same "
            "for every arm and template.\n");
    fprintf(o, "- **Per cell and arm**: prefill the prompt, generate %d tokens greedily (ties to the lowest "
            "id), truncate back, prefill the key's tokens and sum ln p of each (log-softmax in double, "
            "docs/DESIGN.md §3.4). Consecutive cells reuse their longest common token prefix: the arms "
            "truncate back to it rather than to 0, which gives bit-identical rows (docs/DESIGN.md §2.4).\n\n", R->gen);
    fprintf(o, "## Limitations\n\n");
    fprintf(o, "- One model, one corpus, one needle phrasing: accuracy here is this task's, not the model's "
            "long-context ability in general.\n");
    fprintf(o, "- %d trial%s per (length, depth, template): per-cell accuracies in the grids rest on very few "
            "prompts; the pooled tests are the ones to read.\n", R->trials, R->trials > 1 ? "s" : "");
    if (R->trials == 1)
        fprintf(o, "- One haystack: every unit shares the same text, so the tests' units are not independent "
                "and a verdict holds for this haystack, not for the corpus; equivalence is not assessed.\n");
    else
        fprintf(o, "- %d haystacks: the units of a trial share its haystack, which the tests (treating units as "
                "independent) do not model; a haystack that helps or hurts every cell of its trial narrows the "
                "intervals.\n", R->trials);
    fprintf(o, "- The retrieval test only sees units where the arms disagree; \"no detected difference\" is not "
            "\"equal\", and the MDD says how large a difference could have gone unseen.\n");
    fprintf(o, "- Exact match is strict (the first digit run must be the whole key); the log-probability "
            "shows partial knowledge that accuracy misses.\n\n");
    fprintf(o, "## Reproduce\n\n```sh\n%s\n```\n\nRe-render this folder from cells.tsv and meta.json (no model "
            "needed): `strata-driver report <this folder>`.\n\n", R->command);
    fprintf(o, "## Provenance\n\n- Raw data: `meta.json`, `cells.tsv` (%zu rows: one per cell, template and arm)%s.\n",
            R->n_rows, R->n_dropped ? "; a cut-off last line was ignored" : "");
    fprintf(o, "- Derived (generated, do not edit): `README.md`, `summary.json`, `plots/*.gp` and `plots/*.png`; "
            "`report` also writes each plot's `.dat` data and an `.svg`, which git does not keep.\n");
    fprintf(o, "- Engine %s, git `%s`, model sha256 `%s`, corpus sha256 `%s`, run on %s, %s.\n", R->engine,
            R->git, R->model_sha, R->corpus_sha, R->machine, R->date);
}
