/* test_journal.c — the sweep's journal (driver/journal.h): CRC32C against its check value and a
 * bitwise reference, record framing round trips, a journal truncated at every byte of its last
 * record recovers exactly the records before it (and appends continue after it), damage in a
 * middle record ends the journal there (the records after it are found, reported and saved aside,
 * not used), the lock keeps a second writer out, durable whole-file writes. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/journal.h"
#include "tests/check.h"

/* The CRC one bit at a time, straight from the definition. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
    }
    return ~c;
}

static void test_crc(void) {
    CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = 0xE3069283 (got 0x%08X)",
          crc32c(0, "123456789", 9));
    CHECK(crc32c(0, "", 0) == 0, "crc32c of nothing is 0");
    unsigned char zeros[32] = { 0 }, ones[32];
    memset(ones, 0xff, sizeof ones);
    /* RFC 3720 B.4 test vectors */
    CHECK(crc32c(0, zeros, 32) == 0x8A9136AAu, "32 zero bytes: 0x8A9136AA (got 0x%08X)", crc32c(0, zeros, 32));
    CHECK(crc32c(0, ones, 32) == 0x62A8AB43u, "32 0xFF bytes: 0x62A8AB43 (got 0x%08X)", crc32c(0, ones, 32));
    unsigned char buf[1000];
    unsigned s = 12345;
    int same = 1;
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (unsigned char)((s = s * 1103515245u + 12345u) >> 16);
    for (size_t n = 0; n <= sizeof buf; n += 37) same &= crc32c(0, buf, n) == crc32c_bitwise(buf, n);
    CHECK(same, "the table-driven CRC equals the bitwise definition on random buffers");
    CHECK(crc32c(crc32c(0, buf, 400), buf + 400, 600) == crc32c(0, buf, 1000), "the CRC continues across calls");
}

static const char *DIR_ = "/tmp/strata_test_journal";

static void fresh_dir(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", DIR_, DIR_);
    if (system(cmd)) printf("FAIL - %s\n", cmd);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) { if (n) fwrite(b, 1, n, f); fclose(f); }
}

/* Writes a journal with a header and 5 records of different sizes (the last one 300 bytes). */
static int write_sample(journal *j) {
    char err[256];
    static const size_t sizes[5] = { 0, 1, 17, 4000, 300 };
    if (journal_create(j, DIR_, "{\"h\":1}", 7, err, sizeof err)) { printf("FAIL - create: %s\n", err); return -1; }
    for (int i = 0; i < 5; i++) {
        unsigned char p[4000];
        for (size_t k = 0; k < sizes[i]; k++) p[k] = (unsigned char)(i * 31 + k);
        if (journal_append(j, JOURNAL_CHUNK + (uint32_t)(i % 2), p, sizes[i], err, sizeof err)) return -1;
    }
    return journal_sync(j, err, sizeof err);
}

static void test_roundtrip(void) {
    journal j;
    char err[256] = "";
    fresh_dir();
    CHECK(write_sample(&j) == 0 && j.next_seq == 6, "a header and 5 records written and synced");
    journal_close(&j);
    unsigned char *data = NULL;
    size_t dlen = 0, n = 0;
    journal_rec *recs = NULL;
    journal_damage dm;
    int rc = journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
    CHECK(rc == 0 && n == 6 && !dm.torn && !dm.damaged, "reopened: 6 records, nothing torn (%s)", err);
    int ok = rc == 0 && recs[0].type == JOURNAL_HEADER && recs[0].len == 7 && !memcmp(recs[0].data, "{\"h\":1}", 7);
    static const size_t sizes[5] = { 0, 1, 17, 4000, 300 };
    for (size_t i = 1; ok && i < 6; i++) {
        ok &= recs[i].len == sizes[i - 1] && recs[i].seq == i && recs[i].type == JOURNAL_CHUNK + (uint32_t)((i - 1) % 2);
        for (size_t k = 0; ok && k < recs[i].len; k++) ok &= recs[i].data[k] == (unsigned char)((i - 1) * 31 + k);
    }
    CHECK(ok, "every record comes back with its type, sequence number and payload");
    CHECK(dlen == 7 + 4000 + 300 + 17 + 1 + 6 * JOURNAL_REC_OVERHEAD, "file size = payloads + 16 bytes per record");
    /* a second writer is kept out while this one holds the journal */
    journal j2;
    unsigned char *d2 = NULL;
    size_t dl2, n2;
    journal_rec *r2 = NULL;
    journal_damage t2;
    rc = journal_open(&j2, DIR_, &d2, &dl2, &r2, &n2, &t2, err, sizeof err);
    CHECK(rc == JOURNAL_E_BUSY && strstr(err, "in use"), "a second open is refused: %s", err);
    CHECK(journal_in_use(DIR_) == 1, "journal_in_use sees the lock");
    free(recs);
    free(data);
    journal_close(&j);
    CHECK(journal_in_use(DIR_) == 0, "closed: not in use");
    char *hdr = NULL;
    size_t hlen = 0;
    CHECK(journal_read_header(DIR_, &hdr, &hlen, err, sizeof err) == 0 && hlen == 7 && !strcmp(hdr, "{\"h\":1}"),
          "journal_read_header returns record 0's payload");
    free(hdr);
    CHECK(journal_read_header("/tmp/strata_no_such_dir", &hdr, &hlen, err, sizeof err) == JOURNAL_E_MISSING,
          "no journal: JOURNAL_E_MISSING");
}

