/* codec.h — the driver <-> worker messages and their bytes: message structs, msgpack encode and
 * decode, the caps and the status codes. No sockets: implemented in proto/codec.c (the message
 * basics, encode) and proto/decode.c (untrusted bytes in: the bounded scan, the field getters,
 * decode); the nng transport is proto/transport.h, and proto/proto.h includes both.
 *
 * Why a header of its own: it includes no nng, so code that only turns messages into bytes and
 * back (a fuzzer, a seed maker, a test of the format) can include this alone, and a reader of the
 * wire format finds all of it here, apart from how the bytes travel.
 *
 * Ownership: a message filled by proto_decode owns its payloads (malloc'd here, released by
 * proto_msg_free); a message built to encode points at the caller's memory, which the encoder only
 * reads. proto_encode's buffer is malloc'd here and freed by the caller with free();
 * proto_encode_into writes into a buffer the caller allocated.
 *
 * Wire format (protocol version PROTO_VERSION = 1): every message is one msgpack map with string
 * keys. Common keys: "v" (uint, the version), "type" (str), "id" (uint64; a reply carries the id of
 * its request). Bulk data travels as msgpack BIN of little-endian int32 (token ids) or float32
 * (logit rows, gaps). Requests and their replies share the type string; a failed request gets a
 * reply of type "error" {code int, message str}. Unknown keys are ignored; duplicate keys, missing
 * or mistyped required keys are errors.
 *
 *   type      request                                   reply
 *   hello     {}                                        engine git model_sha256 arch tokenizer_hash
 *                                                       kv_k kv_v device (str); n_vocab n_ctx n_layer
 *                                                       threads kv_bytes_per_token (uint); bos (int);
 *                                                       kv_layers (str, optional);
 *                                                       n_expert n_expert_used (uint, optional: 0 =
 *                                                       a dense model or an older worker);
 *                                                       window layers_full_context (uint, optional,
 *                                                       both or neither: the sliding window, 0 =
 *                                                       none, and the layers that read the whole
 *                                                       context; absent = unknown)
 *   tokenize  text (str or bin), add_bos (bool),        tokens (bin int32)
 *             special (bool, optional: parse special-token texts such as "<|im_start|>")
 *   vocab     {}                                        n_vocab (uint); pieces (bin: every token's
 *                                                       decoded bytes, concatenated); offsets (bin
 *                                                       int32 [n_vocab + 1]); control (bin int32
 *                                                       [n_vocab], 1 = a control token); chat_template
 *                                                       (str or bin, "" when the model has none)
 *   prefill   tokens (bin int32), rows (uint 0/1/2)     n_past n_vocab n_rows (uint),
 *             experts (bool, optional: reply with the   logits (bin float32 [n_rows][n_vocab]);
 *             routing), pin (bin int32 [n_tokens]       experts (bin int32 [n_tokens][n_layer][k],
 *             [n_layer][k], optional: the experts to    only when asked: each token's experts per
 *             use; MoE models, docs/DESIGN.md §7.2)     layer, slot order)
 *   generate  n (uint), temperature (f64), seed (uint), tokens (bin int32 [n]), gaps (bin float32 [n]),
 *             top_p (f64, optional, in (0, 1])          n_past (uint)
 *   truncate  depth (uint)                              n_past (uint)
 *   stats     {}                                        n_past kv_bytes prefill_tokens decode_tokens
 *                                                       peak_rss (uint); prefill_seconds
 *                                                       decode_seconds (f64); rechunk_rows (uint)
 *                                                       and rechunk_max (f64), optional, both or
 *                                                       neither: the batch variance a backend showed
 *   shutdown  {}                                        {}
 *
 * Untrusted bytes: before msgpack-c sees a message, proto_decode walks it with a bounded scanner:
 * the message must be at most max_len bytes, every str/bin length and every array/map count must fit
 * in the bytes actually present (each element takes at least one byte), nesting is at most
 * PROTO_MAX_DEPTH, the whole message at most PROTO_MAX_OBJECTS objects, ext types and the reserved
 * byte 0xc1 are refused, and the message must end exactly where the top-level map ends. So msgpack-c
 * never allocates more than a few KiB for any input.
 *
 * Numeric caps (a decoded message exceeding one gets PROTO_E_TOOBIG):
 *   tokens per prefill request / tokenize reply   PROTO_MAX_TOKENS   = 1<<24
 *   tokenize text bytes                           PROTO_MAX_TEXT     = 1<<26
 *   generate n (and generate reply length)        PROTO_MAX_GENERATE = 1<<20
 *   n_vocab in a prefill reply                    PROTO_MAX_VOCAB    = 1<<22
 *   rows in a prefill reply                       PROTO_MAX_TOKENS
 *   prefill pin / experts entries                 PROTO_MAX_ROUTES   = 1<<24 (64 MiB of int32)
 * Strings of the hello reply are at most PROTO_STR_MAX-1 bytes (longer ones are an error); an error
 * message longer than PROTO_ERRMSG_MAX-1 bytes is cut short on decode.
 *
 * This module assumes a little-endian host (checked at compile time).
 */
