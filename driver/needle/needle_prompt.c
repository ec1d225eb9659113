/* needle_prompt.c — the pure parts of the needle bench (see needle.h): keys from a seeded
 * generator, chat-template recognition and the prompt texts, prompt assembly on token ids,
 * answer matching, and the escaping of generated text in cells.tsv. No I/O except the TSV writer.
 *
 * Reading order: the generator and keys; templates and texts; assembly; answers and escaping. */
#include "driver/needle/needle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errmsg.h"

/* ============================================================================================
 * The generator and keys
 * ========================================================================================== */

uint64_t needle_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One step of hashing v into h. */
static uint64_t mix(uint64_t h, uint64_t v) {
    uint64_t s = h ^ (v * 0xD6E8FEB86659FD93ull + 0x632BE59BD9B4E019ull);
    return needle_splitmix64(&s);
}

/* Uniform in [0, range) without modulo bias (range >= 1). */
static uint64_t draw_below(uint64_t *state, uint64_t range) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    for (;;) {
        uint64_t r = needle_splitmix64(state);
        if (r < limit) return r % range;
    }
}

static const char *const label_names[NEEDLE_MAX_KEYS] = {
    "Paris", "London", "Tokyo", "Cairo", "Lima", "Oslo", "Rome", "Berlin",
    "Madrid", "Vienna", "Dublin", "Lisbon", "Prague", "Athens", "Warsaw", "Helsinki"};

const char *needle_label_name(int i) {
    return i >= 0 && i < NEEDLE_MAX_KEYS ? label_names[i] : NULL;
}

int needle_cell_keys(uint64_t seed, int length, int position, int trial, int k, needle_keys *out) {
    memset(out, 0, sizeof *out);
    if (k < 1 || k > NEEDLE_MAX_KEYS || position < 0 || position > 100) return -1;
    uint64_t st = mix(mix(mix(mix(seed, 0x63656c6cull /* "cell" */), (uint64_t)(uint32_t)length),
                          (uint64_t)position), (uint64_t)(uint32_t)trial);
    out->k = k;
    for (int j = 0; j < k; j++) {
        uint32_t key;
        int again;
        do {   /* distinct keys */
            key = NEEDLE_KEY_MIN + (uint32_t)draw_below(&st, NEEDLE_KEY_MAX - NEEDLE_KEY_MIN + 1);
            again = 0;
            for (int i = 0; i < j; i++) again |= out->key[i] == key;
        } while (again);
        out->key[j] = key;
    }
    int perm[NEEDLE_MAX_KEYS];   /* distinct labels: the first k of a Fisher–Yates shuffle */
    for (int i = 0; i < NEEDLE_MAX_KEYS; i++) perm[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)draw_below(&st, (uint64_t)(NEEDLE_MAX_KEYS - i));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        out->label[i] = perm[i];
    }
    double p = position / 100.0;
    for (int j = 0; j < k; j++) {
        double f = p + (double)j / k;
        out->frac[j] = j == 0 ? p : f > 1.0 ? f - 1.0 : f;
    }
    return 0;
}

size_t needle_hay_offset(uint64_t seed, int trial, const char *text, size_t n, size_t need) {
    return needle_hay_offset_try(seed, trial, 0, text, n, need);
}

size_t needle_hay_offset_try(uint64_t seed, int trial, int attempt, const char *text, size_t n, size_t need) {
    if (n <= need) return 0;
    uint64_t st = mix(mix(seed, 0x686179ull /* "hay" */), (uint64_t)(uint32_t)trial);
    if (attempt > 0) st = mix(st, (uint64_t)(uint32_t)attempt);   /* attempt 0: the original draw */
    size_t off = (size_t)draw_below(&st, (uint64_t)(n - need) + 1);
    if (off == 0 || text[off - 1] == '\n') return off;
    const char *nl = memchr(text + off, '\n', n - off);
    if (!nl || (size_t)(nl + 1 - text) >= n) return 0;
    return (size_t)(nl + 1 - text);
}

size_t needle_hay_place(uint64_t seed, int trial, const char *text, size_t n, size_t span,
                        const size_t *prev_off, const size_t *prev_end, int n_prev, int *overlaps) {
    *overlaps = 0;
    for (int att = 0; att < NEEDLE_HAY_ATTEMPTS; att++) {
        size_t off = needle_hay_offset_try(seed, trial, att, text, n, span);
        size_t end = off + span < n ? off + span : n;
        int clash = 0;
        for (int j = 0; j < n_prev && !clash; j++) clash = off < prev_end[j] && prev_off[j] < end;
        if (!clash) return off;
    }
    *overlaps = n_prev > 0;
    return needle_hay_offset_try(seed, trial, 0, text, n, span);
}

/* ============================================================================================
 * Templates and texts
 * ========================================================================================== */

const char *needle_chat_name(needle_chat c) {
    return c == NEEDLE_CHAT_CHATML ? "chatml" : c == NEEDLE_CHAT_GEMMA ? "gemma" : "none";
}

/* memmem on a bounded text. */
static const char *find(const char *s, size_t n, const char *what) {
    size_t m = strlen(what);
    if (m > n) return NULL;
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(s + i, what, m)) return s + i;
    return NULL;
}