/* One byte flipped in a middle record (its payload, its CRC, its length, its sequence number):
 * the records before it are the journal, the ones after it are found and reported but not used,
 * the bytes from the damaged record on are saved in journal.damaged.<byte> and cut off, and
 * appends continue after the last valid record. */
static void test_damage(void) {
    journal j;
    char path[512], err[256] = "";
    fresh_dir();
    if (write_sample(&j)) return;
    journal_close(&j);
    snprintf(path, sizeof path, "%s/%s", DIR_, JOURNAL_FILE);
    size_t full_len = 0;
    unsigned char *full = slurp(path, &full_len);
    static const size_t sizes[6] = { 7, 0, 1, 17, 4000, 300 };
    size_t start[6], off = 0;
    for (int i = 0; i < 6; i++) { start[i] = off; off += sizes[i] + JOURNAL_REC_OVERHEAD; }
    /* which byte of record r: 0 the length's low byte, 3 its high byte, 4 the seq, 8 the type,
     * 12 the first payload byte (or the CRC when empty), -1 the CRC's last byte */
    static const int where[] = { 0, 3, 4, 8, 12, -1 };
    int all_ok = 1;
    for (int r = 1; r <= 4; r++)
        for (size_t w = 0; w < sizeof where / sizeof *where; w++) {
            size_t at = where[w] < 0 ? start[r] + sizes[r] + JOURNAL_REC_OVERHEAD - 1 : start[r] + (size_t)where[w];
            full[at] ^= where[w] == 3 ? 0x80 : 0x10;
            spit(path, full, full_len);
            full[at] ^= where[w] == 3 ? 0x80 : 0x10;
            unsigned char *data = NULL;
            size_t dlen = 0, n = 0;
            journal_rec *recs = NULL;
            journal_damage dm;
            int rc = journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
            struct stat st;
            char saved[600];
            snprintf(saved, sizeof saved, "%s.damaged.%zu", path, start[r]);
            /* until journal_cut, the file is as it was and nothing appends */
            int untouched = rc == 0 && stat(path, &st) == 0 && (size_t)st.st_size == full_len &&
                            access(saved, F_OK) != 0 && journal_append(&j, JOURNAL_DEPTH, "x", 1, err, sizeof err) != 0;
            if (rc == 0 && journal_cut(&j, &dm, data, err, sizeof err)) rc = -1;
            size_t slen = 0;
            unsigned char *sv = slurp(saved, &slen);
            int ok = untouched && rc == 0 && n == (size_t)r && dm.damaged && !dm.torn && dm.at_record == (uint32_t)r &&
                     dm.at_byte == start[r] && dm.bytes == full_len - start[r] && dm.n_later == (size_t)(5 - r) &&
                     dm.later_complete && !strcmp(dm.saved, saved) && j.size == start[r] && j.next_seq == (uint32_t)r &&
                     stat(path, &st) == 0 && (size_t)st.st_size == start[r] && sv && slen == full_len - start[r];
            for (size_t i = 0; ok && i < dm.n_later; i++)   /* the records after it, as written */
                ok = recs[n + i].seq == (uint32_t)(r + 1 + i) && recs[n + i].len == sizes[r + 1 + i] &&
                     recs[n + i].offset == start[r + 1 + i];
            if (ok && r == 2 && w == 0) {   /* appending continues after the last valid record */
                ok = journal_append(&j, JOURNAL_DEPTH, "again", 5, err, sizeof err) == 0 &&
                     journal_sync(&j, err, sizeof err) == 0;
                journal_close(&j);
                free(recs);
                free(data);
                rc = journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
                ok &= rc == 0 && n == 3 && !dm.damaged && !dm.torn && recs[2].len == 5;
            }
            if (!ok && all_ok)
                printf("# record %d byte %d: rc %d n %zu damaged %d torn %d at %u later %zu (%s)\n", r, where[w], rc, n,
                       dm.damaged, dm.torn, dm.at_record, dm.n_later, err);
            all_ok &= ok;
            free(sv);
            free(recs);
            free(data);
            journal_close(&j);
            unlink(saved);
        }
    CHECK(all_ok, "one byte flipped in a middle record (length, seq, type, payload, CRC; records 1-4): the "
          "records before it kept, the ones after it found but not used; the file untouched until journal_cut "
          "saves the rest aside and cuts it off");
    /* journal_read_header reads a damaged journal's header */
    full[start[3] + 12] ^= 1;
    spit(path, full, full_len);
    char *hdr = NULL;
    size_t hlen = 0;
    CHECK(journal_read_header(DIR_, &hdr, &hlen, err, sizeof err) == 0 && hlen == 7 && !strcmp(hdr, "{\"h\":1}"),
          "a journal damaged in the middle: journal_read_header still returns the header (%s)", err);
    free(hdr);
    /* a damaged header: no valid record */
    full[start[3] + 12] ^= 1;
    full[3] ^= 1;
    spit(path, full, full_len);
    CHECK(journal_read_header(DIR_, &hdr, &hlen, err, sizeof err) == JOURNAL_E_CORRUPT && strstr(err, "no header"),
          "a damaged header record: no header (%s)", err);
    free(hdr);
    full[3] ^= 1;
    /* a search that cannot resynchronise (nothing valid after the damage) is a torn tail */
    journal_rec *recs = NULL;
    size_t n = 0, valid = 0;
    journal_damage dm;
    unsigned char junk[600];
    memcpy(junk, full, start[1]);
    memset(junk + start[1], 0x33, sizeof junk - start[1]);
    CHECK(journal_scan(junk, sizeof junk, &recs, &n, &valid, &dm, err, sizeof err) == 0 && n == 1 &&
          valid == start[1] && dm.torn && !dm.damaged && dm.n_later == 0, "garbage after the header: one torn record (n %zu valid %zu torn %d damaged %d later %zu)", n, valid, dm.torn, dm.damaged, dm.n_later);
    free(recs);
    free(full);
}

