/* journal.h — the sweep's journal: an append-only file of checksummed records in the results
 * folder (DIR/journal), written as the sweep measures and fsync'd before anything claims the
 * records as done. `strata-driver sweep --resume DIR` rebuilds the TSVs from it and continues.
 *
 * Record layout (all integers little-endian):
 *
 *   offset  size  field
 *   0       4     length L   payload bytes (at most JOURNAL_MAX_PAYLOAD)
 *   4       4     seq        0, 1, 2, ... (the record's index in the file)
 *   8       4     type       JOURNAL_HEADER, JOURNAL_CHUNK, ...
 *   12      L     payload
 *   12+L    4     crc        CRC32C (Castagnoli) of bytes [0, 12+L)
 *
 * Record 0 is the header; the payload layouts of the sweep's records are in sweep_journal.c's
 * "journal records" section. Reading stops at the first record that is incomplete or fails its checks
 * (length, seq, CRC): that record ends the journal, and the records before it are kept. When
 * nothing valid follows it, it is a torn append (a crash or a full disk during the write); when
 * well-formed records follow it (found by the damaged record's own length, else by a bounded
 * search for the next sequence number), the file is damaged in the middle: the records after the
 * damage are reported (journal_damage) but not used. journal_open changes nothing in the file;
 * journal_cut (once the caller has checked the journal) saves the bytes after a damaged record in
 * DIR/journal.damaged.<byte> and cuts everything after the valid records off.
 *
 * The journal module knows nothing about sweeps: framing, checksums, the file and its lock.
 * A journal being written is locked (flock LOCK_EX), so a second driver cannot resume a folder
 * in use. Nothing here keeps global state; the CRC table is a constant.
 */
#ifndef STRATA_JOURNAL_H
#define STRATA_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JOURNAL_FILE        "journal"
#define JOURNAL_REC_OVERHEAD 16u                  /* length, seq, type, crc */
#define JOURNAL_MAX_PAYLOAD ((uint32_t)1 << 30)

/* Record types. */
enum { JOURNAL_HEADER = 1, JOURNAL_CHUNK = 2, JOURNAL_DEPTH = 3, JOURNAL_WARNING = 4,
       JOURNAL_RESUME = 5, JOURNAL_PASSAGES = 6 };

/* Error codes (beside 0). */
enum { JOURNAL_E_IO = 1, JOURNAL_E_CORRUPT = 2, JOURNAL_E_BUSY = 3, JOURNAL_E_MISSING = 4 };

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of buf [len], continuing from crc
 * (start with 0): crc32c(0, "123456789", 9) == 0xE3069283. Table-driven, one byte at a time. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* One record found by journal_scan: data points into the scanned buffer (not a copy). */
typedef struct {
    uint32_t type, seq, len;
    const unsigned char *data;   /* [len] */
    uint64_t offset;             /* of the record's first byte in the file */
} journal_rec;

/* What a scan dropped after the valid records (all 0 when nothing was dropped). */
typedef struct {
    int torn;               /* 1: the dropped bytes hold no valid record: a torn append, cut off */
    int damaged;            /* 1: a failing record with bytes after it (damage in the middle) */
    uint32_t at_record;     /* the failing record's index (= the number of valid records) */
    uint64_t at_byte;       /* its offset in the file */
    uint64_t bytes;         /* bytes dropped (from at_byte to the end) */
    uint32_t type_read;     /* the failing record's type field as read (0 when too short) */
    const char *why;        /* "fails its CRC32C", ... (a static string), or NULL */
    size_t n_later;         /* well-formed records found after the damage: recs[n .. n + n_later) */
    int later_complete;     /* 1: they reach the end of the file (so n_later counts them all) */
    char saved[4200];       /* journal_open: the file the dropped bytes were saved in ("" if none) */
} journal_damage;

/* Scans a whole journal file buf [len]. On success *recs (malloc'd, [*n + d->n_later]; the caller
 * frees it, also when *n is 0) holds the valid records, then the records found after a damaged one
 * (not part of the journal: for messages only); *valid = the bytes the valid records span (a
 * prefix of buf); *d says what was dropped. Returns 0, or JOURNAL_E_IO (out of memory). */
int journal_scan(const unsigned char *buf, size_t len, journal_rec **recs, size_t *n,
                 size_t *valid, journal_damage *d, char *err, size_t errlen);

/* An open journal. */
typedef struct {
    int fd;              /* -1 when closed; O_APPEND, flock'd LOCK_EX */
    uint32_t next_seq;
    uint64_t size;       /* bytes of whole records in the file */
    uint64_t file_size;  /* bytes in the file; above size until journal_cut drops the rest */
    int dirty;           /* appended since the last journal_sync */
    int broken;          /* a write failed: no further appends */
    char path[4096];
} journal;

