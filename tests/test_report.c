/* test_report.c — builds small synthetic results folders in /tmp with the TSV writers, renders
 * them, and checks README.md, summary.json, the plots, determinism and error messages. */
#include "driver/report/report.h"
#include "driver/report/report_internal.h"   /* report_gp_str: escaping for gnuplot */
#include "tests/check.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define FORK_N 32
#define N_DEPTH 16

/* ---- helpers -------------------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    if (buf) buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static long file_size(const char *dir, const char *name) {
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static const char *META =
    "{\"tag\":\"synthetic\",\"date\":\"2025-01-02\",\"command\":\"strata-driver sweep --kv int8 "
    "--floor --repeat\",\"git\":\"abc1234\",\"engine\":\"strata 0.1\",\"machine\":\"test box\","
    "\"model\":{\"path\":\"models/tiny.gguf\",\"sha256\":\"00ff\",\"arch\":\"llama\",\"n_vocab\":512,"
    "\"n_ctx\":20000,\"n_layer\":5},\"document\":{\"path\":\"doc.txt\",\"n_tokens\":16400,"
    "\"description\":\"a test document\"},\"ref\":\"f16\",\"arms\":["
    "{\"name\":\"f16\",\"kv_k\":\"f16\",\"kv_v\":\"f16\",\"kv_bytes_per_token\":2560},"
    "{\"name\":\"int8\",\"kv_k\":\"int8\",\"kv_v\":\"int8\",\"kv_bytes_per_token\":1360},"
    "{\"name\":\"kq\",\"kv_k\":\"int8\",\"kv_v\":\"f16\",\"kv_bytes_per_token\":1960},"
    "{\"name\":\"f32\",\"kv_k\":\"f32\",\"kv_v\":\"f32\",\"kv_bytes_per_token\":5120},"
    "{\"name\":\"f16#2\",\"kv_k\":\"f16\",\"kv_v\":\"f16\",\"kv_bytes_per_token\":2560}],"
    "\"depths\":[1024,2048,3072,4096,5120,6144,7168,8192,9216,10240,11264,12288,13312,14336,"
    "15360,16384],\"fork_n\":32,\"per_position\":%s,\"wall_seconds\":12.5,\"warnings\":["
    "\"synthetic data\"]}\n";

/* Values of the synthetic sweep, shared by the writer and the assertions. */
static double int8_kl(int k) { return k == 14 ? 0.00026 : 1e-4 * (1.0 + k / 4.0); }
static double int8_js(int k) { return k == 14 ? 5.5e-05 : int8_kl(k) / 5.0; }
static int int8_same(int k) { return k % 5 != 3; }          /* k = 3, 8, 13 flip */
static int int8_fork(int k) { return k == 14 ? 22 : k % 4 == 0 ? FORK_N : 3 + k; } /* 0,4,8,12 identical */
static double floor_kl(int k) { return 2e-6 * (1 + k); }
static double kq_kl(int k) { return 3e-6 * (1 + k); }

/* Writes one depth row and its fork row through the public writers. */
static void put_depth(FILE *fd, FILE *ff, int depth, const char *arm, double kl, double js,
                      int same, int fork, int k) {
    stats_row r = {0};
    r.kl_arm_ref = kl;
    r.kl_ref_arm = kl * 1.1;
    r.js = js;
    r.top1_ref = 10 + k;
    r.top1_arm = same ? r.top1_ref : r.top1_ref + 1;
    r.nll_arm = 2.0 + 0.01 * k + kl;
    r.nll_ref = 2.0 + 0.01 * k;
    r.entropy_ref = 1.0 + 0.1 * k;
    r.gap_ref = 0.1 * (k % 7);
    r.gap_arm = r.gap_ref + 0.01;
    int cens = fork == FORK_N;
    report_tsv_depth_row(fd, depth, arm, &r, fork, cens, 0.25, 0.5);
    int32_t ta[FORK_N], tr[FORK_N];
    for (int i = 0; i < FORK_N; i++) tr[i] = ta[i] = 100 + i + k;
    if (!cens) ta[fork] += 1000;
    report_tsv_fork_row(ff, depth, arm, fork, cens, ta, FORK_N, tr, FORK_N);
}