static void test_truncation(void) {
    journal j;
    char path[512], err[256] = "";
    fresh_dir();
    if (write_sample(&j)) return;
    journal_close(&j);
    snprintf(path, sizeof path, "%s/%s", DIR_, JOURNAL_FILE);
    size_t full_len = 0;
    unsigned char *full = slurp(path, &full_len);
    size_t last_start = full_len - (300 + JOURNAL_REC_OVERHEAD);
    int all_ok = 1, appended_ok = 1;
    for (size_t cut = last_start; cut < full_len; cut++) {
        spit(path, full, cut);
        unsigned char *data = NULL;
        size_t dlen = 0, n = 0;
        journal_rec *recs = NULL;
        journal_damage dm;
        int rc = journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
        struct stat st;
        int ok = rc == 0 && stat(path, &st) == 0 && (size_t)st.st_size == cut;   /* the open changes nothing */
        ok &= rc == 0 && journal_cut(&j, &dm, data, err, sizeof err) == 0;
        ok &= rc == 0 && n == 5 && dm.torn == (cut > last_start) && !dm.damaged && j.size == last_start &&
              stat(path, &st) == 0 && (size_t)st.st_size == last_start && !memcmp(data, full, last_start);
        if (!ok && all_ok) printf("# cut at %zu: rc %d n %zu torn %d (%s)\n", cut, rc, n, dm.torn, err);
        all_ok &= ok;
        free(recs);
        free(data);
        /* appending after the recovery gives a valid journal again */
        if (rc == 0 && cut % 50 == 7) {
            rc = journal_append(&j, JOURNAL_DEPTH, "again", 5, err, sizeof err) || journal_sync(&j, err, sizeof err);
            journal_close(&j);
            rc |= journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
            appended_ok &= rc == 0 && n == 6 && !dm.torn && recs[5].type == JOURNAL_DEPTH && recs[5].len == 5 &&
                           !memcmp(recs[5].data, "again", 5);
            free(recs);
            free(data);
        }
        journal_close(&j);
    }
    CHECK(all_ok, "truncated at each of the %zu bytes of the last record: the 5 records before it come back, "
          "the torn one is cut off the file", full_len - last_start);
    CHECK(appended_ok, "after such a recovery a new record appends and reads back");

    /* a flipped byte in the last record: torn (it reaches the end) */
    full[full_len - 5] ^= 1;
    spit(path, full, full_len);
    unsigned char *data = NULL;
    size_t dlen = 0, n = 0;
    journal_rec *recs = NULL;
    journal_damage dm;
    int rc = journal_open(&j, DIR_, &data, &dlen, &recs, &n, &dm, err, sizeof err);
    CHECK(rc == 0 && n == 5 && dm.torn && !dm.damaged && journal_cut(&j, &dm, data, err, sizeof err) == 0 && !dm.saved[0] &&
          j.size == full_len - (300 + JOURNAL_REC_OVERHEAD), "a bad CRC in the last record drops that record only, nothing saved aside");
    free(recs);
    free(data);
    journal_close(&j);
    full[full_len - 5] ^= 1;
    free(full);
    /* scanning a buffer: an empty file, an incomplete header */
    journal_rec *r = NULL;
    size_t nn = 9, valid = 9;
    journal_damage t;
    CHECK(journal_scan((const unsigned char *)"", 0, &r, &nn, &valid, &t, err, sizeof err) == 0 && nn == 0 &&
          valid == 0 && !t.torn, "an empty buffer: no records");
    free(r);
    CHECK(journal_scan((const unsigned char *)"\x05\0\0", 3, &r, &nn, &valid, &t, err, sizeof err) == 0 &&
          nn == 0 && valid == 0 && t.torn, "3 bytes: one torn record");
    free(r);
}

