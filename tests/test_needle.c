/* test_needle.c — the pure parts of the needle bench (driver/needle/needle_prompt.c), its cells.tsv
 * rows, and the statistics it uses (McNemar's exact test and the Wilson interval, against cases
 * worked by hand):
 *   - the key generator: splitmix64's published first output, determinism, 7 digits, distinct keys
 *     and labels, the needles' spread, a pinned value (a change of generator changes every key);
 *   - haystack offsets land on line starts;
 *   - chat templates: ChatML (SmolLM2's template with its default system message), Gemma, none;
 *     the raw and chat texts exactly;
 *   - prompt assembly on synthetic token ids: the budget, the sentence-boundary back-up of the end
 *     and of every needle, the needle forms after a newline and after a full stop, several needles,
 *     the errors;
 *   - the answer's first digit run; escaping and unescaping generated text; cells.tsv round trip;
 *   - the retrieval test over units (driver/needle/needle_stats.c): the sign-flip test (McNemar's with one
 *     template, twins by enumeration), the grid's power, the Clopper–Pearson bound;
 *   - the haystacks of different trials: disjoint, deterministic, flagged when they cannot be. */
#include "driver/needle/needle.h"
#include "driver/stats.h"
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- keys ----------------------------------------------------------------------------------- */

static void test_keys(void) {
    uint64_t s = 0;
    CHECK(needle_splitmix64(&s) == 0xE220A8397B1DCDAFull, "splitmix64 from state 0 gives its published "
          "first output 0xE220A8397B1DCDAF");

    needle_keys a, b;
    CHECK(needle_cell_keys(1, 1024, 50, 0, 1, &a) == 0 && needle_cell_keys(1, 1024, 50, 0, 1, &b) == 0 &&
          a.key[0] == b.key[0], "the same cell gives the same key (%u)", a.key[0]);
    CHECK(a.key[0] == 2668074u, "pinned: seed 1, L 1024, p 50, t 0 -> 2668074 (got %u)", a.key[0]);
    CHECK(a.frac[0] == 0.5 && a.k == 1, "one needle at p/100");
    int differ = 0, in_range = 1;
    for (int t = 0; t < 50; t++) {
        needle_cell_keys(1, 1024, 50, t, 1, &b);
        differ += b.key[0] != a.key[0];
        in_range &= b.key[0] >= 1000000u && b.key[0] <= 9999999u;
    }
    CHECK(differ == 49, "other trials give other keys (%d of 49)", differ);
    CHECK(in_range, "keys have 7 digits");
    needle_cell_keys(2, 1024, 50, 0, 1, &b);
    CHECK(b.key[0] != a.key[0], "another seed gives another key");
    needle_cell_keys(1, 2048, 50, 0, 1, &b);
    CHECK(b.key[0] != a.key[0], "another length gives another key");

    needle_keys m;
    CHECK(needle_cell_keys(7, 4096, 25, 1, NEEDLE_MAX_KEYS, &m) == 0, "%d needles", NEEDLE_MAX_KEYS);
    int distinct = 1;
    for (int i = 0; i < m.k; i++)
        for (int j = 0; j < i; j++) distinct &= m.key[i] != m.key[j] && m.label[i] != m.label[j];
    CHECK(distinct, "keys and labels of one cell are distinct");
    needle_cell_keys(42, 8192, 100, 3, 4, &m);
    CHECK(m.frac[0] == 1.0 && m.frac[1] == 0.25 && m.frac[2] == 0.5 && m.frac[3] == 0.75,
          "4 needles, the asked one at 100%%: the others at 25, 50, 75%%");
    needle_cell_keys(42, 8192, 25, 3, 2, &m);
    CHECK(m.frac[0] == 0.25 && m.frac[1] == 0.75, "2 needles at 25%%: the other at 75%%");
    CHECK(needle_cell_keys(1, 1024, 101, 0, 1, &m) == -1 && needle_cell_keys(1, 1024, 50, 0, 0, &m) == -1 &&
          needle_cell_keys(1, 1024, 50, 0, NEEDLE_MAX_KEYS + 1, &m) == -1, "bad p or k is refused");

    const char *text = "first line\nsecond line\nthird line is longer\nfourth\nfifth line here\n";
    size_t n = strlen(text);
    int at_line = 1;
    for (int t = 0; t < 40; t++) {
        size_t off = needle_hay_offset(9, t, text, n, 10);
        at_line &= off < n && (off == 0 || text[off - 1] == '\n');
    }
    CHECK(at_line, "haystack offsets are line starts inside the text");
    CHECK(needle_hay_offset(9, 3, text, n, 10) == needle_hay_offset(9, 3, text, n, 10), "offsets are deterministic");
    CHECK(needle_hay_offset(9, 3, text, n, n) == 0, "a text no longer than needed starts at 0");
}