#ifndef STRATA_PROTO_CODEC_H
#define STRATA_PROTO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION      1
#define PROTO_MAX_TOKENS   (1u << 24)
#define PROTO_MAX_TEXT     (1u << 26)
#define PROTO_MAX_GENERATE (1u << 20)
#define PROTO_MAX_VOCAB    (1u << 22)
#define PROTO_MAX_TEMPLATE (1u << 20)  /* chat_template bytes in a vocab reply */
#define PROTO_MAX_ROUTES   (1u << 24)  /* expert ids in a prefill pin / experts (tokens x layers x k) */
#define PROTO_MAX_DEPTH    8            /* msgpack nesting levels below the top-level object */
#define PROTO_MAX_OBJECTS  256          /* msgpack objects (keys and values) per message */
#define PROTO_STR_MAX      128          /* hello reply strings, NUL included */
#define PROTO_ERRMSG_MAX   512          /* error reply message, NUL included */
#define PROTO_REQ_MAX      ((size_t)64 << 20)  /* suggested request cap for the worker: 64 MiB */
#define PROTO_SLACK        ((size_t)64 << 10)  /* bytes to add to a payload size for keys/headers */
#define PROTO_REQ_FRAME_MAX ((size_t)4 * PROTO_MAX_TOKENS + (size_t)4 * PROTO_MAX_ROUTES + PROTO_SLACK)
                           /* the largest request proto_encode makes (a prefill of PROTO_MAX_TOKENS
                              int32 tokens pinned with PROTO_MAX_ROUTES int32 expert ids, 128 MiB; a
                              tokenize text is at most half of it) plus PROTO_SLACK: a server whose nng frame limit is this can answer
                              every such request, PROTO_E_TOOBIG when over its own cap */

/* Status / error codes. 0 is success. Codes 1..6 and 9 travel in error replies; PROTO_E_TRANSPORT
 * and PROTO_E_TIMEOUT are local only (nng failures) and are never sent. */
enum {
    PROTO_OK          = 0,
    PROTO_E_BADMSG    = 1,   /* malformed: not msgpack, wrong key types, missing keys, unknown type */
    PROTO_E_TOOBIG    = 2,   /* message or a count over its cap */
    PROTO_E_BADARG    = 3,   /* well-formed but a value is not allowed (rows = 3, temperature NaN) */
    PROTO_E_RANGE     = 4,   /* valid request the engine cannot serve (depth > n_past, context full) */
    PROTO_E_INTERNAL  = 5,   /* the worker could not allocate a reply buffer (engine failures in a
                                forward pass travel as PROTO_E_RANGE with their message) */
    PROTO_E_VERSION   = 6,   /* "v" is not PROTO_VERSION */
    PROTO_E_TRANSPORT = 7,   /* local: nng send/recv/dial failed (peer gone, socket closed) */
    PROTO_E_TIMEOUT   = 8,   /* local: nng timed out */
    PROTO_E_BUSY      = 9,   /* the worker serves another driver (one owner per worker) */
};

typedef enum {
    PROTO_NONE = 0,          /* a zeroed / failed message */
    PROTO_HELLO, PROTO_TOKENIZE, PROTO_PREFILL, PROTO_GENERATE, PROTO_TRUNCATE, PROTO_STATS,
    PROTO_SHUTDOWN,
    PROTO_ERROR,             /* always a reply */
    PROTO_VOCAB,             /* the tokenizer's pieces and the chat template (the driver tokenises
                                and decodes nothing itself) */
} proto_type;
#define PROTO_N_TYPES ((int)PROTO_VOCAB + 1)   /* proto_type values are 0 .. PROTO_N_TYPES-1 */

/* prefill "rows": which logit rows the reply carries */
enum { PROTO_ROWS_NONE = 0, PROTO_ROWS_LAST = 1, PROTO_ROWS_ALL = 2 };

