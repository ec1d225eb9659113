/* test_verdict.c — hand-made results folders whose verdicts are known, rendered, and the words of
 * "The answer first" and "Depth bins" checked (docs/DESIGN.md §4.15):
 *   grow  (int8): per-position KL that doubles from the first depth bin to the last -> "grows";
 *   flat  (q8_0): the same noise around a constant mean -> "no detected difference";
 *   near  (bf16): Δ NLL +0.0005 nats/token (PPL +0.05 %), no flip -> "within ±1 % PPL", "within ±1 pp";
 *   far   (q4_0): Δ NLL +0.05 nats/token (PPL +5.1 %), 10 % flips -> "higher (margin ±1 % PPL)", "lower";
 * margins from the command line and from meta.json; a depth-only folder (no trend from 8 single
 * positions); the fork cost over forked depths only (cross.tsv). */
#include "driver/report/report.h"
#include "driver/report/report_internal.h"
#include "proto/safeio.h"
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define FORK_N 8
#define N_BIN 8
#define BIN 100          /* positions per bin: depths 100, 200, ..., 800 */
#define N_POS (N_BIN * BIN)

/* The whole file at path (malloc'd, NUL-terminated; the caller frees), or NULL. */
static char *slurp(const char *path) {
    char *buf = NULL, e[256];
    size_t n = 0;
    return safeio_read_all(path, 0, (size_t)1 << 30, &buf, &n, e, sizeof e) ? NULL : buf;
}

static int file_nonempty(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    int c = f ? fgetc(f) : EOF;
    if (f) fclose(f);
    return c != EOF;
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* The README's block of one arm in "The answer first": from "**LABEL** (arm NAME" to the blank line. */
static char *arm_block(const char *md, const char *label, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "**%s** (arm %s", label, name);
    const char *p = md ? strstr(md, key) : NULL;
    if (!p) return NULL;
    const char *e = strstr(p, ":\n\n");
    e = e ? strstr(e + 3, "\n\n") : NULL;
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *out = malloc(n + 1);
    memcpy(out, p, n);
    out[n] = 0;
    return out;
}

/* A deterministic noise factor in [0.5, 1.5) (an LCG, so the folder is the same every run). */
static double noise(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return 0.5 + (double)((*s >> 8) & 0xffff) / 65536.0;
}

static const char *ARMS[] = {"grow", "flat", "near", "far", "f32"};
static const char *KV[] = {"int8", "q8_0", "bf16", "q4_0", "f32"};
#define N_ARMS 5

/* meta.json with the 8 depths; extra: more members (e.g. "\"margins\":{...},"). */
static void write_meta(const char *dir, int positions, const char *extra) {
    char path[512], arms[2048] = "{\"name\":\"f16\",\"kv_k\":\"f16\",\"kv_v\":\"f16\",\"kv_bytes_per_token\":2560}";
    for (int a = 0; a < N_ARMS; a++)
        snprintf(arms + strlen(arms), sizeof arms - strlen(arms),
                 ",{\"name\":\"%s\",\"kv_k\":\"%s\",\"kv_v\":\"%s\",\"kv_bytes_per_token\":%d}", ARMS[a], KV[a], KV[a],
                 1000 + 100 * a);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"tag\":\"verdict\",\"date\":\"2025-01-02\",\"command\":\"strata-driver sweep\",\"git\":\"abc\","
            "\"engine\":\"strata 0.1\",\"machine\":\"box\",\"model\":{\"path\":\"/home/someone/models/m.gguf\","
            "\"sha256\":\"0123456789abcdef\",\"arch\":\"llama\",\"n_vocab\":512,\"n_ctx\":4096,\"n_layer\":2},"
            "\"document\":{\"path\":\"texts/doc.txt\",\"n_tokens\":900,\"description\":\"d\"},\"ref\":\"f16\","
            "\"arms\":[%s],\"depths\":[100,200,300,400,500,600,700,800],\"fork_n\":%d,\"per_position\":%s,%s"
            "\"warnings\":[]}\n", arms, FORK_N, positions ? "true" : "false", extra ? extra : "");
    fclose(f);
}

/* The arm's values at position p (also used for the depth rows, at p = depth − 1). */
static void values(int a, int p, unsigned *s, stats_row *r) {
    memset(r, 0, sizeof *r);
    double n = noise(s);
    int bin = p / BIN;
    double kl = a == 0 ? 1e-3 * (1.0 + bin / (double)(N_BIN - 1)) * n   /* doubles: bin 0 -> bin 7 */
              : a == 4 ? 1e-6 * n : 1e-3 * n;
    r->kl_arm_ref = kl;
    r->kl_ref_arm = kl;
    r->js = kl / 4;
    r->top1_ref = p % 400;
    r->top1_arm = a == 3 && p % 10 == 3 ? r->top1_ref + 1 : r->top1_ref;   /* far: 10 % flips */
    r->nll_ref = 2.0 + 0.5 * noise(s);
    double d = a == 2 ? 0.0005 + 0.001 * (noise(s) - 1.0) : a == 3 ? 0.05 + 0.01 * (noise(s) - 1.0) : 0.0;
    r->nll_arm = r->nll_ref + d;
    r->entropy_ref = 1.0;
    r->gap_ref = p % 10 == 3 ? 0.1 : 2.0;    /* the far arm's flips are at near ties */
}

