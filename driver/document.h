/* document.h — the document a sweep measures (docs/DESIGN.md §8).
 *
 * One of:
 *   --corpus kjv       (the default) the King James Bible from Debian's bible-kjv package:
 *                      `bible -f Gen1:1-Rev22:21`, verse labels ("Ge1:1 ") stripped, one verse per
 *                      line, 4,137,850 bytes; the same text on every machine and for every version
 *                      of strata (its sha256 is checked against DOC_KJV_SHA256)
 *   --corpus perldoc   technical prose: Perl 5.36's documentation from Debian's perl-doc package,
 *                      the pod files DOC_PERLDOC_FILES of DOC_PERLDOC_DIR concatenated in that order
 *                      (1,305,123 bytes, sha256 checked against DOC_PERLDOC_SHA256; the package
 *                      version goes into the description)
 *   --corpus self      strata's own README.md, docs (*.md) and C sources (changes with the code)
 *   --corpus DIR       every regular text file under DIR, sorted by path, concatenated
 *   --doc FILE         one text file
 *   --tokens-file F    token ids (proto/tokfile.h)
 * Text is tokenised later by the reference worker (BOS added); token ids are used as they are.
 */
#ifndef STRATA_DOCUMENT_H
#define STRATA_DOCUMENT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* sha256 of the KJV text that `--corpus kjv` yields with Debian 12's bible-kjv 4.38. */
#define DOC_KJV_SHA256 "b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d"
/* the program that prints it, and its arguments */
#define DOC_KJV_COMMAND "bible -f Gen1:1-Rev22:21"

/* --corpus perldoc: the files (DOC_PERLDOC_DIR/NAME.pod, in this order: an introduction, the
 * language reference, the regular expressions, references and objects, modules, IPC, security),
 * and the sha256 of their concatenation with Debian 12's perl-doc 5.36.0-7+deb12u4 */
#define DOC_PERLDOC_DIR "/usr/share/perl/5.36/pod"
#define DOC_PERLDOC_FILES "perlintro perlsyn perldata perlop perlsub perlfunc perlvar perlre perlretut " \
                          "perlref perlobj perlmod perlipc perlsec"
#define DOC_PERLDOC_SHA256 "bd44ed266ccda99af956df64c3a9ada02380b1f769d60940e219f8cace365a52"

typedef struct {
    char *text;          /* [n_text + 1] malloc'd, NUL-terminated; NULL for token ids */
    size_t n_text;
    int32_t *tokens;     /* [n_tokens] malloc'd; only for --tokens-file, else NULL */
    size_t n_tokens;
    char path[PATH_MAX]; /* the file, folder or corpus measured ("kjv" for the Bible) */
    char desc[1024];     /* one line for meta.json: what it is, its size, the sha256 of the text */
    int kjv_mismatch;    /* 1: --corpus kjv produced a text other than DOC_KJV_SHA256 */
    int perldoc_mismatch;/* 1: --corpus perldoc produced a text other than DOC_PERLDOC_SHA256 */
} doc_t;

/* Loads the document named by at most one of doc_file, corpus, tokens_file (all NULL: the
 * default, corpus "kjv"; "perldoc" and "self" are the other named corpora). repo_root is strata's source tree, for --corpus self. Fills *d (the
 * caller frees with doc_free, also after an error). Returns 0, or -1 with one clear message. */
int doc_load(const char *doc_file, const char *corpus, const char *tokens_file, const char *repo_root,
             doc_t *d, char *err, size_t errlen);

void doc_free(doc_t *d);

/* sha256 of data[len] as 64 lowercase hex digits into out[65]. */
void doc_sha256_hex(const void *data, size_t len, char *out);

/* Removes the verse label at the start of each line of a `bible -f` listing: an optional digit,
 * letters, digits, ':', digits and one space ("2Ki3:4 ", "SSol1:1 "). Lines without one stay.
 * In place; returns the new length. */
size_t doc_strip_verse_labels(char *text, size_t len);

#endif