typedef struct {
    char engine[PROTO_STR_MAX];
    char git[PROTO_STR_MAX];
    char model_sha256[PROTO_STR_MAX];
    char arch[PROTO_STR_MAX];
    char tokenizer_hash[PROTO_STR_MAX];
    char kv_k[PROTO_STR_MAX];
    char kv_v[PROTO_STR_MAX];
    char device[PROTO_STR_MAX];
    uint32_t n_vocab;
    uint64_t n_ctx;                    /* max context */
    uint32_t n_layer;
    uint32_t threads;
    uint64_t kv_bytes_per_token;       /* all layers, K and V */
    int32_t bos;                       /* BOS token id or -1 */
    uint32_t n_expert, n_expert_used;  /* MoE: experts per layer, per token; 0, 0: dense (or a
                                          worker that does not send them) */
    char kv_layers[PROTO_STR_MAX];     /* the layers with a KV cache: "all", or e.g. "2 of 4: 1,3" for a
                                          hybrid model (optional; "" from a worker that does not send it) */
    int has_window;                    /* 1: window and layers_full below were sent; 0: unknown (a worker
                                          that does not send them, or a backend that cannot say; the keys
                                          "window" and "layers_full_context" are then absent) */
    uint32_t window;                   /* the sliding window of the layers that slide, the largest (such a
                                          layer reads the last `window` positions), 0 = none slides */
    uint32_t layers_full;              /* the layers that read the whole context (n_layer when none
                                          slides) */
} proto_hello_rep;

typedef struct {
    char *text;                        /* [n_text] bytes (any bytes; decode adds a NUL after them) */
    size_t n_text;
    int add_bos;                       /* 0 or 1 */
    int special;                       /* 0 or 1: special tokens' texts become those tokens (the key
                                          is sent only when 1; absent = 0) */
} proto_tokenize_req;

typedef struct {
    int32_t *tokens;                   /* [n_tokens] */
    size_t n_tokens;
} proto_tokenize_rep;

/* The tokenizer as data: token t decodes to pieces[offsets[t] .. offsets[t+1]) (the worker's
 * tok_decode of t alone; pieces are position-independent, so a stream decodes to the concatenation). */
typedef struct {
    uint32_t n_vocab;
    char *pieces;                      /* [n_pieces] (+ a NUL on decode) */
    size_t n_pieces;
    int32_t *offsets;                  /* [n_vocab + 1], 0 = offsets[0] <= ... <= offsets[n_vocab] = n_pieces */
    int32_t *control;                  /* [n_vocab] 1: a control token (EOS, end of turn), else 0 */
    char *chat_template;               /* [n_template] (+ a NUL on decode); n_template 0: none */
    size_t n_template;
} proto_vocab_rep;

typedef struct {
    int32_t *tokens;                   /* [n_tokens] */
    size_t n_tokens;
    uint32_t rows;                     /* PROTO_ROWS_* */
    int experts;                       /* 1: the reply carries the routing (sent only when 1) */
    int32_t *pin;                      /* [n_pin] = [n_tokens][n_layer][n_expert_used] the experts each
                                          token uses, or NULL (sent only when not NULL); the worker
                                          checks the count and the ids */
    size_t n_pin;
} proto_prefill_req;

typedef struct {
    uint64_t n_past;                   /* cache depth after the prefill */
    uint32_t n_vocab;
    uint32_t n_rows;
    float *logits;                     /* [n_rows][n_vocab] */
    int32_t *experts;                  /* [n_experts] = [n_tokens][n_layer][n_expert_used], slot order;
                                          NULL / 0 when not asked for (or a dense model) */
    size_t n_experts;
} proto_prefill_rep;

typedef struct {
    uint32_t n;                        /* tokens to generate, <= PROTO_MAX_GENERATE */
    double temperature;                /* finite, >= 0 */
    uint64_t seed;
    double top_p;                      /* the nucleus cut (kernels/sample.h): 0 (a zeroed request)
                                          or 1 = none; sent only when 0 < top_p < 1; a decoded
                                          request without the key has 0 */
} proto_generate_req;

typedef struct {
    int32_t *tokens;                   /* [n] */
    float *gaps;                       /* [n] top-1 minus top-2 logit at each generated step */
    size_t n;
    uint64_t n_past;
} proto_generate_rep;

typedef struct { uint64_t depth; } proto_truncate_req;
typedef struct { uint64_t n_past; } proto_truncate_rep;

typedef struct {
    uint64_t n_past;
    uint64_t kv_bytes;
    uint64_t prefill_tokens;
    double prefill_seconds;
    uint64_t decode_tokens;
    double decode_seconds;
    uint64_t peak_rss;                 /* bytes */
    int has_rechunk;                   /* 1: the two below are present (a backend that needs aligned
                                        * prefills, worker/engine.h); 0: absent (a batch-invariant one) */
    uint64_t rechunk_rows;             /* rows recomputed in a longer chunk and compared */
    double rechunk_max;                /* the largest |logit difference| between the two (>= 0, or NaN) */
} proto_stats_rep;

