/* report_passages.h — the depth verdict from passages.tsv (docs/DESIGN.md §4.15): the controlled
 * depth design's section of the README, rendered only when the folder has a passages.tsv (so
 * folders without one render exactly as before).
 *
 * Per non-reference arm (the order of first appearance in passages.tsv), a table by depth: the
 * number of passages, mean KL(arm‖ref) over every passage row, top-1 agreement, and Δ NLL as the
 * perplexity change exp(mean(nll_arm − nll_ref)) − 1. Then the trend: the ratio a least-squares fit
 * of ln(mean KL) on ln(depth) over every depth with context implies across the span, with a 95 %
 * interval from a paired bootstrap over passages as units (the same resampled passages at every
 * depth; STATS_BOOT_B resamples, seed STATS_BOOT_SEED), and beside it the ratio of the two end
 * depths alone (stats_ratio_units_ci, the same pairing). Words: "grows with depth (×R [lo, hi])" when
 * lo > 1, "falls with depth (×R [lo, hi])" when hi < 1, else "no detected change (×R [lo, hi])".
 * KL values below 0 (rounding, ~1e-17) count as 0.
 */
#ifndef STRATA_REPORT_PASSAGES_H
#define STRATA_REPORT_PASSAGES_H

#include <stddef.h>
#include <stdio.h>

#include "driver/report/report_internal.h"

/* Writes the section for the passages.tsv at tsv_path to o. Returns 0 (written), 1 (there is no
 * such file: nothing written) or -1 with a message naming the file and line (a malformed row).
 * A last line without its newline (a run killed while writing) is dropped. Allocates only
 * scratch memory, freed before return. */
int report_passages_section(FILE *o, const char *tsv_path, char *err, size_t errlen);

/* When DIR/passages.tsv exists: appends the section to DIR/README.md (rewritten through a temp
 * file and a rename). Returns 0 (also when there is no passages.tsv), or -1 with a message. */
int report_passages_render(const char *dir, char *err, size_t errlen);

/* The trend of arm `arm` from DIR/passages.tsv into *out, for "The answer first" (the depth verdict's
 * source when the folder has passages). Returns 0 (out filled), 1 (no passages.tsv, no rows of
 * that arm, or no trend computable: fewer than two depths with the same passages, KL 0) or -1 with
 * a message (a malformed file). Allocates only scratch memory. */
int report_passages_trend(const char *dir, const char *arm, report_depth_trend *out, char *err, size_t errlen);

/* The verdict's words for a computed trend: "grows with depth" (lo > 1), "falls with depth"
 * (hi < 1) or "no detected change". */
const char *report_passages_word(const report_depth_trend *t);

#endif