/* Builds a results dir; repeat_bad: f16#2 differs at one depth; positions: write positions.tsv. */
static void build_dir(const char *dir, int repeat_bad, int positions) {
    char cmd[600], err[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return;
    char meta[4096];
    snprintf(meta, sizeof meta, META, positions ? "true" : "false");
    write_text(dir, "meta.json", meta);
    FILE *fd = report_tsv_open_depths(dir, err, sizeof err);
    FILE *ff = report_tsv_open_forks(dir, err, sizeof err);
    for (int k = 0; k < N_DEPTH; k++) {
        int depth = 1024 * (k + 1);
        put_depth(fd, ff, depth, "int8", int8_kl(k), int8_js(k), int8_same(k), int8_fork(k), k);
        put_depth(fd, ff, depth, "kq", kq_kl(k), kq_kl(k) / 4, 1, k < 8 ? FORK_N : 20, k);
        put_depth(fd, ff, depth, "f32", floor_kl(k) * 0.9, floor_kl(k) / 4, 1,
                  k % 2 ? FORK_N : 10 + k, k);
        int bad = repeat_bad && k == 6;
        put_depth(fd, ff, depth, "f16#2", bad ? 1e-7 : 0.0, bad ? 2e-8 : 0.0, 1,
                  bad ? 30 : FORK_N, k);
    }
    fclose(fd);
    fclose(ff);
    /* put_depth writes kl_ref_arm = 1.1 * kl: the f32 arm's floor is 0.99 * floor_kl(k) */
    if (positions) {
        FILE *fp = report_tsv_open_positions(dir, err, sizeof err);
        for (int p = 0; p < 300; p++) {
            const char *arms[4] = {"int8", "kq", "f32", "f16#2"};
            for (int a = 0; a < 4; a++) {
                stats_row r = {0};
                r.kl_arm_ref = a == 3 ? 0.0 : (a == 2 ? 1e-6 : 1e-4) * (1.0 + (p * 37 % 11));
                r.kl_ref_arm = r.kl_arm_ref;
                r.js = r.kl_arm_ref / 4;
                r.top1_ref = p;
                r.top1_arm = (a == 0 && p % 50 == 7) ? p + 1 : p;
                r.nll_arm = 3.0 + r.kl_arm_ref;
                r.nll_ref = 3.0;
                r.entropy_ref = 0.5 + (p % 13) * 0.2;
                r.gap_ref = (p % 50 == 7) ? 0.05 : 1.0 + p % 3;
                report_tsv_position_row(fp, p, arms[a], &r);
            }
        }
        fclose(fp);
    }
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* The first "nan" or "inf" (any case) standing as a word of text, or NULL: tables never show them. */
static const char *nonfinite_word(const char *text) {
    for (const char *p = text; p && *p; p++) {
        if (strncasecmp(p, "nan", 3) && strncasecmp(p, "inf", 3)) continue;
        int before = p == text || !isalnum((unsigned char)p[-1]);
        int after = !isalnum((unsigned char)p[3]) || !strncasecmp(p, "infinity", 8);
        if (before && after) return p;
    }
    return NULL;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_formats(void) {
    char b[64];
    report_fmt_sig2(0.00026, b, sizeof b); CHECK(!strcmp(b, "0.00026"), "sig2 0.00026 -> %s", b);
    report_fmt_sig2(5.5e-05, b, sizeof b); CHECK(!strcmp(b, "5.5e-05"), "sig2 5.5e-05 -> %s", b);
    report_fmt_sig2(0.19, b, sizeof b); CHECK(!strcmp(b, "0.19"), "sig2 0.19 -> %s", b);
    report_fmt_sig2(1.13, b, sizeof b); CHECK(!strcmp(b, "1.1"), "sig2 1.13 -> %s", b);
    report_fmt_sig2(0.0, b, sizeof b); CHECK(!strcmp(b, "0"), "sig2 0 -> %s", b);
    report_fmt_sig2(1234, b, sizeof b); CHECK(!strcmp(b, "1.2e+03"), "sig2 1234 -> %s", b);
    report_fmt_sig2(0.000099996, b, sizeof b); CHECK(!strcmp(b, "0.00010"), "sig2 rounds up a decade: %s", b);
    report_fmt_sig2(NAN, b, sizeof b); CHECK(!strcmp(b, "—"), "sig2 NaN (does not apply) -> %s", b);
    report_fmt_sig2(INFINITY, b, sizeof b); CHECK(!strcmp(b, "∞"), "sig2 +inf -> %s", b);
    report_fmt_sig2(-INFINITY, b, sizeof b); CHECK(!strcmp(b, "−∞"), "sig2 -inf -> %s", b);
    report_fmt_depth(9999, b, sizeof b); CHECK(!strcmp(b, "9999"), "depth 9999 -> %s", b);
    report_fmt_depth(10000, b, sizeof b); CHECK(!strcmp(b, "10K"), "depth 10000 -> %s", b);
    report_fmt_depth(15360, b, sizeof b); CHECK(!strcmp(b, "15K"), "depth 15360 -> %s", b);
    report_fmt_depth(32512, b, sizeof b); CHECK(!strcmp(b, "32K"), "depth 32512 -> %s (rounded down, not 33K)", b);
}

static void test_writers(void) {
    const char *dir = "/tmp/strata_test_report_w";
    char err[256], cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    CHECK(system(cmd) == 0, "mkdir");
    FILE *f = report_tsv_open_depths(dir, err, sizeof err);
    stats_row r = {0};
    r.kl_arm_ref = 0.1;
    r.nll_arm = r.nll_ref = NAN;
    r.top1_arm = 3; r.top1_ref = 4;
    CHECK(report_tsv_depth_row(f, 7, "int8", &r, 32, 1, 1.0, 2.0) == 0, "depth row written");
    CHECK(report_tsv_depth_row(f, 7, "bad name", &r, 32, 1, 1.0, 2.0) == -1, "arm name with a space refused");
    fclose(f);
    char path[256];
    snprintf(path, sizeof path, "%s/depths.tsv", dir);
    char *t = slurp(path, NULL);
    CHECK(contains(t, REPORT_DEPTHS_HEADER "\n"), "depths.tsv header line");
    CHECK(contains(t, "\n7\tint8\t0.10000000000000001\t0\t0\t0\t3\t4\tnan\tnan\t0\t0\t0\t32\t1\tnan\tnan\n"),
          "depth row: %%.17g, same_top1 derived, nan for unknown NLL and censored fork gaps");
    free(t);
}

static void test_render(void) {
    const char *dir = "/tmp/strata_test_report_a";
    char err[512] = "";
    build_dir(dir, 1, 1);
    int rc = report_render(dir, err, sizeof err);
    CHECK(rc == 0, "render with positions: rc 0 (%s)", err);
    char path[512];
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *md = slurp(path, NULL);
    CHECK(md != NULL, "README.md written");
    CHECK(contains(md, "| Depth | KL(int8‖fp16) | JS | Same top-1 | Fork token (of 32) |"),
          "table header in the original format");
    CHECK(contains(md, "| 15K | 0.00026 | 5.5e-05 | yes | 22 |"), "the 15K row as in the original table");
    CHECK(contains(md, "| 1024 | 0.00010 | 2.0e-05 | yes | identical |"), "depth < 10,000 exact; censored fork 'identical'");
    CHECK(contains(md, "| 9216 | 0.00030 | 6.0e-05 | no | identical |"), "a flipped depth: 'no'");
    CHECK(contains(md, "KL(K:int8,V:f16‖fp16)"), "K/V split label");
    CHECK(contains(md, "WARNING — REPEATED ARM NOT BIT-IDENTICAL: `f16#2` does not reproduce `f16`"),
          "loud warning for the non-identical repeat");
    CHECK(md && strstr(md, "WARNING") < strstr(md, "## Setup"), "warning at the top, before Setup");
    CHECK(contains(md, "| 3072 | 0.00015 | 3.0e-05 | yes | 5 | 5.9e-06 | 2.020 / 2.020 | 0.250 / 0.500 |"),
          "fork index, noise floor = f32 arm's kl_ref_arm (1.1 * 0.9 * 6e-6), NLL, fork gaps");
    CHECK(contains(md, "`strata-driver sweep --kv int8 --floor --repeat`") ||
          contains(md, "strata-driver sweep --kv int8 --floor --repeat\n```"), "reproduce command");
    CHECK(contains(md, "![KL and JS vs depth"), "KL plot embedded");
    CHECK(contains(md, "(plots/positions_kl.png)"), "positions plot embedded");
    CHECK(contains(md, "## What the numbers support"), "claims section");
    /* kq: mean KL 3e-6 * 8.5 = 2.55e-5, floor mean 0.99 * 2e-6 * 8.5 = 1.68e-5, limit 10x = 1.7e-4 */
    CHECK(contains(md, "| K:int8,V:f16 is distinguishable in distribution from fp16 over the depths (the CI of "
                       "mean KL lies above 10x the noise floor) | **not supported** |"),
          "kq within 10x floor over depths: distinguishable not supported");
    /* int8: 0.00026 at 15K is above 10 x 2.97e-5? no: 2.6e-4 < 2.97e-4, but 1e-4 > 10 x 2e-6 at 1024 */
    CHECK(contains(md, "| int8 is above 10x the noise floor at every depth | **not supported** | above at 15 of "
                       "16 depths"), "int8 per-depth floor claim: not supported (15 of 16)");
    CHECK(contains(md, "| KL(int8‖fp16) grows with depth (deepest depth bin / first) | **not measured** |"),
          "int8 trend: not estimated from positions inside one depth bin");
    CHECK(contains(md, "- synthetic data"), "sweep warnings listed");
    CHECK(contains(md, "**not supported** | KL or JS != 0 or top-1 differs at 1 of 16 depths (largest KL "
                       "1e-07); greedy streams differ at 1 depths (first at depth 7168, token 30); "
                       "0 of 300 positions differ |"), "repeat claim not supported, with the evidence");

    /* summary.json */
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_error_t je;
    json_t *s = json_load_file(path, 0, &je);
    CHECK(s != NULL, "summary.json parses (%s)", s ? "" : je.text);
    json_t *arms = json_object_get(s, "arms");
    CHECK(json_array_size(arms) == 5, "summary: 5 arms");
    json_t *int8 = json_array_get(arms, 1), *rep = json_array_get(arms, 4);
    CHECK(!strcmp(json_string_value(json_object_get(int8, "role")), "test"), "int8 role test");
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(arms, 3), "role")), "floor"), "f32 role floor");
    CHECK(json_is_false(json_object_get(json_object_get(rep, "repeat_check"), "bit_identical")),
          "summary: repeat not bit-identical");
    json_t *od = json_object_get(int8, "over_depths");
    double mean = 0;
    int same = 0, cens = 0;
    for (int k = 0; k < N_DEPTH; k++) { mean += int8_kl(k); same += int8_same(k); cens += int8_fork(k) == FORK_N; }
    mean /= N_DEPTH;
    double got = json_real_value(json_object_get(json_object_get(od, "kl_arm_ref_mean"), "est"));
    CHECK(fabs(got - mean) < 1e-11 * mean, "summary: mean KL over depths %.12g = %.12g", got, mean);
    got = json_real_value(json_object_get(json_object_get(od, "top1_agreement"), "est"));
    CHECK(fabs(got - same / 16.0) < 1e-12, "summary: top-1 agreement %g = 13/16", got);
    json_t *fs = json_object_get(od, "fork_survival");
    CHECK(json_integer_value(json_object_get(fs, "n_identical")) == cens, "summary: %d identical forks", cens);
    json_t *op = json_object_get(int8, "over_positions");
    CHECK(json_integer_value(json_object_get(op, "n")) == 300, "summary: 300 positions");
    got = json_real_value(json_object_get(json_object_get(op, "top1_agreement"), "est"));
    CHECK(fabs(got - 294.0 / 300) < 1e-12, "summary: position agreement 294/300 (%g)", got);
    json_t *nt = json_object_get(op, "near_tie");
    CHECK(json_real_value(json_object_get(nt, "share_flips_near")) == 1.0, "summary: all position flips at near ties");
    CHECK(json_array_size(json_object_get(s, "claims")) > 0, "summary: claims present");
    json_decref(s);

    /* plots */
    static const char *const plots[4] = {"kl_depth", "positions_kl", "kl_entropy", "fork_survival"};
    for (int p = 0; p < 4; p++) {
        char n1[64], n2[64], n3[64];
        snprintf(n1, sizeof n1, "plots/%s.png", plots[p]);
        snprintf(n2, sizeof n2, "plots/%s.svg", plots[p]);
        snprintf(n3, sizeof n3, "plots/%s.gp", plots[p]);
        CHECK(file_size(dir, n1) > 1000 && file_size(dir, n2) > 1000 && file_size(dir, n3) > 0,
              "%s: PNG, SVG and script non-empty", plots[p]);
    }

    /* determinism */
    size_t l1, l2, s1, s2;
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *md1 = slurp(path, &l1);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    char *js1 = slurp(path, &s1);
    CHECK(report_render(dir, err, sizeof err) == 0, "re-render rc 0");
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *md2 = slurp(path, &l2);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    char *js2 = slurp(path, &s2);
    CHECK(md1 && md2 && l1 == l2 && !memcmp(md1, md2, l1), "re-render: identical README.md");
    CHECK(js1 && js2 && s1 == s2 && !memcmp(js1, js2, s1), "re-render: identical summary.json");
    free(md); free(md1); free(md2); free(js1); free(js2);
}