needle_chat needle_chat_detect(const char *tpl, size_t len, char *system, size_t syslen) {
    if (system && syslen) system[0] = 0;
    if (!tpl) return NEEDLE_CHAT_NONE;
    if (find(tpl, len, "<start_of_turn>")) return NEEDLE_CHAT_GEMMA;
    if (!find(tpl, len, "<|im_start|>")) return NEEDLE_CHAT_NONE;
    /* a default system message written as a literal: '<|im_start|>system\n' TEXT '<|im_end|>' */
    const char *tag = "<|im_start|>system";
    const char *end = tpl + len;
    for (const char *s = find(tpl, len, tag); s; s = find(s + 1, (size_t)(end - s - 1), tag)) {
        const char *q = s + strlen(tag);
        if (q < end && *q == '\n') q++;
        else if (end - q >= 2 && q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *e = find(q, (size_t)(end - q), "<|im_end|>");
        if (!e || e == q) continue;
        int literal = 1;
        for (const char *c = q; c < e; c++)
            if (*c == '\'' || *c == '"' || *c == '{' || *c == '}' || *c == '+') literal = 0;
        if (!literal || !system || !syslen) continue;
        size_t w = 0;
        for (const char *c = q; c < e && w + 1 < syslen; c++) {
            if (c + 1 < e && c[0] == '\\' && c[1] == 'n') { system[w++] = '\n'; c++; }
            else system[w++] = *c;
        }
        system[w] = 0;
        break;
    }
    return NEEDLE_CHAT_CHATML;
}

int needle_texts_build(needle_chat chat, const char *system, const needle_keys *keys,
                       needle_texts *out) {
    char question[256], answer[256], lab[64] = "";
    memset(out, 0, sizeof *out);
    if (!keys || keys->k < 1 || keys->k > NEEDLE_MAX_KEYS) return -1;
    int multi = keys->k > 1;
    for (int j = 0; j < keys->k; j++) {
        const char *name = needle_label_name(keys->label[j]);
        if (multi && !name) return -1;
        if (multi) snprintf(out->needle[j], sizeof out->needle[j],
                            "The special magic number for %s is %u.", name, keys->key[j]);
        else snprintf(out->needle[j], sizeof out->needle[j], "The special magic number is %u.",
                      keys->key[j]);
    }
    snprintf(out->key_text, sizeof out->key_text, "%u", keys->key[0]);
    if (multi) snprintf(lab, sizeof lab, " for %s", needle_label_name(keys->label[0]));
    snprintf(question, sizeof question, "What is the special magic number%s mentioned in the text "
             "above?", lab);
    snprintf(answer, sizeof answer, "The special magic number%s is", lab);
    int w1 = 0, w2 = 0;
    switch (chat) {
    case NEEDLE_CHAT_NONE:
        w2 = snprintf(out->tail, sizeof out->tail, "\n%s %s", question, answer);
        break;
    case NEEDLE_CHAT_CHATML:
        if (system && system[0])
            w1 = snprintf(out->head, sizeof out->head, "<|im_start|>system\n%s<|im_end|>\n"
                          "<|im_start|>user\n", system);
        else w1 = snprintf(out->head, sizeof out->head, "<|im_start|>user\n");
        w2 = snprintf(out->tail, sizeof out->tail, "\n%s<|im_end|>\n<|im_start|>assistant\n%s",
                      question, answer);
        break;
    case NEEDLE_CHAT_GEMMA:
        w1 = snprintf(out->head, sizeof out->head, "<start_of_turn>user\n");
        w2 = snprintf(out->tail, sizeof out->tail, "\n%s<end_of_turn>\n<start_of_turn>model\n%s",
                      question, answer);
        break;
    default:
        return -1;
    }
    if (w1 < 0 || w2 < 0 || (size_t)w1 >= sizeof out->head || (size_t)w2 >= sizeof out->tail)
        return -1;
    return 0;
}

/* ============================================================================================
 * Assembly
 * ========================================================================================== */

void needle_prompt_free(needle_prompt *p) {
    free(p->ids);
    memset(p, 0, sizeof *p);
}

size_t needle_common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The largest sentence boundary <= h in hay (0 is one). */
static size_t back_up(const needle_parts *p, size_t h) {
    while (h > 0 && !p->ends[p->hay.ids[h - 1]]) h--;
    return h;
}

static int span_ok(const needle_span *s, int n_vocab) {
    if (s->n && !s->ids) return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->ids[i] < 0 || s->ids[i] >= n_vocab) return 0;
    return 1;
}

static void put(int32_t *dst, size_t *w, const needle_span *s) {
    if (s->n) memcpy(dst + *w, s->ids, s->n * sizeof *dst);
    *w += s->n;
}