/* Creates DIR/journal (it must not exist), locks it, writes the header record (payload
 * header [len]) and fsyncs the file and the directory. Returns 0, or JOURNAL_E_IO with a message. */
int journal_create(journal *j, const char *dir, const void *header, size_t len, char *err,
                   size_t errlen);

/* Opens an existing DIR/journal for appending: locks it (JOURNAL_E_BUSY when another process
 * holds it), reads it whole into *data (malloc'd [*data_len]; the caller frees it after using
 * *recs) and scans it (journal_scan) into *recs [*n] (caller frees; the records after a damage
 * follow them, d->n_later). The file is not changed: when bytes follow the valid records,
 * journal_cut must drop them before anything is appended. Returns 0; JOURNAL_E_MISSING (no
 * journal), JOURNAL_E_BUSY or JOURNAL_E_IO with a message (j closed then, nothing allocated). */
int journal_open(journal *j, const char *dir, unsigned char **data, size_t *data_len,
                 journal_rec **recs, size_t *n, journal_damage *d, char *err, size_t errlen);

/* After journal_open, once the caller has checked the journal: when d says the file was damaged in
 * the middle, saves the bytes after the valid records (from data, journal_open's buffer) in
 * DIR/journal.damaged.<byte> (named in d->saved, written durably); then cuts everything after the
 * valid records off the file (ftruncate + fsync), so appends follow the last valid record.
 * Nothing to cut: 0 at once. Returns 0 or JOURNAL_E_IO with a message. */
int journal_cut(journal *j, journal_damage *d, const unsigned char *data, char *err, size_t errlen);

/* Reads the payload of record 0 of DIR/journal (without locking) into *payload (malloc'd, NUL
 * added, [*len + 1]; caller frees). Returns 0, JOURNAL_E_MISSING, JOURNAL_E_CORRUPT (no valid
 * header record) or JOURNAL_E_IO with a message. */
int journal_read_header(const char *dir, char **payload, size_t *len, char *err, size_t errlen);

/* 1 when DIR/journal exists and a process holds its lock (a sweep is writing the folder), else 0. */
int journal_in_use(const char *dir);

/* Appends one record (one write of the whole record; not synced). On a failed or short write the
 * file is cut back to its last whole record where possible and the journal is marked broken.
 * Returns 0 or JOURNAL_E_IO with a message naming the file and the errno text. */
int journal_append(journal *j, uint32_t type, const void *payload, size_t len, char *err,
                   size_t errlen);

/* Test hook: writes only the first keep bytes of the record journal_append would write, fsyncs,
 * and marks the journal broken (a crash mid-write). Returns 0 or JOURNAL_E_IO. */
int journal_append_torn(journal *j, uint32_t type, const void *payload, size_t len, size_t keep,
                        char *err, size_t errlen);

/* fdatasync when records were appended since the last sync. Returns 0 or JOURNAL_E_IO. */
int journal_sync(journal *j, char *err, size_t errlen);

/* Closes (and unlocks) the journal; safe on a closed one. */
void journal_close(journal *j);

/* Writes path durably and atomically: path.tmp, fsync, rename over path, fsync of the directory.
 * On failure path.tmp is removed. Returns 0 or JOURNAL_E_IO with a message. */
int journal_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* fsync of an open stdio stream (after fflush). Returns 0 or -1 (errno set). */
int journal_fsync_stream(FILE *f);

/* ---- payload encoding: little-endian fields into a growing buffer ---------------------------- */

typedef struct {
    unsigned char *p;    /* malloc'd [cap]; free with free() */
    size_t n, cap;
    int oom;             /* an append failed: the buffer is incomplete */
} journal_buf;

void jbuf_u32(journal_buf *b, uint32_t v);
void jbuf_f64(journal_buf *b, double v);
void jbuf_bytes(journal_buf *b, const void *data, size_t len);   /* raw, no length prefix */
void jbuf_str(journal_buf *b, const void *data, size_t len);     /* u32 length, then the bytes */

/* Reading a payload back: each call consumes its field; on a short payload it sets r->bad and
 * returns 0 / NULL. */
typedef struct {
    const unsigned char *p;
    size_t n, off;
    int bad;
} journal_rd;

uint32_t jrd_u32(journal_rd *r);
double jrd_f64(journal_rd *r);
const unsigned char *jrd_str(journal_rd *r, uint32_t *len);   /* a jbuf_str field, not a copy */

#endif