/* ---- templates ------------------------------------------------------------------------------ */

static void test_templates(void) {
    /* SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF */
    const char *smol =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
        "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
        "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
        "{% endif %}";
    char sys[256];
    CHECK(needle_chat_detect(smol, strlen(smol), sys, sizeof sys) == NEEDLE_CHAT_CHATML, "SmolLM2: ChatML");
    CHECK(!strcmp(sys, "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
          "SmolLM2: its default system message (got '%s')", sys);
    const char *esc = "{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}";
    needle_chat_detect(esc, strlen(esc), sys, sizeof sys);
    CHECK(!strcmp(sys, "Be brief."), "a system message written with \\n escapes (got '%s')", sys);
    const char *qwen = "{{'<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n'}}";
    CHECK(needle_chat_detect(qwen, strlen(qwen), sys, sizeof sys) == NEEDLE_CHAT_CHATML && sys[0] == 0,
          "ChatML whose system message is not a literal: no default system message");
    const char *gemma = "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' }}";
    CHECK(needle_chat_detect(gemma, strlen(gemma), sys, sizeof sys) == NEEDLE_CHAT_GEMMA, "Gemma");
    CHECK(needle_chat_detect("{{ messages }}", 14, sys, sizeof sys) == NEEDLE_CHAT_NONE, "an unknown template");
    CHECK(needle_chat_detect(NULL, 0, sys, sizeof sys) == NEEDLE_CHAT_NONE, "no template");

    needle_keys k;
    needle_texts t;
    needle_cell_keys(1, 1024, 50, 0, 1, &k);
    CHECK(needle_texts_build(NEEDLE_CHAT_NONE, NULL, &k, &t) == 0, "raw texts");
    CHECK(!strcmp(t.head, "") && !strcmp(t.tail, "\nWhat is the special magic number mentioned in the text "
          "above? The special magic number is"), "raw: no head; the question and the answer prefix");
    CHECK(!strcmp(t.needle[0], "The special magic number is 2668074.") && !strcmp(t.key_text, "2668074"),
          "raw: the needle sentence and the key");
    needle_texts_build(NEEDLE_CHAT_CHATML, "SYS", &k, &t);
    CHECK(!strcmp(t.head, "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\n"), "ChatML head with a system message");
    CHECK(!strcmp(t.tail, "\nWhat is the special magic number mentioned in the text above?<|im_end|>\n"
          "<|im_start|>assistant\nThe special magic number is"), "ChatML tail opens the assistant turn");
    needle_texts_build(NEEDLE_CHAT_CHATML, "", &k, &t);
    CHECK(!strcmp(t.head, "<|im_start|>user\n"), "ChatML head without a system message");
    needle_texts_build(NEEDLE_CHAT_GEMMA, NULL, &k, &t);
    CHECK(!strcmp(t.head, "<start_of_turn>user\n") && !strcmp(t.tail, "\nWhat is the special magic number "
          "mentioned in the text above?<end_of_turn>\n<start_of_turn>model\nThe special magic number is"),
          "Gemma head and tail");
    needle_cell_keys(1, 1024, 50, 0, 3, &k);
    needle_texts_build(NEEDLE_CHAT_NONE, NULL, &k, &t);
    char want[256];
    snprintf(want, sizeof want, "The special magic number for %s is %u.", needle_label_name(k.label[1]), k.key[1]);
    CHECK(!strcmp(t.needle[1], want), "multi-key needle: '%s'", t.needle[1]);
    snprintf(want, sizeof want, "\nWhat is the special magic number for %s mentioned in the text above? The "
             "special magic number for %s is", needle_label_name(k.label[0]), needle_label_name(k.label[0]));
    CHECK(!strcmp(t.tail, want), "multi-key question asks for needle 0's label");
}

/* ---- assembly -------------------------------------------------------------------------------- */

/* Synthetic vocabulary: 0 BOS, 1 ".", 2 "\n", 3 question, 4..7 words, 8 needle word, 9 "!" */
enum { V = 10 };
static const uint8_t ends[V] = {0, 1, 1, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t ends_nl[V] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0};

static int is_boundary(const int32_t *hay, size_t h) { return h == 0 || ends[hay[h - 1]]; }

static void test_assembly(void) {
    /* sentences of 4..7 tokens ending in '.', '\n' or '!' */
    int32_t hay[400];
    size_t nh = 0;
    for (int s = 0; nh + 8 < sizeof hay / sizeof *hay; s++) {
        int len = 3 + s % 4;
        for (int i = 0; i < len; i++) hay[nh++] = 4 + (s + i) % 4;
        hay[nh++] = s % 3 == 0 ? 2 : s % 3 == 1 ? 1 : 9;
    }
    int32_t pre[] = {0}, tail[] = {3, 3, 3}, nl[] = {8, 8, 8, 2}, sp[] = {8, 8, 1};
    double frac[3] = {0.5, 0.0, 1.0};
    needle_parts p;
    memset(&p, 0, sizeof p);
    p.prefix = (needle_span){pre, 1};
    p.hay = (needle_span){hay, nh};
    p.tail = (needle_span){tail, 3};
    p.needle_nl[0] = (needle_span){nl, 4};
    p.needle_sp[0] = (needle_span){sp, 3};
    p.frac = frac;
    p.k = 1;
    p.ends = ends;
    p.ends_nl = ends_nl;
    p.n_vocab = V;

    int all_ok = 1;
    for (size_t L = 20; L <= 300; L += 7) {
        for (int q = 0; q <= 100; q += 5) {
            double f = q / 100.0;
            p.frac = &f;
            p.length = L;
            needle_prompt np;
            char err[256];
            int rc = needle_assemble(&p, &np, err, sizeof err);
            size_t budget = L - 1 - 3 - 4, H = np.hay_used, c = np.cut[0];
            int ok = rc == 0 && np.n <= L && H <= budget && is_boundary(hay, H);
            for (size_t h = H + 1; ok && h <= budget; h++) ok = !is_boundary(hay, h);   /* the largest */
            size_t x = (size_t)floor(f * (double)H);
            ok = ok && c <= x && is_boundary(hay, c);
            for (size_t h = c + 1; ok && h <= x; h++) ok = !is_boundary(hay, h);
            int use_nl = c == 0 || hay[c - 1] == 2;
            const int32_t *nd = use_nl ? nl : sp;
            size_t nn = use_nl ? 4 : 3;
            /* the exact layout: prefix | hay[0, c) | needle | hay[c, H) | tail */
            ok = ok && np.n == 1 + H + nn + 3 && np.ids[0] == 0 && np.at[0] == 1 + c &&
                 !memcmp(np.ids + 1, hay, c * sizeof *hay) && !memcmp(np.ids + 1 + c, nd, nn * sizeof *nd) &&
                 !memcmp(np.ids + 1 + c + nn, hay + c, (H - c) * sizeof *hay) &&
                 !memcmp(np.ids + 1 + H + nn, tail, 3 * sizeof *tail) && np.first_cut == c;
            if (q == 0) ok = ok && c == 0;
            if (q == 100) ok = ok && c == H;
            if (!ok && all_ok) printf("# first failure: L %zu, p %d, rc %d, H %zu, cut %zu\n", L, q, rc, H, c);
            all_ok &= ok;
            needle_prompt_free(&np);
        }
    }
    CHECK(all_ok, "every L in 20..300 and p in 0..100: n <= L, the haystack end and the needle backed up to the "
          "largest sentence boundary, the needle's form by what precedes it, the exact layout");

    /* one worked case: sentence ends at 4 ('\n' after "4 5 6"), 9 ('.'), 15 ('!'), ... */
    double half = 0.5;
    p.frac = &half;
    p.length = 1 + 3 + 4 + 15;   /* budget 15: the boundary at 15 */
    needle_prompt np;
    char err[256];
    CHECK(needle_assemble(&p, &np, err, sizeof err) == 0 && np.hay_used == 15, "worked case: H = 15 (%zu)", np.hay_used);
    CHECK(np.cut[0] == 4 && np.at[0] == 5, "worked case: 50%% of 15 = 7 backs up to the newline at 4 (cut %zu)", np.cut[0]);
    CHECK(np.n == 1 + 15 + 4 + 3 && np.ids[5] == 8 && np.ids[8] == 2, "worked case: the newline form after a newline");
    needle_prompt_free(&np);
    double f10 = 10.0 / 15.0;
    p.frac = &f10;
    CHECK(needle_assemble(&p, &np, err, sizeof err) == 0 && np.cut[0] == 9 && np.ids[1 + 9 + 2] == 1 &&
          np.n == 1 + 15 + 3 + 3, "worked case: after '.', the full-stop form (cut %zu)", np.cut[0]);
    needle_prompt_free(&np);

    /* three needles: in haystack order, each at its own cut */
    p.k = 3;
    p.frac = frac;
    int32_t nl1[] = {7, 2}, sp1[] = {7, 1}, nl2[] = {6, 2}, sp2[] = {6, 1};
    p.needle_nl[1] = (needle_span){nl1, 2};
    p.needle_sp[1] = (needle_span){sp1, 2};
    p.needle_nl[2] = (needle_span){nl2, 2};
    p.needle_sp[2] = (needle_span){sp2, 2};
    p.length = 200;
    CHECK(needle_assemble(&p, &np, err, sizeof err) == 0, "three needles assemble");
    CHECK(np.cut[1] == 0 && np.cut[2] == np.hay_used && np.at[1] == 1 && np.at[1] < np.at[0] && np.at[0] < np.at[2],
          "three needles: at 0 %%, 50 %%, 100 %% in that order (at %zu %zu %zu)", np.at[1], np.at[0], np.at[2]);
    CHECK(np.first_cut == 0 && np.n <= 200, "three needles: first_cut is the smallest cut");
    needle_prompt_free(&np);
    p.k = 1;

    p.frac = &half;
    p.length = 8;
    CHECK(needle_assemble(&p, &np, err, sizeof err) == -1 && strstr(err, "no room"), "L too small: '%s'", err);
    needle_prompt_free(&np);
    p.length = 1000;
    CHECK(needle_assemble(&p, &np, err, sizeof err) == -1 && strstr(err, "fewer than"), "haystack too short: '%s'", err);
    needle_prompt_free(&np);
    int32_t flat[50];
    for (int i = 0; i < 50; i++) flat[i] = 5;
    p.hay = (needle_span){flat, 50};
    p.length = 40;
    CHECK(needle_assemble(&p, &np, err, sizeof err) == -1 && strstr(err, "no sentence boundary"), "no boundary: '%s'", err);
    needle_prompt_free(&np);
    flat[3] = 12;
    p.hay = (needle_span){flat, 50};
    CHECK(needle_assemble(&p, &np, err, sizeof err) == -1 && strstr(err, "outside"), "a token id outside the vocabulary");
    needle_prompt_free(&np);

    int32_t a[] = {1, 2, 3, 4}, b[] = {1, 2, 5};
    CHECK(needle_common_prefix(a, 4, b, 3) == 2 && needle_common_prefix(a, 4, a, 2) == 2 &&
          needle_common_prefix(a, 0, b, 3) == 0, "common prefix lengths");
}

/* ---- answers, escaping, cells.tsv ----------------------------------------------------------- */

static void test_text(void) {
    char d[32];
    CHECK(needle_first_digits(" 1234567.", 9, d, sizeof d) == 7 && !strcmp(d, "1234567"), "digits after a space");
    CHECK(needle_first_digits("abc", 3, d, sizeof d) == 0 && !strcmp(d, ""), "no digits");
    CHECK(needle_first_digits("x12a345", 7, d, sizeof d) == 2 && !strcmp(d, "12"), "the first run only");
    CHECK(needle_first_digits("123456789", 9, d, 4) == 9 && !strcmp(d, "123"), "cut at the buffer");

    const char raw[] = "a\tb\\c\nd\re\x01 \xc3\xa9 \xff \xe2\x82 end";
    size_t n = sizeof raw - 1;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    needle_escape(m, raw, n);
    fclose(m);
    CHECK(!strchr(buf, '\t') && !strchr(buf, '\n') && !strchr(buf, '\r'), "escaped text has no tab, newline or CR");
    CHECK(strstr(buf, "\xc3\xa9") && strstr(buf, "\\xFF") && strstr(buf, "\\xE2\\x82") && strstr(buf, "\\x01"),
          "valid UTF-8 kept, invalid and control bytes as \\xHH: %s", buf);
    long back = needle_unescape(buf);
    CHECK(back == (long)n && !memcmp(buf, raw, n), "unescape gives the bytes back");
    free(buf);
    char bad[] = "x\\q";
    CHECK(needle_unescape(bad) == -1, "a bad escape is refused");

    char path[] = "/tmp/test_needle_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    int32_t gold[] = {216, 35, 33}, gen[] = {216, 35, 33, 13, 2};
    needle_row r = {.length = 1024, .position = 50, .trial = 1, .chat = 1, .key = 1234567, .exact = 0,
                    .logprob = -1.0 / 3.0, .n_prompt = 1019, .needle_pos = 487, .gold = gold, .n_gold = 3,
                    .gen = gen, .n_gen = 5};
    snprintf(r.arm, sizeof r.arm, "int8");
    char text[] = " 123\tx\n";
    r.generated = text;
    r.n_generated = strlen(text);
    snprintf(r.answer, sizeof r.answer, "123");
    fprintf(f, "%s\n", NEEDLE_CELLS_HEADER);
    CHECK(needle_row_write(f, &r) == 0, "a row is written");
    r.exact = 1;
    snprintf(r.arm, sizeof r.arm, "f16");
    needle_row_write(f, &r);  /* inconsistent: exact = 1 but the answer is not the key */
    fclose(f);
    needle_row *rows = NULL;
    size_t nr = 0, dropped = 0;
    char err[512];
    CHECK(needle_rows_read(path, &rows, &nr, &dropped, err, sizeof err) == -1 && strstr(err, "do not agree"),
          "reading refuses exact = 1 for a wrong answer: '%s'", err);
    needle_rows_free(rows, nr);
    f = fopen(path, "w");
    fprintf(f, "%s\n", NEEDLE_CELLS_HEADER);
    r.exact = 0;
    needle_row_write(f, &r);
    fprintf(f, "512\t0\t0\traw\t1234");   /* a line cut off mid-write */
    fclose(f);
    err[0] = 0;
    CHECK(needle_rows_read(path, &rows, &nr, &dropped, err, sizeof err) == 0 && nr == 1 && dropped == 1,
          "round trip: one row, the cut-off line dropped (%s)", err);
    CHECK(nr == 1 && rows[0].length == 1024 && rows[0].position == 50 && rows[0].trial == 1 && rows[0].chat == 1 &&
          rows[0].key == 1234567 && !strcmp(rows[0].arm, "f16") && rows[0].logprob == -1.0 / 3.0 &&
          rows[0].n_prompt == 1019 && rows[0].needle_pos == 487 && rows[0].n_generated == strlen(text) &&
          !memcmp(rows[0].generated, text, strlen(text)) && rows[0].n_gold == 3 && rows[0].gold[2] == 33 &&
          rows[0].n_gen == 5 && rows[0].gen[4] == 2 && !strcmp(rows[0].answer, "123"),
          "round trip: every field, the log-prob to the bit");
    needle_rows_free(rows, nr);
    unlink(path);
}

/* ---- statistics ------------------------------------------------------------------------------ */

static void test_stats(void) {
    /* McNemar exact: p = min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2), by hand */
    CHECK(stats_mcnemar_exact(0, 0) == 1.0, "McNemar b = c = 0: p = 1");
    CHECK(stats_mcnemar_exact(1, 0) == 1.0, "McNemar 1/0: 2 * 1/2 = 1");
    CHECK(fabs(stats_mcnemar_exact(5, 0) - 1.0 / 16) < 1e-15, "McNemar 5/0: 2/32 = 1/16 (%.17g)", stats_mcnemar_exact(5, 0));
    CHECK(fabs(stats_mcnemar_exact(0, 6) - 1.0 / 32) < 1e-15, "McNemar 0/6: 2/64");
    CHECK(fabs(stats_mcnemar_exact(10, 2) - 158.0 / 4096) < 1e-14,
          "McNemar 10/2: 2 (1 + 12 + 66)/4096 = 0.03857 (%.17g)", stats_mcnemar_exact(10, 2));
    CHECK(fabs(stats_mcnemar_exact(1, 7) - 18.0 / 256) < 1e-15, "McNemar 1/7: 2 (1 + 8)/256, symmetric");
    CHECK(stats_mcnemar_exact(7, 1) == stats_mcnemar_exact(1, 7), "McNemar is symmetric in b and c");
    CHECK(stats_mcnemar_exact(3, 3) == 1.0, "McNemar 3/3: capped at 1");
    CHECK(fabs(stats_mcnemar_exact(20, 5) - 136812.0 / 33554432) < 1e-13,
          "McNemar 20/5: 2 (1 + 25 + 300 + 2300 + 12650 + 53130)/2^25 = 0.0040773 (%.10g)",
          stats_mcnemar_exact(20, 5));

    /* Wilson 95 %: k = 0 of n: [0, z²/(n + z²)]; k = n: [n/(n + z²), 1]; 5 of 10: [0.2366, 0.7634] */
    stats_ci c;
    double z = 1.959963984540054, z2 = z * z;
    stats_wilson(0, 12, &c);
    CHECK(c.est == 0 && c.lo == 0 && fabs(c.hi - z2 / (12 + z2)) < 1e-12, "Wilson 0/12: hi %.6f = z²/(12 + z²)", c.hi);
    stats_wilson(12, 12, &c);
    CHECK(fabs(c.lo - 12 / (12 + z2)) < 1e-12 && fabs(c.hi - 1) < 1e-12, "Wilson 12/12: lo %.6f", c.lo);
    stats_wilson(5, 10, &c);
    CHECK(fabs(c.lo - 0.236593) < 1e-6 && fabs(c.hi - 0.763407) < 1e-6, "Wilson 5/10: [%.6f, %.6f]", c.lo, c.hi);
}

/* The retrieval test over units (driver/needle/needle_stats.c), against cases worked by hand. */
static void test_units(void) {
    /* one template (x in {-1, 0, 1}): the sign-flip test is McNemar's exact test */
    int one[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1};   /* b = 10, c = 2 */
    double p = needle_stats_signflip_p(one, 12);
    CHECK(fabs(p - 158.0 / 4096) < 1e-14 && fabs(p - stats_mcnemar_exact(10, 2)) < 1e-14,
          "sign-flip 10 up / 2 down = McNemar 10/2 = 158/4096 (%.17g)", p);
    int mixed[9] = {0, 1, 0, -1, 0, 0, 1, 1, 1};           /* b = 4, c = 1, zeros do not count */
    CHECK(fabs(needle_stats_signflip_p(mixed, 9) - stats_mcnemar_exact(4, 1)) < 1e-15,
          "sign-flip with concordant units = McNemar 4/1 (%.17g)", needle_stats_signflip_p(mixed, 9));
    int none[3] = {0, 0, 0};
    CHECK(needle_stats_signflip_p(none, 3) == 1.0 && needle_stats_signflip_p(NULL, 0) == 1.0,
          "sign-flip: no discordant unit, p = 1");
    /* twins: units of two templates. {-2, -1, -1}: S = -4; of the 8 sign patterns of (2, 1, 1) only
     * all-plus and all-minus reach |S*| = 4: p = 2/8. {2, 2, -1}: S = 3; |S*| >= 3 for (2+2+1),
     * (2+2-1) and their negatives: p = 4/8. */
    int tw1[3] = {-2, -1, -1}, tw2[3] = {2, 2, -1}, tw3[4] = {1, -1, 2, 0};
    CHECK(fabs(needle_stats_signflip_p(tw1, 3) - 0.25) < 1e-15, "twins {-2,-1,-1}: p = 2/8 (%.17g)",
          needle_stats_signflip_p(tw1, 3));
    CHECK(fabs(needle_stats_signflip_p(tw2, 3) - 0.5) < 1e-15, "twins {2,2,-1}: p = 4/8 (%.17g)",
          needle_stats_signflip_p(tw2, 3));
    /* {1, -1, 2}: S = 2; S* over (1, 1, 2): 4, 2, 0, -2 twice each ... |S*| >= 2 in 6 of 8 */
    CHECK(fabs(needle_stats_signflip_p(tw3, 4) - 0.75) < 1e-15, "twins {1,-1,2,0}: p = 6/8 (%.17g)",
          needle_stats_signflip_p(tw3, 4));
    int bad[1] = {3};
    CHECK(isnan(needle_stats_signflip_p(bad, 1)), "sign-flip: x outside ±2 is refused");

    /* the grid's power: 6 one-way units reach 0.05 (2/64); the smallest q with
     * P(Bin(n, q) >= 6) >= 0.8, from summing binomial terms by hand: n = 9: 0.73245, n = 10: 0.67317;
     * two templates halve it (the unit differs in one twin) */
    double m9 = needle_stats_grid_mdd(9, 1, 0.05, 0.8), m10 = needle_stats_grid_mdd(10, 1, 0.05, 0.8);
    CHECK(fabs(m9 - 0.7324534) < 1e-6 && fabs(m10 - 0.6731718) < 1e-6, "grid MDD n = 9: %.7f, n = 10: %.7f",
          m9, m10);
    CHECK(fabs(needle_stats_grid_mdd(10, 2, 0.05, 0.8) - m10 / 2) < 1e-12, "grid MDD with twins: half");
    CHECK(isinf(needle_stats_grid_mdd(5, 1, 0.05, 0.8)) && !isinf(needle_stats_grid_mdd(6, 1, 0.05, 0.8)),
          "grid MDD: no power below 6 units (2/32 > 0.05), some at 6");
    /* at 6 units: P(Bin(6, q) >= 6) = q^6 = 0.8: q = 0.8^(1/6) */
    CHECK(fabs(needle_stats_grid_mdd(6, 1, 0.05, 0.8) - pow(0.8, 1.0 / 6)) < 1e-9, "grid MDD n = 6: 0.8^(1/6)");
    CHECK(needle_stats_grid_mdd(100, 1, 0.05, 0.8) < needle_stats_grid_mdd(20, 1, 0.05, 0.8),
          "grid MDD shrinks with more units");
    CHECK(isnan(needle_stats_grid_mdd(0, 1, 0.05, 0.8)) && isnan(needle_stats_grid_mdd(9, 3, 0.05, 0.8)),
          "grid MDD: bad input NAN");

    /* Clopper–Pearson one-sided 95 %: k = 0 of n: 1 − 0.05^(1/n); 7 of 10 (by bisection by hand):
     * 0.91274; k = n: 1 */
    CHECK(fabs(needle_stats_disc_bound(0, 20, 0.05) - (1 - pow(0.05, 1.0 / 20))) < 1e-9,
          "CP bound 0/20 = 1 − 0.05^(1/20) (%.9f)", needle_stats_disc_bound(0, 20, 0.05));
    CHECK(fabs(needle_stats_disc_bound(7, 10, 0.05) - 0.9127356) < 1e-6, "CP bound 7/10 = 0.91274 (%.7f)",
          needle_stats_disc_bound(7, 10, 0.05));
    CHECK(needle_stats_disc_bound(4, 4, 0.05) == 1.0 && isnan(needle_stats_disc_bound(5, 4, 0.05)),
          "CP bound k = n: 1; k > n: NAN");
    /* 59 concordant units are the fewest whose bound is below 5 points */
    CHECK(needle_stats_disc_bound(0, 59, 0.05) < 0.05 && needle_stats_disc_bound(0, 58, 0.05) >= 0.05,
          "CP bound: 59 concordant units for equivalence within 5 points");
}

/* Haystacks of different trials: disjoint stretches when the text allows; trial t independent of
 * how many trials follow. */
static void test_hay_place(void) {
    enum { N = 20000, SPAN = 1000, T = 8 };
    char *text = malloc(N);
    if (!text) { CHECK(0, "out of memory"); return; }
    for (size_t i = 0; i < N; i++) text[i] = i % 50 == 49 ? '\n' : 'a';
    size_t off[T], end[T];
    int clash_any = 0;
    for (int t = 0; t < T; t++) {
        int clash;
        off[t] = needle_hay_place(5, t, text, N, SPAN, off, end, t, &clash);
        end[t] = off[t] + SPAN < N ? off[t] + SPAN : N;
        clash_any |= clash;
    }
    int disjoint = 1, lines = 1;
    for (int i = 0; i < T; i++) {
        lines &= off[i] == 0 || text[off[i] - 1] == '\n';
        for (int j = 0; j < i; j++) disjoint &= end[j] <= off[i] || end[i] <= off[j];
    }
    CHECK(!clash_any && disjoint && lines, "8 haystacks of 1000 bytes in 20000: disjoint, on line starts");
    CHECK(off[0] == needle_hay_offset(5, 0, text, N, SPAN), "trial 0 is needle_hay_offset's draw");
    int clash;
    CHECK(needle_hay_place(5, 3, text, N, SPAN, off, end, 3, &clash) == off[3], "a trial's place is deterministic");
    /* a text with room for one haystack only: the second overlaps, and says so */
    size_t o0 = needle_hay_place(5, 0, text, 1500, SPAN, NULL, NULL, 0, &clash), e0 = o0 + SPAN;
    size_t o1 = needle_hay_place(5, 1, text, 1500, SPAN, &o0, &e0, 1, &clash);
    CHECK(clash == 1 && o1 == needle_hay_offset(5, 1, text, 1500, SPAN), "no room: the first draw, flagged");
    free(text);
}

int main(void) {
    test_keys();
    test_templates();
    test_assembly();
    test_text();
    test_stats();
    test_units();
    test_hay_place();
    return check_done();
}