static void test_payload_and_files(void) {
    journal_buf b = { 0 };
    jbuf_u32(&b, 0xdeadbeef);
    jbuf_f64(&b, -1.5e-300);
    jbuf_str(&b, "abc", 3);
    jbuf_str(&b, "", 0);
    journal_rd r = { b.p, b.n, 0, 0 };
    uint32_t l1 = 0, l2 = 9;
    uint32_t u = jrd_u32(&r);
    double d = jrd_f64(&r);
    const unsigned char *s1 = jrd_str(&r, &l1);
    jrd_str(&r, &l2);
    CHECK(!r.bad && u == 0xdeadbeef && d == -1.5e-300 && l1 == 3 && !memcmp(s1, "abc", 3) && l2 == 0 && r.off == b.n,
          "payload fields round trip (u32, f64, strings)");
    jrd_u32(&r);
    CHECK(r.bad, "reading past the end marks the reader bad");
    free(b.p);

    char path[512], err[256];
    fresh_dir();
    snprintf(path, sizeof path, "%s/meta.json", DIR_);
    CHECK(journal_write_file(path, "{}\n", 3, err, sizeof err) == 0, "journal_write_file writes");
    size_t n = 0;
    unsigned char *t = slurp(path, &n);
    CHECK(t && n == 3 && !memcmp(t, "{}\n", 3) && access("/tmp/strata_test_journal/meta.json.tmp", F_OK) != 0,
          "the file has the bytes and no .tmp is left");
    free(t);
    CHECK(journal_write_file("/tmp/strata_no_such_dir/x", "a", 1, err, sizeof err) == JOURNAL_E_IO &&
          strstr(err, "cannot create"), "a failed write says why: %s", err);
}

int main(void) {
    test_crc();
    test_roundtrip();
    test_truncation();
    test_damage();
    test_payload_and_files();
    return check_done();
}