int needle_assemble(const needle_parts *p, needle_prompt *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!p || p->k < 1 || p->k > NEEDLE_MAX_KEYS || !p->frac || !p->ends || !p->ends_nl ||
        p->n_vocab < 1)
        return errmsg_set(err, errlen, -1, "needle_assemble: bad arguments");
    int ok = span_ok(&p->prefix, p->n_vocab) && span_ok(&p->hay, p->n_vocab) &&
             span_ok(&p->tail, p->n_vocab);
    size_t fixed = p->prefix.n + p->tail.n;
    for (int j = 0; j < p->k; j++) {
        ok = ok && span_ok(&p->needle_nl[j], p->n_vocab) && span_ok(&p->needle_sp[j], p->n_vocab);
        fixed += p->needle_nl[j].n > p->needle_sp[j].n ? p->needle_nl[j].n : p->needle_sp[j].n;
        if (!(p->frac[j] >= 0.0 && p->frac[j] <= 1.0)) ok = 0;
    }
    if (!ok) return errmsg_set(err, errlen, -1, "needle_assemble: a token id outside [0, %d) or a "
                               "position outside [0, 1]", p->n_vocab);
    if (p->length <= fixed)
        return errmsg_set(err, errlen, -1, "a %zu-token prompt has no room for a haystack: the "
                          "template, needles and question take %zu tokens", p->length, fixed);
    size_t budget = p->length - fixed;
    if (p->hay.n < budget)
        return errmsg_set(err, errlen, -1, "the haystack has %zu tokens, fewer than the %zu a "
                          "%zu-token prompt needs", p->hay.n, budget, p->length);
    size_t H = back_up(p, budget);
    if (H == 0)
        return errmsg_set(err, errlen, -1, "no sentence boundary ('.', '!', '?' or a newline) in "
                          "the first %zu haystack tokens", budget);

    /* insertion points, then the needles in haystack order (ties: index order) */
    int order[NEEDLE_MAX_KEYS];
    for (int j = 0; j < p->k; j++) {
        double x = floor(p->frac[j] * (double)H);
        out->cut[j] = back_up(p, x >= (double)H ? H : (size_t)x);
        order[j] = j;
    }
    for (int a = 1; a < p->k; a++)   /* insertion sort: stable */
        for (int b = a; b > 0 && out->cut[order[b - 1]] > out->cut[order[b]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    size_t cap = p->length;
    if (!(out->ids = malloc(cap * sizeof *out->ids)))
        return errmsg_set(err, errlen, -1, "out of memory");
    size_t w = 0, h = 0;
    put(out->ids, &w, &p->prefix);
    for (int o = 0; o < p->k; o++) {
        int j = order[o];
        size_t c = out->cut[j];
        needle_span hs = {p->hay.ids + h, c - h};
        put(out->ids, &w, &hs);
        h = c;
        int nl = c == 0 || p->ends_nl[p->hay.ids[c - 1]];
        out->at[j] = w;
        put(out->ids, &w, nl ? &p->needle_nl[j] : &p->needle_sp[j]);
    }
    needle_span rest = {p->hay.ids + h, H - h};
    put(out->ids, &w, &rest);
    put(out->ids, &w, &p->tail);
    out->n = w;
    out->hay_used = H;
    out->first_cut = out->cut[order[0]];
    return 0;
}

/* ============================================================================================
 * Answers and escaping
 * ========================================================================================== */

size_t needle_first_digits(const char *text, size_t n, char *out, size_t outlen) {
    size_t i = 0, m = 0;
    while (i < n && !(text[i] >= '0' && text[i] <= '9')) i++;
    for (; i < n && text[i] >= '0' && text[i] <= '9'; i++, m++)
        if (outlen && m + 1 < outlen) out[m] = text[i];
    if (outlen) out[m + 1 < outlen ? m : outlen - 1] = 0;
    return m;
}

/* Length of the valid UTF-8 sequence at s [n] (2..4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

void needle_escape(FILE *f, const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '\\') { fputs("\\\\", f); i++; }
        else if (c == '\t') { fputs("\\t", f); i++; }
        else if (c == '\n') { fputs("\\n", f); i++; }
        else if (c == '\r') { fputs("\\r", f); i++; }
        else if (c < 0x20 || c == 0x7F) { fprintf(f, "\\x%02X", c); i++; }
        else if (c < 0x80) { fputc(c, f); i++; }
        else {
            size_t len = utf8_len(s + i, n - i);
            if (len) { fwrite(s + i, 1, len, f); i += len; }
            else { fprintf(f, "\\x%02X", c); i++; }
        }
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long needle_unescape(char *s) {
    size_t r = 0, w = 0;
    while (s[r]) {
        if (s[r] != '\\') { s[w++] = s[r++]; continue; }
        char c = s[r + 1];
        if (c == '\\') s[w++] = '\\';
        else if (c == 't') s[w++] = '\t';
        else if (c == 'n') s[w++] = '\n';
        else if (c == 'r') s[w++] = '\r';
        else if (c == 'x') {
            int a = s[r + 2] ? hexval(s[r + 2]) : -1, b = a >= 0 && s[r + 3] ? hexval(s[r + 3]) : -1;
            if (a < 0 || b < 0) return -1;
            s[w++] = (char)(a * 16 + b);
            r += 4;
            continue;
        } else return -1;
        r += 2;
    }
    s[w] = 0;
    return (long)w;
}