static void test_no_positions_identical_repeat(void) {
    const char *dir = "/tmp/strata_test_report_b";
    char err[512] = "", path[512];
    build_dir(dir, 0, 0);
    CHECK(report_render(dir, err, sizeof err) == 0, "render without positions: rc 0 (%s)", err);
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *md = slurp(path, NULL);
    CHECK(!contains(md, "WARNING"), "identical repeat: no warning");
    CHECK(contains(md, "| f16#2 | f16 | **bit-identical**"), "repeat check says bit-identical");
    CHECK(contains(md, "Per-position metrics | not measured"), "setup: positions not measured");
    CHECK(contains(md, "over the positions (the CI of mean KL lies above 10x the noise floor) | **not measured**"),
          "positions claim not measured");
    CHECK(file_size(dir, "plots/positions_kl.png") < 0, "no positions plot");
    CHECK(file_size(dir, "plots/kl_depth.png") > 1000, "KL plot present");
    free(md);

    /* compare the two dirs */
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    int rc = report_compare("/tmp/strata_test_report_a", dir, o, err, sizeof err);
    fclose(o);
    CHECK(rc == 0, "compare rc 0 (%s)", err);
    CHECK(contains(buf, "# strata comparison: synthetic vs synthetic"), "compare title");
    CHECK(contains(buf, "| Per-position metrics | measured | not measured | **differs** |"), "compare: setup differences");
    CHECK(contains(buf, "| 15K | 0.00026 | 0.00026 | 1.0 | 22 | 22 |"), "compare: depth rows side by side");
    CHECK(contains(buf, "| Repeat check | NOT identical | bit-identical |"), "compare: repeat status");
    CHECK(contains(buf, "| Mean noise floor over depths | — | — |"),
          "compare: the f32 arm's noise floor (against itself) does not apply: —");
    const char *nf = nonfinite_word(buf);
    CHECK(!nf, "compare: no nan or inf anywhere (%.40s)", nf ? nf : "");
    CHECK(contains(buf, "| Complete | yes | yes | same |"), "compare: both complete");
    free(buf);
    /* every README this test renders (with and without positions) */
    const char *dirs[] = { "/tmp/strata_test_report_a", dir };
    for (int k = 0; k < 2; k++) {
        char p[512];
        snprintf(p, sizeof p, "%s/README.md", dirs[k]);
        char *m = slurp(p, NULL);
        nf = nonfinite_word(m);
        CHECK(m && !nf, "%s/README.md: no nan or inf in any table (%.40s)", dirs[k], nf ? nf : "");
        free(m);
    }
}