typedef struct {
    int32_t code;                      /* PROTO_E_* (a peer may send codes this build does not know) */
    char message[PROTO_ERRMSG_MAX];
} proto_error_rep;

/* One message. Which union member is valid follows from (type, is_reply); hello, stats and
 * shutdown requests and the shutdown reply carry no fields.
 * Ownership: the pointers (tokenize_req.text, *.tokens, prefill_rep.logits, prefill_rep.experts,
 * prefill_req.pin, generate_rep.gaps) of a
 * message filled by proto_decode/proto_recv/proto_call are malloc'd and owned by it: release them
 * with proto_msg_free(). A message you build only to encode may point at memory you own (e.g. the
 * engine's logits buffer); proto_encode never frees or keeps them, and you need not call
 * proto_msg_free() on it. A decoded payload with count 0 is NULL, except tokenize_req.text: always a
 * NUL-terminated buffer. Strings of the hello and error replies are inline (no allocation). */
typedef struct {
    proto_type type;
    int is_reply;                      /* 0 request, 1 reply (PROTO_ERROR: always 1) */
    uint64_t id;
    union {
        proto_hello_rep hello_rep;
        proto_tokenize_req tokenize_req;
        proto_tokenize_rep tokenize_rep;
        proto_prefill_req prefill_req;
        proto_prefill_rep prefill_rep;
        proto_generate_req generate_req;
        proto_generate_rep generate_rep;
        proto_truncate_req truncate_req;
        proto_truncate_rep truncate_rep;
        proto_stats_rep stats_rep;
        proto_error_rep error;
        proto_vocab_rep vocab_rep;
    };
} proto_msg;

/* The wire name of a type ("hello", ..., "error"); "none" for PROTO_NONE, "?" for others. Static. */
const char *proto_type_name(proto_type t);

/* A short description of a status code ("bad message", "timed out", ...). Static string. */
const char *proto_strerror(int code);

/* Zero *m and set its type, direction and id. Allocates nothing. */
void proto_init(proto_msg *m, proto_type type, int is_reply, uint64_t id);

/* Fill *m as an error reply to request id with code and a printf-formatted message (cut short at
 * PROTO_ERRMSG_MAX-1 bytes). Allocates nothing; *m need not be freed. */
void proto_error(proto_msg *m, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Free the heap payloads of a message filled by proto_decode (or whose pointers you malloc'd) and
 * zero it. Safe on a zeroed message and on NULL. */
void proto_msg_free(proto_msg *m);

/* Encode *m. On success returns 0 and sets *buf (malloc'd; the caller frees it with free()) and
 * *len. On failure (unknown type, a count over its cap, a NULL payload with a nonzero count, a
 * hello string not NUL-terminated, n_rows * n_vocab overflowing) returns PROTO_E_BADARG,
 * PROTO_E_TOOBIG or PROTO_E_INTERNAL (out of memory), writes a message to err, and *buf = NULL. */
int proto_encode(const proto_msg *m, void **buf, size_t *len, char *err, size_t errlen);

/* proto_encode in two steps, for a caller that allocates the buffer itself (the transport encodes
 * straight into an nng message, so a large payload is not copied twice). proto_encode_size checks
 * *m as proto_encode does and sets *len to the exact size of its encoding (0 on failure);
 * proto_encode_into writes that encoding into buf[len] (len from proto_encode_size, for the same
 * *m). Both allocate nothing and return 0, or proto_encode's codes with a message in err. */
int proto_encode_size(const proto_msg *m, size_t *len, char *err, size_t errlen);
int proto_encode_into(const proto_msg *m, void *buf, size_t len, char *err, size_t errlen);

/* Decode len bytes as a request (is_reply = 0) or a reply (is_reply = 1; type "error" is accepted
 * only as a reply). buf is only read and may be freed after the call: payloads are copied out.
 * Returns 0 and fills *out (free it with proto_msg_free). On failure returns a PROTO_E_* code, writes
 * one clear message to err, leaves *out zeroed except out->id = the message's id when it could be
 * read (else 0) and out->type = its type when known: a server replies proto_error(out->id, rc, err).
 * A message longer than max_len is rejected with PROTO_E_TOOBIG before any parsing. */
int proto_decode(const void *buf, size_t len, size_t max_len, int is_reply, proto_msg *out,
                 char *err, size_t errlen);

/* The largest tokenize reply a worker can send for a text of n_text bytes: its tokenizers give at
 * most 4 tokens per byte and 5 more (worker/tok.c tok_max_tokens), never more than
 * PROTO_MAX_TOKENS; 4 bytes a token plus PROTO_SLACK. A client's receive cap for that reply. */
size_t proto_tokenize_reply_max(size_t n_text);

#endif