/* Builds dir; positions: write positions.tsv; cross: write cross.tsv (far forks at 4 of 8 depths). */
static void build(const char *dir, int positions, int cross, const char *extra) {
    char cmd[600], err[256], path[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return;
    write_meta(dir, positions, extra);
    FILE *fd = report_tsv_open_depths(dir, err, sizeof err), *ff = report_tsv_open_forks(dir, err, sizeof err);
    FILE *fx = NULL;
    if (cross) {
        snprintf(path, sizeof path, "%s/cross.tsv", dir);
        fx = fopen(path, "w");
        fprintf(fx, "%s\n", REPORT_CROSS_HEADER);
    }
    unsigned s = 7;
    for (int k = 1; k <= N_BIN; k++) {
        int depth = BIN * k;
        for (int a = 0; a < N_ARMS; a++) {
            stats_row r;
            values(a, depth - 1, &s, &r);
            int forks = a == 3 && k % 2 == 0, fork = forks ? 3 : FORK_N;
            int32_t ta[FORK_N], tr[FORK_N];
            for (int i = 0; i < FORK_N; i++) ta[i] = tr[i] = 5 + i;
            if (forks) ta[fork] = 99;
            report_tsv_depth_row(fd, depth, ARMS[a], &r, fork, !forks, forks ? 0.1 : NAN, forks ? 0.2 : NAN);
            report_tsv_fork_row(ff, depth, ARMS[a], fork, !forks, ta, FORK_N, tr, FORK_N);
            if (fx) {
                /* far's diverged text costs +0.2 nats/token under the reference where it forked */
                double ref = 1.5, arm = forks ? 1.7 + 0.01 * k : ref;
                fprintf(fx, "%d\t%s\t%d\t%d\t%d\t%.17g\t%.17g\tnan\tnan\t0\t0\n", depth, ARMS[a], fork, !forks,
                        FORK_N, arm, ref);
            }
        }
    }
    fclose(fd);
    fclose(ff);
    if (fx) fclose(fx);
    if (positions) {
        FILE *fp = report_tsv_open_positions(dir, err, sizeof err);
        for (int p = 0; p < N_POS; p++)
            for (int a = 0; a < N_ARMS; a++) {
                stats_row r;
                values(a, p, &s, &r);
                report_tsv_position_row(fp, p, ARMS[a], &r);
            }
        fclose(fp);
    }
}

static char *render(const char *dir, const report_render_opts *o) {
    char err[512] = "", path[512];
    int rc = report_render_opts_run(dir, o, err, sizeof err);
    CHECK(rc == 0, "%s renders (%s)", dir, err);
    snprintf(path, sizeof path, "%s/README.md", dir);
    return slurp(path);
}

static void test_positions(void) {
    const char *dir = "/tmp/strata_test_verdict_p";
    build(dir, 1, 0, NULL);
    char *md = render(dir, NULL);
    CHECK(md && !strncmp(md, "# strata results: verdict\n\n## The answer first\n", 47),
          "the README opens with the answer, right after the title");
    CHECK(contains(md, "on `m.gguf` (sha256 `0123456789ab…`)") && !contains(md, "/home/someone"),
          "the model by file name and sha256, never the runner's path");
    CHECK(contains(md, "PPL ±1 %, top-1 agreement ±1 percentage points") && contains(md, "from the default"),
          "default margins written, with their source");
    char *g = arm_block(md, "int8", "grow"), *f = arm_block(md, "q8_0", "flat");
    char *n = arm_block(md, "bf16", "near"), *x = arm_block(md, "q4_0", "far");
    CHECK(g && contains(g, "**higher: KL grows with depth**"), "grow: KL doubling over the bins reads as growth");
    CHECK(g && contains(g, "ratio ×2") , "grow: ratio about 2 (%s)", g ? strstr(g, "ratio") : "");
    CHECK(f && contains(f, "**no detected difference**") && contains(f, "ratio ×1"),
          "flat: no detected difference with depth");
    CHECK(n && (contains(n, "**equivalent within ±1 % PPL**") || contains(n, "**higher, within ±1 % PPL**")),
          "near: PPL change within the 1 %% margin");
    CHECK(n && contains(n, "top-1 agreement 100.00 %") && contains(n, "within ±1 pp**"),
          "near: top-1 equivalent within ±1 pp");
    CHECK(x && contains(x, "**higher (margin ±1 % PPL)**"), "far: PPL +5 %% is higher, outside the margin");
    CHECK(x && contains(x, "**lower (margin ±1 pp)**"), "far: 10 %% flips is lower agreement, outside the margin");
    CHECK(x && contains(x, "top-1 flips among the 80 near ties (reference gap < 0.5): 80, 100.00%"),
          "far: flips among near ties counted, with the near-tie count");
    CHECK(x && contains(x, "**distinguishable in distribution**") && contains(x, "× the fp32 floor"),
          "far: KL 1000x the floor is distinguishable in distribution");
    CHECK(x && contains(x, "Ladder of the 4 other arms of this run: "), "ladder over the run's other arms");
    CHECK(contains(md, "## Depth bins") && contains(md, "| 700–799 | 100 |"), "depth-bin table, one row per bin");
    CHECK(contains(md, "![Mean KL per depth bin](plots/kl_bins.png)") && file_nonempty(dir, "plots/kl_bins.png") &&
          file_nonempty(dir, "plots/kl_bins.svg"), "the depth-bin plot with its bands, drawn and embedded");
    CHECK(contains(md, "`int8` here is strata's own format") && contains(md, "8.25 bits"), "int8 defined");
    CHECK(contains(md, "RoPE angles: not recorded in this folder's meta.json."),
          "RoPE angle mode: a folder that does not record it says so (no guess)");
    CHECK(!contains(md, "within 10x the noise floor)") && !contains(md, "flips happen mostly at near ties"),
          "the old 10x-floor 'indistinguishable' claim and the near-tie share headline are gone");
    /* Formats by size: paired differences with Holm, and the words */
    CHECK(contains(md, "| q8_0 | q8_0 / q8_0 | 1100 |") && contains(md, "**lower** than int8: "),
          "sizes: flat (1e-3) paired against grow (1.5e-3 on average): lower");
    CHECK(contains(md, "**no detected difference** from bf16: "), "sizes: far and near, the same mean KL: "
          "no detected difference");
    CHECK(contains(md, "**lower** than q4_0: ") && contains(md, "Holm over the 4 comparisons"),
          "sizes: the floor (1e-6) against far: lower, Holm over 4 comparisons");
    CHECK(!contains(md, "no gain"), "never 'no gain'");
    free(g); free(f); free(n); free(x); free(md);

    /* margins from the command line */
    report_render_opts o = {10.0, 20.0};
    md = render(dir, &o);
    x = arm_block(md, "q4_0", "far");
    CHECK(x && contains(x, "**higher, within ±10 % PPL**") && contains(x, "**lower, within ±20 pp**"),
          "--margin-ppl 10 --margin-top1 20: far is within both margins");
    CHECK(contains(md, "from the command line"), "margin source: the command line");
    free(x); free(md);

    /* summary.json carries the verdicts */
    char path[512];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_t *s = json_load_file(path, 0, NULL);
    json_t *v = json_object_get(json_object_get(json_object_get(s, "verdicts"), "arms"), "grow");
    CHECK(v && !strcmp(json_string_value(json_object_get(v, "depth_verdict")), "higher"),
          "summary: grow's depth verdict 'higher'");
    CHECK(json_array_size(json_object_get(v, "depth_bins")) == N_BIN, "summary: 8 depth bins");
    json_decref(s);
}

static void test_depths_only_meta_margin_fork(void) {
    const char *dir = "/tmp/strata_test_verdict_d";
    build(dir, 0, 1, "\"margins\":{\"ppl_pct\":50,\"top1_pp\":2},");
    char *md = render(dir, NULL);
    char *x = arm_block(md, "q4_0", "far");
    CHECK(contains(md, "a trend is not fitted to 8 single positions"), "depth rows only: no trend verdict");
    CHECK(!contains(md, "## Depth bins"), "depth rows only: no depth-bin table");
    CHECK(!file_nonempty(dir, "plots/kl_bins.png"), "depth rows only: no depth-bin plot");
    CHECK(contains(md, "PPL ±50 %") && contains(md, "from meta.json"), "margins from meta.json");
    CHECK(x && contains(x, "over the 4 of 8 depths where the greedy text forked"),
          "fork cost over the forked depths only (4 of 8)");
    CHECK(x && contains(x, "+0.250 [") && contains(x, "**higher, within ±0.405 nats/token**"),
          "fork cost: the forked mean +0.250 (not 0.125, diluted by the identical depths");
    /* the percentile interval of the 4 values, ±0.020, spread by t_{0.975,3}/z_{0.975} = 1.62 */
    CHECK(contains(md, "| q4_0 | 8 | 4 | +0.250 [+0.218, +0.283] | higher, within the margin | — | not measured |"),
          "cross table: Δ over the 4 forked depths, TOST words, no f32 scorer: not measured");
    CHECK(contains(md, "| q8_0 | 8 | 0 | — | nothing forked | — | nothing forked |"),
          "cross table: an arm that never forked");
    CHECK(contains(md, "against ±0.405 nats per token"), "cross table: the margin written (ln 1.5 from meta.json's 50 %%)");
    free(x); free(md);
}

/* meta.json's model gains n_layer nl and, when w >= 0, window w and layers_full_context full (as a
 * worker's handshake records them); the folder re-rendered; its README (malloc'd) returned. */
static char *render_window(const char *dir, int nl, int w, int full) {
    char path[512];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_t *m = json_load_file(path, 0, NULL), *model = json_object_get(m, "model");
    json_object_set_new(model, "n_layer", json_integer(nl));
    json_object_del(model, "window");
    json_object_del(model, "layers_full_context");
    if (w >= 0) {
        json_object_set_new(model, "window", json_integer(w));
        json_object_set_new(model, "layers_full_context", json_integer(full));
    }
    CHECK(json_dump_file(m, path, JSON_INDENT(2)) == 0, "meta.json with window %d, %d of %d layers full written", w,
          full, nl);
    json_decref(m);
    return render(dir, NULL);
}

/* The sliding window in "Not supported by this run" (depths 100..800 here). */
static void test_window(void) {
    const char *dir = "/tmp/strata_test_verdict_w";
    build(dir, 1, 0, NULL);
    char *md = render_window(dir, 18, 512, 3), path[512];
    CHECK(contains(md, "sampled (not greedy) continuations. Sliding window: 15 of the 18 layers read only the last "
                       "512 positions of the KV cache, so positions more than 512 tokens back are read by 3 layers "
                       "alone: a depth effect past 512 tokens is a property of those 3 layers' reads. `int8` here"),
          "window 512, 3 of 18 layers full (Gemma 3 270M): one sentence after the first of 'Not supported'");
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_t *s = json_load_file(path, 0, NULL);
    json_t *sw = json_object_get(json_object_get(s, "verdicts"), "sliding_window");
    CHECK(json_integer_value(json_object_get(sw, "window")) == 512 &&
          json_integer_value(json_object_get(sw, "layers_full_context")) == 3 &&
          json_integer_value(json_object_get(sw, "n_layer")) == 18, "summary.json verdicts.sliding_window 512, 3, 18");
    json_decref(s);
    free(md);
    md = render_window(dir, 6, 32, 1);
    CHECK(contains(md, "Sliding window: 5 of the 6 layers read only the last 32 positions of the KV cache, so "
                       "positions more than 32 tokens back are read by 1 layer alone: a depth effect past 32 tokens "
                       "is a property of that layer's reads."), "window 32, 1 of 6 layers full: singular words");
    free(md);
    md = render_window(dir, 2, 16, 0);
    CHECK(contains(md, "Sliding window: 2 of the 2 layers read only the last 16 positions of the KV cache, so no "
                       "layer reads positions more than 16 tokens back: a depth effect past 16 tokens cannot come "
                       "from reading them."), "window 16, no layer full: no layer reads further back");
    free(md);
    md = render_window(dir, 2, 16, 1);
    CHECK(contains(md, "Sliding window: 1 of the 2 layers reads only the last 16 positions"),
          "window 16, 1 of 2 layers full (gpt-oss's pattern): '1 of the 2 layers reads'");
    free(md);
    md = render_window(dir, 18, 1024, 3);
    CHECK(contains(md, "Sliding window: 15 of the 18 layers read only the last 1024 positions of the KV cache, a "
                       "limit no depth of this run exceeds (deeper, positions more than 1024 tokens back would be "
                       "read by 3 layers alone)."), "window 1024 past the deepest depth (800): said as a limit not reached");
    free(md);
    static const int none[][3] = {{18, 0, 18}, {18, 512, 18}, {18, 512, 19}, {18, -1, 0}};
    static const char *const what[] = {"window 0 (no layer slides)", "window 512 with every layer full (invalid)",
                                       "19 of 18 layers full (invalid)", "no window keys (an older run)"};
    for (int i = 0; i < 4; i++) {
        md = render_window(dir, none[i][0], none[i][1], none[i][2]);
        snprintf(path, sizeof path, "%s/summary.json", dir);
        s = json_load_file(path, 0, NULL);
        CHECK(md && !contains(md, "Sliding window") && contains(md, "sampled (not greedy) continuations. `int8` here") &&
              !json_object_get(json_object_get(s, "verdicts"), "sliding_window"),
              "%s: no sliding-window sentence, nothing in summary.json", what[i]);
        json_decref(s);
        free(md);
    }
}

int main(void) {
    test_window();
    test_positions();
    test_depths_only_meta_margin_fork();
    return check_done();
}