/* A repeat of a non-reference arm (int8#2 of int8) is compared row by row with its base. */
static void test_repeat_of_test_arm(void) {
    const char *meta =
        "{\"tag\":\"rep\",\"ref\":\"f16\",\"fork_n\":32,\"arms\":["
        "{\"name\":\"f16\",\"kv_k\":\"f16\",\"kv_v\":\"f16\"},"
        "{\"name\":\"int8\",\"kv_k\":\"int8\",\"kv_v\":\"int8\"},"
        "{\"name\":\"int8#2\",\"kv_k\":\"int8\",\"kv_v\":\"int8\"}]}";
    const char *dir = "/tmp/strata_test_report_d";
    char err[512] = "", path[512];
    for (int bad = 0; bad < 2; bad++) {
        build_dir(dir, 0, 0);
        write_text(dir, "meta.json", meta);
        FILE *fd = report_tsv_open_depths(dir, err, sizeof err);
        FILE *ff = report_tsv_open_forks(dir, err, sizeof err);
        for (int k = 0; k < 4; k++) {
            put_depth(fd, ff, 100 * (k + 1), "int8", int8_kl(k), int8_js(k), 1, int8_fork(k), k);
            double kl = int8_kl(k) * (bad && k == 2 ? 1.0000001 : 1.0);
            put_depth(fd, ff, 100 * (k + 1), "int8#2", kl, int8_js(k), 1, int8_fork(k), k);
        }
        fclose(fd);
        fclose(ff);
        CHECK(report_render(dir, err, sizeof err) == 0, "repeat of int8 (bad=%d): rc 0 (%s)", bad, err);
        snprintf(path, sizeof path, "%s/README.md", dir);
        char *md = slurp(path, NULL);
        if (bad)
            CHECK(contains(md, "WARNING — REPEATED ARM NOT BIT-IDENTICAL: `int8#2` does not reproduce `int8`") &&
                  contains(md, "metrics differ from int8 at 1 of 4 depths"), "int8#2 differing at one depth: loud warning");
        else
            CHECK(!contains(md, "WARNING") && contains(md, "| int8#2 | int8 | **bit-identical**") &&
                  contains(md, "### int8#2 (arm int8#2)"), "int8#2 equal to int8: bit-identical, labelled int8#2");
        CHECK(contains(md, "| 100 | 0.00010 |"), "small depths printed exactly");
        free(md);
    }
}

