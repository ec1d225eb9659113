/* test_passages.c — the controlled depth design's pure parts (driver/passages.h) and its verdict
 * (driver/report/report_passages.h):
 *   - passages_plan: evenly spaced, non-overlapping passages beyond the deepest prefix and the fork
 *     room, each with its next token; a document too short, or passages that do not fit the
 *     context, give one clear error; passages_default_max_depth leaves room for them;
 *   - passages_base_depth: 1 after a BOS, else 0;
 *   - passages_tsv_row: the depth, passage, start columns, then positions.tsv's row;
 *   - the report section on hand-made passages.tsv files: KL doubling with depth -> "grows with
 *     depth", flat -> "no detected change", halving -> "falls with depth", with the number of
 *     passages and "bootstrap over the passages"; an all-zero arm is "identical"; a malformed row
 *     is an error naming its line; a torn last line is dropped; no file -> nothing written.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/passages.h"
#include "driver/report/report_passages.h"
#include "tests/check.h"

/* Writes a passages.tsv to path: depths [nd], P passages of L rows each, for arms "int8" (KL at
 * depth k, passage j, row i = kl[k] * (1 + 0.3 * wobble(j, i))) and "f16#2" (KL 0). The NLLs
 * differ by dnll. */
static void write_tsv(const char *path, const int *depths, const double *kl, int nd, int P, int L, double dnll,
                      const char *tail) {
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", PASSAGES_HEADER);
    for (int k = 0; k < nd; k++)
        for (int j = 0; j < P; j++)
            for (int i = 0; i < L; i++) {
                /* a per-passage level (passages differ) and a per-row wobble: the same at every depth */
                double w = (1.0 + 0.5 * ((j * 7) % 5) / 4.0) * (1.0 + 0.3 * sin(1.7 * i + j));
                fprintf(f, "%d\t%d\t%d\t%d\tint8\t%.17g\t%.17g\t0.001\t%d\t%.17g\t2.5\t3\t1\n", depths[k], j,
                        1000 + 300 * j, i, kl[k] * w, kl[k] * w, (i + j) % 17 != 0, 2.5 + dnll);
                fprintf(f, "%d\t%d\t%d\t%d\tf16#2\t0\t0\t0\t1\t2.5\t2.5\t3\t1\n", depths[k], j, 1000 + 300 * j, i);
            }
    if (tail) fputs(tail, f);
    fclose(f);
}

/* The section for path into a malloc'd string (rc in *rc). */
static char *section(const char *path, int *rc, char *err, size_t errlen) {
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    *rc = report_passages_section(m, path, err, errlen);
    fclose(m);
    if (getenv("TEST_PASSAGES_SHOW")) fputs(buf, stdout);   /* the rendered section, for a reader */
    return buf;
}

