/* jtool.c — a journal editor for tests/resume.test.sh, standalone (its own bitwise CRC32C, no
 * strata code), so the tests can play a hostile or damaged journal (docs/DESIGN.md §4.10):
 *   jtool list FILE                 one line per valid record: "seq type offset length"
 *   jtool header-sub FILE FIND REP  replaces the first FIND in record 0's payload (the JSON
 *                                   header) with REP and recomputes that record's CRC32C
 *   jtool flip FILE OFFSET          xors the byte at OFFSET with 0x01
 * Exit 0, or 1 with a message on stderr. Built by the test with cc. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
    }
    return ~c;
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0, got;
    unsigned char *b = malloc(cap);
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            b = nb;
        }
    }
    fclose(f);
    *n = len;
    return b;
}

static int spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fwrite(b, 1, n, f) != n;
    return fclose(f) || bad ? -1 : 0;
}

int main(int argc, char **argv) {
    size_t n = 0;
    unsigned char *b = argc >= 3 ? slurp(argv[2], &n) : NULL;
    if (!b) { fprintf(stderr, "usage: jtool list|header-sub|flip FILE ... (cannot read the file)\n"); return 1; }
    int rc = 1;
    if (!strcmp(argv[1], "list") && argc == 3) {
        for (size_t off = 0, seq = 0; off + 16 <= n; seq++) {
            uint32_t L = get32(b + off);
            if (L > n - off - 16 || get32(b + off + 4) != seq || crc32c(b + off, 12 + (size_t)L) != get32(b + off + 12 + L))
                break;
            printf("%zu %u %zu %u\n", seq, get32(b + off + 8), off, L);
            off += 16 + (size_t)L;
        }
        rc = 0;
    } else if (!strcmp(argv[1], "header-sub") && argc == 5) {
        uint32_t L = n >= 16 ? get32(b) : 0;
        size_t fl = strlen(argv[3]), rl = strlen(argv[4]);
        unsigned char *hit = NULL;
        for (size_t i = 0; L <= n - 16 && i + fl <= L && !hit; i++)
            if (!memcmp(b + 12 + i, argv[3], fl)) hit = b + 12 + i;
        if (!hit) { fprintf(stderr, "jtool: '%s' is not in the header record\n", argv[3]); goto done; }
        size_t at = (size_t)(hit - b), nl = L - fl + rl, total = n - L + nl;
        unsigned char *o = malloc(total);
        if (!o) goto done;
        memcpy(o, b, at);
        memcpy(o + at, argv[4], rl);
        memcpy(o + at + rl, b + at + fl, (12 + (size_t)L) - (at + fl));
        put32(o, (uint32_t)nl);
        put32(o + 12 + nl, crc32c(o, 12 + nl));
        memcpy(o + 16 + nl, b + 16 + L, n - 16 - L);   /* the records after it, unchanged */
        rc = spit(argv[2], o, total) ? 1 : 0;
        free(o);
    } else if (!strcmp(argv[1], "flip") && argc == 4) {
        size_t at = strtoul(argv[3], NULL, 10);
        if (at >= n) { fprintf(stderr, "jtool: offset %zu is past the end (%zu bytes)\n", at, n); goto done; }
        b[at] ^= 1;
        rc = spit(argv[2], b, n) ? 1 : 0;
    } else {
        fprintf(stderr, "usage: jtool list FILE | header-sub FILE FIND REP | flip FILE OFFSET\n");
    }
done:
    free(b);
    return rc;
}