static void test_errors(void) {
    const char *dir = "/tmp/strata_test_report_c";
    char err[512] = "", path[512];
    build_dir(dir, 0, 0);
    /* corrupt the kl_arm_ref of data line 4 (file line 5) */
    snprintf(path, sizeof path, "%s/depths.tsv", dir);
    char *t = slurp(path, NULL);
    char *line = t;
    for (int i = 0; i < 4; i++) line = strchr(line, '\n') + 1;
    char *tab = strchr(strchr(line, '\t') + 1, '\t') + 1;  /* third field */
    memcpy(tab, "x", 1);
    FILE *f = fopen(path, "w");
    fputs(t, f);
    fclose(f);
    free(t);
    CHECK(report_render(dir, err, sizeof err) == -1, "malformed number -> -1");
    CHECK(contains(err, "depths.tsv:5:") && contains(err, "kl_arm_ref"), "error names file, line and column: %s", err);

    build_dir(dir, 0, 0);
    f = fopen(path, "a");
    fputs("5\tint8\t0.1\n", f);
    fclose(f);
    CHECK(report_render(dir, err, sizeof err) == -1 && contains(err, "depths.tsv:66:") &&
          contains(err, "expected 17"), "short line -> field count error: %s", err);

    build_dir(dir, 0, 0);
    f = fopen(path, "a");
    stats_row r = {0};
    report_tsv_depth_row(f, 1024, "q4_0", &r, 32, 1, NAN, NAN);
    fclose(f);
    CHECK(report_render(dir, err, sizeof err) == -1 && contains(err, "arm \"q4_0\" is not in meta.json"),
          "unknown arm -> error: %s", err);

    build_dir(dir, 0, 0);
    write_text(dir, "meta.json", "{\"ref\":\"f16\",\"arms\":[]}");
    CHECK(report_render(dir, err, sizeof err) == -1 && contains(err, "fork_n"), "bad meta -> error: %s", err);
    write_text(dir, "meta.json", "{\"ref\":");
    CHECK(report_render(dir, err, sizeof err) == -1 && contains(err, "meta.json:1"), "invalid JSON -> error with line: %s", err);
}


