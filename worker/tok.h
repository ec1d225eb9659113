/* tok.h — tokenizers built from a GGUF file's tokenizer.ggml.* metadata, token for token compatible
 * with llama.cpp's (its test-tokenizer-0 suites pass).
 *
 *   tokenizer.ggml.model = "llama": SentencePiece-style BPE over scores (SPM). Spaces become U+2581
 *     ('▁'), a leading space is added when tokenizer.ggml.add_space_prefix (default true) and the text
 *     starts a fragment, pieces merge best score first (ties: leftmost), characters without a piece
 *     fall back to <0xXX> byte tokens (unknown token if the vocab has none). Gemma 3 uses this too
 *     (add_space_prefix = false, many user-defined tokens).
 *   tokenizer.ggml.model = "gpt2": byte-level BPE with tokenizer.ggml.merges in rank order. The text is
 *     first split by the pre-tokenizer regexes named by tokenizer.ggml.pre (PCRE2, UTF + UCP), each
 *     piece is mapped byte -> printable code point (GPT-2's table) and merged lowest rank first.
 *
 * Special tokens: user-defined tokens (token_type 4) are always cut out of the text first, longest
 * first, as llama.cpp and HF tokenizers do; control (3) and unknown (2) tokens only when parse_special.
 *
 * Known differences from llama.cpp, all outside valid-UTF-8 ordinary text: invalid UTF-8 becomes
 * U+FFFD before BPE pre-tokenization (as llama.cpp) but so do UTF-16 surrogates and code points above
 * U+10FFFF (llama.cpp keeps the former, throws on the latter); the regex classes use PCRE2's Unicode
 * tables (\s includes U+180E; code points unassigned in llama.cpp's tables are treated as ordinary
 * symbols); the per-model lstrip/rstrip quirks (phi-3, jina) are not applied.
 *
 * A tok_vocab is read-only after tok_load: any number of threads may encode/decode concurrently.
 */
#ifndef STRATA_TOK_H
#define STRATA_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "worker/gguf.h"

typedef struct tok_vocab tok_vocab;   /* opaque */

/* Token types as stored in tokenizer.ggml.token_type. */
enum {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6,
};

/* Builds the tokenizer from g's metadata. Copies everything it needs: g may be closed afterwards.
 * On success returns 0 and *out is a new vocab the caller frees with tok_free(). On failure returns
 * -1, *out = NULL, and err[errlen] names what is missing or unsupported (e.g. an unknown
 * tokenizer.ggml.pre). */
int tok_load(const gguf_file *g, tok_vocab **out, char *err, size_t errlen);

/* Frees v and everything it owns; NULL is a no-op. */
void tok_free(tok_vocab *v);

/* Tokenises text[len] (UTF-8 expected; any bytes accepted, invalid ones never crash) into a new
 * malloc'd array *ids (the caller frees it; NULL when *n = 0) of *n token ids.
 *   add_bos: add the special tokens the model asks for, as llama.cpp's add_special does: BOS first
 *            when tok_add_bos(v), EOS last when tokenizer.ggml.add_eos_token is true.
 *   parse_special: also cut control/unknown token strings ("<|im_end|>", "<s>") out of the text.
 *            llama.cpp's test-tokenizer-0 suites use add_bos = 0, parse_special = 0; its
 *            llama-results/perplexity tools tokenise documents with add_bos = 1, parse_special = 0
 *            (and its -f option drops one trailing '\n' of the file before tokenising).
 * Returns 0, or -1 with err[errlen] set (out of memory, text over 2^31 bytes, a regex failure, or
 * a model that asks for BOS without having one). */
int tok_encode(const tok_vocab *v, const char *text, size_t len, int add_bos, int parse_special,
               int32_t **ids, size_t *n, char *err, size_t errlen);

/* An upper bound on the count tok_encode returns for any text of len bytes (with BOS and EOS), from
 * the length alone: SPM 4 len + 5 (a byte may become '▁', 3 bytes, each falling back to a byte
 * token; a space prefix after each special token), BPE 3 len + 2 (an invalid byte becomes U+FFFD).
 * A server refuses a text whose bound exceeds its reply cap before tokenising it. */
size_t tok_max_tokens(const tok_vocab *v, size_t len);

/* Appends the bytes of token id to buf: writes at buf + *len, adds their count to *len, writes no
 * NUL (tokens may contain any byte). SPM: '▁' -> ' ', <0xAB> byte tokens -> the byte; BPE: byte-level
 * code points -> bytes; control, unknown and user-defined tokens -> their text as stored ("<s>");
 * unused/undefined tokens -> nothing. Returns 0, or -1 with *len unchanged if id is out of range or
 * the bytes do not fit in buflen - *len (bytes past *len may have been overwritten). A token's bytes
 * are at most tok_max_piece(v) long. SPM pieces keep their '▁' -> ' ' (a text encoded with the space
 * prefix decodes with a leading ' '); a '▁' that fell back to byte tokens decodes as its 3 bytes. */
int tok_decode(const tok_vocab *v, int32_t id, char *buf, size_t buflen, size_t *len);

int tok_n_vocab(const tok_vocab *v);
int tok_bos(const tok_vocab *v);           /* -1 if the model has none */
int tok_eos(const tok_vocab *v);           /* -1 if the model has none */
int tok_add_bos(const tok_vocab *v);       /* 1 if the model wants BOS prepended */
size_t tok_max_piece(const tok_vocab *v);  /* longest decoded token, in bytes */
int tok_type(const tok_vocab *v, int32_t id);  /* TOK_TYPE_*, -1 if id out of range */

/* sha256 (lowercase hex, NUL-terminated) of everything that decides tokenization: model kind,
 * pre-tokenizer name, add_bos/add_eos/add_space_prefix, bos/eos/unk ids, every token's bytes, score
 * and type, every merge. Two vocabs with equal hashes tokenise every text identically. The handshake's
 * tokenizer hash. */
void tok_hash(const tok_vocab *v, char hex[65]);

#endif
