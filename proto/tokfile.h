/* tokfile.h — the token-ids text format that strata-worker --tokens-file and strata-driver
 * --tokens-file both read: decimal ids in [0, INT32_MAX] separated by commas and/or whitespace
 * (what `strata-worker --tokenize` prints). A file with no id is an error for both.
 */
#ifndef STRATA_TOKFILE_H
#define STRATA_TOKFILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads path into *ids[*n] (malloc'd here; the caller frees with free()). path must be a regular
 * file (a FIFO, device or directory is refused at once, not waited on: proto/safeio.h) of at most
 * PROTO_MAX_TEXT bytes. Returns 0, or -1 with one clear message in err (nothing is allocated then). */
int tokfile_read(const char *path, int32_t **ids, size_t *n, char *err, size_t errlen);

/* The same parse over a buffer text[len] (need not be NUL-terminated); `name` names it in
 * messages. */
int tokfile_parse(const char *name, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                  size_t errlen);

#endif
