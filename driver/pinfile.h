/* pinfile.h — a file of expert routing for `strata-driver sweep --pin-experts=FILE`
 * (docs/DESIGN.md §2.6): the experts a mixture-of-experts reference arm chose at every
 * teacher-forced position of a document, recorded by one run and replayed by later ones, so that
 * runs with different arms (or on other machines) use one fixed expert set.
 *
 * Layout (all integers little-endian):
 *     header  "STRATAPN"  u32 version (1)  u32 n_layer  u32 n_expert  u32 n_expert_used
 *             char model_sha256[64] (hex, the reference arm's model file)          88 bytes
 *     then one record per position p = 0, 1, ...:
 *             i32 token (the document's token at p)  i32 experts[n_layer][n_expert_used]
 *             (slot order: the router's largest weight first)
 *
 * Recording writes FILE.part, appends each chunk and fsyncs it before the sweep journals that
 * chunk, and renames it to FILE when the sweep completes; a resumed recording cuts FILE.part back
 * to the journalled position. A FILE that exists is replayed: its header must match the model and
 * its tokens the document, position by position. */
#ifndef STRATA_PINFILE_H
#define STRATA_PINFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pinfile pinfile;   /* opaque */

enum { PINFILE_OK = 0, PINFILE_ERROR = 1 };

/* Opens path for replay when it exists, else creates (or, keep > 0, continues) path.part for
 * recording, keeping its first keep positions (a resumed run's journalled position; the file must
 * hold at least that many). The header is checked against, or written from, n_layer, n_expert,
 * n_expert_used and model_sha256. Allocates *out (free with pinfile_close). Returns PINFILE_OK, or
 * PINFILE_ERROR with one line in err naming the file. */
int pinfile_open(const char *path, uint32_t n_layer, uint32_t n_expert, uint32_t n_expert_used,
                 const char *model_sha256, int64_t keep, pinfile **out, char *err, size_t errlen);

/* 1 when the file is replayed, 0 when it is being recorded. */
int pinfile_replaying(const pinfile *f);

/* Positions the file holds. */
int64_t pinfile_positions(const pinfile *f);

/* Replay: the experts of positions pos..pos+m-1 into experts [m][n_layer * n_expert_used] (the
 * caller's), after checking that the file's tokens there are tokens[0..m-1]. Returns PINFILE_OK or
 * PINFILE_ERROR (past the file's end, another document, an I/O error). */
int pinfile_read(pinfile *f, int64_t pos, int m, const int32_t *tokens, int32_t *experts, char *err,
                 size_t errlen);

/* Replay: checks that the file's tokens at positions 0..n-1 are tokens[0..n-1] (n <= the file's
 * positions), reading a few thousand records at a time. Returns PINFILE_OK or PINFILE_ERROR naming
 * the first position that differs. */
int pinfile_check_tokens(pinfile *f, const int32_t *tokens, int64_t n, char *err, size_t errlen);

/* Recording: positions pos..pos+m-1 with their tokens [m] and experts [m][n_layer * n_expert_used].
 * Positions the file already holds (a rebuilt reference arm after a worker restart) must match
 * what is stored; new ones are appended and fsync'd. pos may not lie past the file's end. Returns
 * PINFILE_OK or PINFILE_ERROR. */
int pinfile_record(pinfile *f, int64_t pos, int m, const int32_t *tokens, const int32_t *experts, char *err,
                   size_t errlen);

/* Recording: fsyncs and renames path.part to path (the sweep is complete). Replay: nothing.
 * Returns PINFILE_OK or PINFILE_ERROR. */
int pinfile_finish(pinfile *f, char *err, size_t errlen);

/* Closes the file and frees f (a recording left unfinished stays as path.part); NULL is a no-op. */
void pinfile_close(pinfile *f);

#endif