int main(void) {
    char err[1024];
    int starts[8];

    /* ---- the plan ---- */
    int rc = passages_plan(10000, 1000, 32, 4096, 4, 256, starts, err, sizeof err);
    CHECK(rc == 0, "passages_plan: 4 x 256 after depth 1000 + fork 32 in 10000 tokens (rc %d: %s)", rc, err);
    /* S = 1032, A = 10000 - 1 - 1032 = 8967; starts S + floor(j (A - 256) / 3) */
    int want[4] = { 1032, 1032 + 8711 / 3, 1032 + 2 * 8711 / 3, 1032 + 8711 };
    int same = 1, apart = 1;
    for (int j = 0; j < 4; j++) same &= starts[j] == want[j];
    for (int j = 1; j < 4; j++) apart &= starts[j] - starts[j - 1] >= 256;
    CHECK(same, "evenly spaced from the deepest prefix + fork room: %d %d %d %d", starts[0], starts[1], starts[2], starts[3]);
    CHECK(apart && starts[0] >= 1032 && starts[3] + 256 <= 10000 - 1,
          "non-overlapping, beyond the fork room, the last passage's next token inside the document");
    rc = passages_plan(1032 + 1 + 1024, 1000, 32, 4096, 4, 256, starts, err, sizeof err);
    CHECK(rc == 0 && starts[0] == 1032 && starts[1] == 1288 && starts[3] == 1800,
          "exactly enough room: the passages are contiguous (%d %d %d)", starts[0], starts[1], starts[3]);
    rc = passages_plan(1032 + 1024, 1000, 32, 4096, 4, 256, starts, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "the document is too short for --passages 4 --passage-len 256") && !strchr(err, '\n'),
          "one token short: one clear error (%s)", err);
    rc = passages_plan(100000, 4000, 32, 4096, 4, 256, starts, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "does not fit after the deepest prefix"), "passages past the context: refused (%s)", err);
    rc = passages_plan(10000, 10, 0, 4096, 1, 16, starts, err, sizeof err);
    CHECK(rc == 0 && starts[0] == 10, "one passage: right after the deepest prefix (%d)", starts[0]);
    CHECK(passages_plan(10000, 10, 0, 4096, 0, 16, starts, err, sizeof err) == -1, "no passages: refused");
    int md = passages_default_max_depth(10000, 1 << 20, 32, 4, 256);
    CHECK(md == 10000 - 1 - 32 - 1024 && passages_plan(10000, md, 32, 1 << 20, 4, 256, starts, err, sizeof err) == 0,
          "the default deepest prefix leaves exactly the room the passages need (%d)", md);
    CHECK(passages_default_max_depth(100000, 4096, 32, 4, 256) == 4096 - 256, "... and the context's room");
    CHECK(passages_default_max_depth(500, 4096, 32, 4, 256) == 0, "... none left: 0");
    int32_t toks[3] = { 1, 5, 6 };
    CHECK(passages_base_depth(toks, 3, 1) == 1 && passages_base_depth(toks, 3, 2) == 0 &&
          passages_base_depth(toks, 3, -1) == 0, "base depth: 1 after the BOS, else 0");

    /* ---- the row ---- */
    {
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        stats_row r;
        memset(&r, 0, sizeof r);
        r.kl_arm_ref = 0.5;
        r.nll_arm = NAN;
        passages_tsv_row(m, 40, 2, 1234, 7, "int8", &r);
        CHECK(passages_tsv_row(m, 40, 2, 1234, 7, "bad name", &r) == -1, "a bad arm name is refused");
        fclose(m);
        CHECK(!strcmp(buf, "40\t2\t1234\t7\tint8\t0.5\t0\t0\t1\tnan\t0\t0\t0\n"), "passages.tsv row: %s", buf);
        free(buf);
    }

    /* ---- the verdict on hand-made files ---- */
    char dir[] = "/tmp/test_passages.XXXXXX", path[256];
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/passages.tsv", dir);
    int depths[4] = { 1, 100, 200, 300 };
    /* power laws in depth over the depths with context (100, 200, 300): KL ∝ d² and KL ∝ 1/d, so
     * the log-log fit's ratio over the span is exactly (300/100)² = 9 and 1/3; spike: KL high at
     * the first depth only, where the fit (0.48, by hand) and the two ends alone (0.50) differ */
    double grow[4] = { 0.001, 0.002, 0.008, 0.018 }, flat[4] = { 0.003, 0.003, 0.003, 0.003 },
           fall[4] = { 0.008, 0.006, 0.003, 0.002 }, spike[4] = { 0.001, 0.004, 0.002, 0.002 };

    write_tsv(path, depths, grow, 4, 8, 16, 0.01, NULL);
    char *s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "## Depth from passages") && strstr(s, "### int8"), "the section renders (rc %d)", rc);
    CHECK(s && strstr(s, "**grows with depth (×9.0 [") && strstr(s, "from depth 100 to depth 300") &&
              strstr(s, "over the 3 depths implies"),
          "KL ∝ depth²: \"grows with depth (×9.0 [lo, hi])\", the fit over the 3 depths with context");
    CHECK(s && strstr(s, "From the baseline (depth 1: the BOS token alone) to depth 300: ×18 ["),
          "... and the ratio from the baseline (BOS only), another regime, beside it");
    CHECK(s && strstr(s, "same 8 passages") && strstr(s, "bootstrap over the passages as units"),
          "... states the number of passages and that the CI is over passages");
    CHECK(s && strstr(s, "| 300 | 8 | 128 | 0.0") && strstr(s, "| +1.005 % |"),
          "... the depth table: passages, rows, mean KL, PPL change exp(0.01) - 1 = +1.005 %%");
    CHECK(s && strstr(s, "**identical to the reference**"), "an arm with KL 0 everywhere: identical");
    free(s);

    write_tsv(path, depths, flat, 4, 8, 16, 0.0, NULL);
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "**no detected change (×1.0 [1.0, 1.0])**"),
          "flat KL: \"no detected change (×1 [1, 1])\"");
    free(s);

    write_tsv(path, depths, fall, 4, 8, 16, 0.0, NULL);
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "**falls with depth (×0.33 ["), "KL ∝ 1/depth: \"falls with depth (×0.33 ...)\"");
    free(s);

    write_tsv(path, depths, spike, 4, 8, 16, 0.0, NULL);
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "(×0.48 [") && strstr(s, "The two end depths alone: ×0.50 ["),
          "a spike at the first depth: the fit (×0.48) uses every depth, the ends alone (×0.50) beside it");
    free(s);

    /* noisy but flat: the passages' own KL differs between depths, the means do not */
    {
        FILE *f = fopen(path, "w");
        fprintf(f, "%s\n", PASSAGES_HEADER);
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < 16; i++) {
                    double v = 0.003 * (k == 0 ? 1.0 : (j % 2 ? 1.2 : 0.8)) * (1 + 0.1 * (i % 3));
                    fprintf(f, "%d\t%d\t%d\t%d\tint8\t%.17g\t0\t0\t1\t2\t2\t3\t1\n", depths[k], j, 500 + 40 * j, i, v);
                }
        fclose(f);
        s = section(path, &rc, err, sizeof err);
        CHECK(rc == 0 && s && strstr(s, "**no detected change (×1.0 ["), "noisy flat KL: \"no detected change\"");
        free(s);
    }

    write_tsv(path, depths, grow, 4, 3, 16, 0.0, NULL);
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "fewer than 4 passages: the interval is not reliable"), "3 passages: said to be too few");
    free(s);

    write_tsv(path, depths, grow, 4, 8, 16, 0.0, "300\t0\t1000\t0\tint8\t0.5");
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 0 && s && strstr(s, "| 300 | 8 | 128 |"), "a torn last line is dropped");
    free(s);

    write_tsv(path, depths, grow, 4, 8, 16, 0.0, "300\t0\t1000\t0\tint8\tx\t0\t0\t1\t2\t2\t3\t1\n");
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "passages.tsv:") && strstr(err, "malformed row"), "a malformed row: an error naming "
          "the line (%s)", err);
    free(s);

    write_tsv(path, depths, grow, 4, 8, 16, 0.0, "300\t0\t1000\t0\tin|t8\t0.1\t0\t0\t1\t2\t2\t3\t1\n");
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == -1, "an arm name with '|' (it would break the table) is refused");
    free(s);

    char lnk[300];   /* a passages.tsv that is a symbolic link is refused, not followed */
    snprintf(lnk, sizeof lnk, "%s/linked.tsv", dir);
    write_tsv(path, depths, grow, 4, 8, 16, 0.0, NULL);
    CHECK(symlink(path, lnk) == 0, "symlink");
    s = section(lnk, &rc, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "symbolic link"), "a linked passages.tsv is refused (%s)", err);
    free(s);
    unlink(lnk);

    unlink(path);
    s = section(path, &rc, err, sizeof err);
    CHECK(rc == 1 && s && !s[0], "no passages.tsv: nothing written (rc %d)", rc);
    free(s);
    CHECK(report_passages_render(dir, err, sizeof err) == 0, "report_passages_render without passages.tsv: nothing to do");
    rmdir(dir);
    return check_done();
}