/* ---- incomplete folders: a crash, a full disk, a hand-trimmed folder ------------------------ */

static json_t *load_summary(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    return json_load_file(path, 0, NULL);
}

static void append_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "a");
    fputs(text, f);
    fclose(f);
}

/* A folder of 6 depths 100..600 (arms f16 ref, int8, f32), positions 0..599 for both arms; with
 * depths_written < 6 only the first depths get depth/fork rows, positions stay complete. */
static void build_small(const char *dir, int depths_written, const char *status_json) {
    char cmd[600], err[256], meta[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return;
    snprintf(meta, sizeof meta,
             "{\"tag\":\"small\",\"ref\":\"f16\",\"fork_n\":32,\"per_position\":true,\"arms\":["
             "{\"name\":\"f16\",\"kv_k\":\"f16\",\"kv_v\":\"f16\"},"
             "{\"name\":\"int8\",\"kv_k\":\"int8\",\"kv_v\":\"int8\"},"
             "{\"name\":\"f32\",\"kv_k\":\"f32\",\"kv_v\":\"f32\"}],"
             "\"depths\":[100,200,300,400,500,600]%s}\n", status_json);
    write_text(dir, "meta.json", meta);
    FILE *fd = report_tsv_open_depths(dir, err, sizeof err);
    FILE *ff = report_tsv_open_forks(dir, err, sizeof err);
    for (int k = 0; k < depths_written; k++) {
        put_depth(fd, ff, 100 * (k + 1), "int8", int8_kl(k), int8_js(k), 1, int8_fork(k), k);
        put_depth(fd, ff, 100 * (k + 1), "f32", floor_kl(k), floor_kl(k) / 4, 1, FORK_N, k);
    }
    fclose(fd);
    fclose(ff);
    FILE *fp = report_tsv_open_positions(dir, err, sizeof err);
    for (int p = 0; p < 600; p++)
        for (int a = 0; a < 2; a++) {
            stats_row r = {0};
            r.kl_arm_ref = r.kl_ref_arm = (a ? 1e-6 : 1e-4) * (1 + p % 7);
            r.js = r.kl_arm_ref / 4;
            r.top1_arm = r.top1_ref = 5;
            r.nll_arm = r.nll_ref = 2.0;
            r.entropy_ref = 1.0;
            r.gap_ref = 1.0;
            report_tsv_position_row(fp, p, a ? "f32" : "int8", &r);
        }
    fclose(fp);
}

static long over_positions_n(json_t *s, int arm) {
    json_t *a = json_array_get(json_object_get(s, "arms"), (size_t)arm);
    return (long)json_integer_value(json_object_get(json_object_get(a, "over_positions"), "n"));
}

static void test_incomplete(void) {
    const char *dir = "/tmp/strata_test_report_e";
    char err[512] = "", path[512];
    snprintf(path, sizeof path, "%s/README.md", dir);

    /* a complete folder: no banner, summary says complete */
    build_small(dir, 6, ",\"status\":\"complete\",\"complete\":true");
    CHECK(report_render(dir, err, sizeof err) == 0, "complete small folder renders (%s)", err);
    char *md = slurp(path, NULL);
    json_t *s = load_summary(dir);
    CHECK(!contains(md, "INCOMPLETE"), "complete folder: no INCOMPLETE banner");
    CHECK(json_is_true(json_object_get(s, "complete")) && over_positions_n(s, 1) == 600,
          "complete folder: summary complete, 600 positions");
    free(md);
    json_decref(s);

    /* a driver killed mid-write: positions.tsv ends in a torn line */
    build_small(dir, 6, ",\"status\":\"running\",\"complete\":false");
    append_text(dir, "positions.tsv", "600\tint8\t0.000123\t0.0001");
    err[0] = 0;
    int rc = report_render(dir, err, sizeof err);
    CHECK(rc == 0, "positions.tsv ending in a torn line renders (%s)", err);
    md = slurp(path, NULL);
    CHECK(contains(md, "INCOMPLETE RUN") && contains(md, "positions.tsv ends in an incomplete line"),
          "the torn line is dropped and the README says so");
    CHECK(contains(md, "meta.json says the sweep is still \"running\""), "status running: the banner says so");
    CHECK(md && strstr(md, "INCOMPLETE RUN") < strstr(md, "## Setup"), "the banner is at the top");
    s = load_summary(dir);
    CHECK(json_is_false(json_object_get(s, "complete")) && over_positions_n(s, 1) == 600,
          "summary: complete false, the 600 whole position rows kept");
    free(md);
    json_decref(s);

    /* depths.tsv torn too, and a depth row without its forks.tsv row (killed between the writes) */
    build_small(dir, 6, "");
    append_text(dir, "depths.tsv", "700\tint8\t0.1");
    err[0] = 0;
    CHECK(report_render(dir, err, sizeof err) == 0, "depths.tsv ending in a torn line renders (%s)", err);
    build_small(dir, 5, "");
    {
        stats_row r = {0};
        char dp[512];
        snprintf(dp, sizeof dp, "%s/depths.tsv", dir);
        FILE *f = fopen(dp, "a");
        report_tsv_depth_row(f, 600, "int8", &r, 32, 1, NAN, NAN);
        fclose(f);
    }
    err[0] = 0;
    rc = report_render(dir, err, sizeof err);
    CHECK(rc == 0, "a depth row whose forks.tsv row is missing: renders without that depth (%s)", err);
    s = load_summary(dir);
    json_t *int8 = json_array_get(json_object_get(s, "arms"), 1);
    CHECK(json_array_size(json_object_get(int8, "per_depth")) == 5 && json_is_false(json_object_get(s, "complete")),
          "summary: 5 depths, complete false");
    json_decref(s);

    /* a hand-trimmed folder: 4 of 6 depths, positions up to 599 -> positions >= 400 are dropped */
    build_small(dir, 4, ",\"status\":\"complete\",\"complete\":true");
    err[0] = 0;
    CHECK(report_render(dir, err, sizeof err) == 0, "trimmed folder renders (%s)", err);
    md = slurp(path, NULL);
    s = load_summary(dir);
    CHECK(contains(md, "INCOMPLETE RUN — 4 of 6 depths measured"), "trimmed folder: banner with 4 of 6 depths");
    CHECK(over_positions_n(s, 1) == 400 && over_positions_n(s, 2) == 400,
          "trimmed folder: positions past the last complete depth (400) are not used (%ld, %ld)",
          over_positions_n(s, 1), over_positions_n(s, 2));
    CHECK(json_integer_value(json_object_get(s, "depths_measured")) == 4 &&
          json_integer_value(json_object_get(s, "depths_planned")) == 6, "summary: depths measured 4 of planned 6");
    free(md);
    json_decref(s);

    /* an interrupted run: meta says so */
    build_small(dir, 3, ",\"status\":\"interrupted after 3 of 6 depths\",\"complete\":false");
    err[0] = 0;
    CHECK(report_render(dir, err, sizeof err) == 0, "interrupted folder renders (%s)", err);
    md = slurp(path, NULL);
    CHECK(contains(md, "INCOMPLETE RUN — 3 of 6 depths measured") && contains(md, "interrupted after 3 of 6 depths"),
          "interrupted folder: banner with the recorded status");
    free(md);
}

/* Strings from a results folder on their way into a gnuplot script, and the TSV writers with a link
 * planted at their file (issue 22 F1, F8). */
static void test_hostile(void) {
    char b[256];
    report_gp_str(b, sizeof b, "KL and JS vs depth (smollm2-135m-q4_1 ‖ f16, 8K)");
    CHECK(!strcmp(b, "KL and JS vs depth (smollm2-135m-q4_1 ‖ f16, 8K)"), "gnuplot: an ordinary title is unchanged");
    report_gp_str(b, sizeof b, "x\" ; system(\"touch p\") ; \\ `id` \n'q' @s");
    CHECK(!strcmp(b, "x\\\" ; system(\\\"touch p\\\") ; \\\\ \\140id\\140 \\012'q' @s"),
          "gnuplot: quote, backslash, backtick and newline escaped: %s", b);
    report_gp_str(b, 6, "ab\"cd");
    CHECK(!strcmp(b, "ab\\\"c"), "gnuplot: cut before an escape, never inside one: %s", b);
    report_gp_str(b, 4, "ab`");
    CHECK(!strcmp(b, "ab"), "gnuplot: an octal escape that does not fit is left out: %s", b);

    const char *dir = "/tmp/strata_test_report_link";
    char cmd[300], err[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && echo keep > %s/victim && ln -s %s/victim %s/depths.tsv",
             dir, dir, dir, dir, dir);
    CHECK(system(cmd) == 0, "a folder with depths.tsv a link to another file");
    FILE *f = report_tsv_open_depths(dir, err, sizeof err);
    CHECK(!f && strstr(err, "depths.tsv"), "depths.tsv: a planted link is not written through: %s", f ? "opened" : err);
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "grep -qx keep %s/victim", dir);
    CHECK(system(cmd) == 0, "... and the file it points to is untouched");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    test_formats();
    test_hostile();
    test_writers();
    test_render();
    test_no_positions_identical_repeat();
    test_repeat_of_test_arm();
    test_errors();
    test_incomplete();
    return check_done();
}
