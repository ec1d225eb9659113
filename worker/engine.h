/* engine.h — one arm's engine: a model, its KV cache in the arm's formats, a thread pool, and the
 * state of one token stream (prefill, greedy generation, truncation back to a depth).
 *
 * State: n_past tokens are in the cache; `last` holds the logits at position n_past - 1 when
 * last_valid (after a prefill or a generation step). generate() remembers the row it started
 * from, so truncate() back to that depth restores the exact state of before the generation:
 * nothing in the cache at positions < depth depends on later tokens.
 */
#ifndef STRATA_ENGINE_H
#define STRATA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/kvfmt.h"
#include "worker/model.h"
#include "worker/tok.h"

typedef struct {
    const char *model_path;
    kv_fmt kv_k, kv_v;
    int threads;          /* >= 1 */
    int chunk;            /* prefill chunk size (tokens per forward pass), >= 1 */
    int n_ctx;            /* max context; 0 = the model's training context */
    int rope_f32_angles;  /* 1: RoPE angles in f32 as llama.cpp computes them; 0: exact (default;
                           * docs/DESIGN.md §3.2) */
    int mmap_weights;     /* 1: the model file mapped (shared by workers on one model); 0: copied
                           * into this process's memory on transparent huge pages (default; faster
                           * decode: kernels/NOTES.md change 26). The results are the same bits. */
    const char *backend;  /* what runs the passes: NULL or "cpu" (strata's own), "ref" (its plain C
                           * reference), "llama" or "llama:DEVICE" (llama.cpp, in a build with it:
                           * kernels/backend.h); the llama backend maps the weights (mmap_weights is
                           * implied) */
    int flash_attn;       /* llama: BACKEND_FA_AUTO (default), _ON, _OFF */
    int kv_rot_off;       /* llama: 1 turns llama.cpp's rotation of quantised K/V off */
    int kv_host;          /* llama: 1 keeps the KV cache in host memory when a device computes
                           * (llama.cpp's offload_kqv off); no effect on the cpu device */
} engine_config;

#define ENGINE_KV_NAME_MAX 128   /* a K or V format as given (a name or a mix), NUL included */

/* The memory check's options (engine_create_mem). */
typedef struct {
    int arms;             /* workers of this size that will run at once (the check counts their
                           * caches; the weights' page cache is shared); <= 1: this one alone */
    int allow_overcommit; /* 1: skip the MemAvailable check (not RLIMIT_AS: a reservation past it fails) */
    uint64_t other_weights; /* bytes of the other workers' weights this one does not share (weight
                             * arms, the driver's --arm-model; with copied weights every other local
                             * worker's file): engine_mem_need.other_weights */
} engine_mem_opts;

typedef struct {
    engine_config cfg;
    model *m;
    tok_vocab *tok;
    backend *b;           /* runs the forward passes and holds the KV cache (kernels/backend.h) */
    int n_ctx;
    int n_past;
    float *last;          /* [n_vocab] logits at n_past - 1 */
    int last_valid;
    float *base_row;      /* [n_vocab] the row generate() started from */
    int base_depth;       /* its depth, -1 when none */
    int32_t *stream;      /* [n_ctx] the token ids at positions 0..n_past-1, or NULL: kept only for a
                           * backend that needs aligned prefills (backend_aligned_prefill): a prefill
                           * starting at a position p that is not a multiple of cfg.chunk truncates
                           * the backend to p - p % chunk and re-runs those tokens with the new ones,
                           * so that every position is computed in the same chunk (its aligned chunk,
                           * or the one that ended the stream) whatever requests led there: one pass
                           * over nested prefixes = separate runs, bit for bit */
    uint64_t rechunk_rows;/* aligned backend: rows at the end of a shorter chunk recomputed in a longer
                           * one (the row at p - 1 of such a prefill) */
    double rechunk_max;   /* the largest |difference| of a logit between the two (batch variance) */
    uint64_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    char kv_name[2][ENGINE_KV_NAME_MAX];   /* K, V as given: the mix or the format's name */
} engine;

/* Loads the model and tokenizer, checks that the cache at full context will fit (engine_mem_check),
 * reserves the cache, starts the threads. Allocates *out (free with engine_free). Returns 0, or -1
 * with one line in err (also: a tokenizer with more tokens than the model has embedding rows).
 * warn receives a non-fatal note (RoPE scaling, context past the model's native one) or "". */
int engine_create(const engine_config *cfg, engine **out, char *err, size_t errlen, char *warn, size_t warnlen);
/* The same with the memory check's options (engine_create: one arm, no overcommit). */
int engine_create_mem(const engine_config *cfg, const engine_mem_opts *mem, engine **out, char *err, size_t errlen,
                      char *warn, size_t warnlen);

/* The general form: K and / or V formats per layer, kv_k_mix / kv_v_mix in kv.h's mix syntax (e.g.
 * "int8+f16@0+f16@-1"), or NULL for cfg's kv_k / kv_v in every layer (a mix that does not fit the
 * model — a layer past its end, one named twice or left out — is an error), with the memory
 * check's options. */
int engine_create_mix(const engine_config *cfg, const char *kv_k_mix, const char *kv_v_mix,
                      const engine_mem_opts *mem, engine **out, char *err, size_t errlen, char *warn,
                      size_t warnlen);
void engine_free(engine *e);

/* The K (v = 0) or V (v = 1) format as configured: the mix string, or the format's name. */
const char *engine_kv_name(const engine *e, int v);

enum { ENGINE_ROWS_NONE = 0, ENGINE_ROWS_LAST = 1, ENGINE_ROWS_ALL = 2 };

/* Appends tokens[n] to the stream. rows: NONE, LAST (the row of the last token) or ALL (one row per
 * token). *out_rows is malloc'd [n_out][n_vocab] (caller frees; NULL when no rows). Returns 0, or
 * -1 with a message (context full, token out of range, a logit row with NaN or inf): n_past is then
 * unchanged, last_valid 0 when the forward pass ran. */
int engine_prefill(engine *e, const int32_t *tokens, size_t n, int rows, float **out_rows, size_t *n_out,
                   char *err, size_t errlen);

/* The same for a MoE model (model.n_expert > 0; a dense model ignores both): pin (may be NULL)
 * [n][n_layer][n_expert_used] the experts each token uses instead of the router's choice (kernels/
 * backend.h backend_route; an id outside [0, n_expert) fails the request); used (may be NULL,
 * the caller's) receives the experts each token used, same shape, slot order. */
int engine_prefill_routed(engine *e, const int32_t *tokens, size_t n, int rows, const int32_t *pin, int32_t *used,
                          float **out_rows, size_t *n_out, char *err, size_t errlen);

/* Generates n tokens from the current state: greedy (argmax, ties to the lowest id) when
 * temperature == 0, else sampled by kernels/sample.h (docs/DESIGN.md §3.7): step i draws
 * sample_token(row, T, top_p, sample_uniform(seed, i)), so two arms given the same seed use the
 * same uniforms (engine_generate: top_p = 1, no cut). tokens[n] and gaps[n] (top-1 minus top-2 logit at each step) are written by the caller's
 * buffers. The stream grows by n - 1 tokens (the last one is not fed). Returns 0 or -1; a step
 * whose logits hold NaN or inf is an error (never a token chosen from them); truncate() back to
 * the starting depth then restores the state of before the call. */
int engine_generate(engine *e, int n, double temperature, uint64_t seed, int32_t *tokens, float *gaps,
                    char *err, size_t errlen);
/* The same with a nucleus cut top_p in (0, 1] (1: none). */
int engine_generate_p(engine *e, int n, double temperature, double top_p, uint64_t seed, int32_t *tokens,
                      float *gaps, char *err, size_t errlen);

/* Drops positions >= depth. depth <= n_past. Returns 0 or -1. */
int engine_truncate(engine *e, int depth, char *err, size_t errlen);

/* ---- the memory check --------------------------------------------------------------------- */

/* What one worker will need at its full context. */
typedef struct {
    uint64_t kv_per_token;   /* bytes, all layers, K and V */
    int n_ctx;
    uint64_t weights_bytes;  /* this worker's model file, resident while it runs */
    int weights_copied;      /* 1: each worker holds its own copy (engine_config.mmap_weights = 0) */
    uint64_t other_weights;  /* the other workers' weights this one does not share (--mem-other-weights):
                              * mapped, their distinct other files; copied, every other worker's file.
                              * Counted: mapped, weights_bytes + other_weights (the arms share the page
                              * cache of one file); copied, other_weights, or (arms - 1) x weights_bytes
                              * when 0 (arms copies of this file; its own copy is already made) */
    uint64_t scratch_bytes;  /* forward-pass scratch and logit buffers of one worker */
    int arms;                /* workers like this one running at once (>= 1) */
} engine_mem_need;

/* What the machine and the process allow. */
typedef struct {
    uint64_t mem_available;  /* MemAvailable of /proc/meminfo, lowered to a visible cgroup's free
                              * memory; 0 = unknown (the check is then skipped) */
    uint64_t as_limit;       /* RLIMIT_AS soft limit; UINT64_MAX = none */
    uint64_t as_used;        /* this process's virtual size now (it includes the mapped weights) */
} engine_mem_env;

/* Reads /proc/meminfo, the cgroup's memory.max / memory.limit_in_bytes where visible,
 * getrlimit(RLIMIT_AS) and /proc/self/statm. Fields it cannot read stay "unknown". */
void engine_mem_env_read(engine_mem_env *env);

/* Checks need against env: arms * (KV cache at n_ctx + scratch) + weights must fit in
 * mem_available (unless allow_overcommit), and as_used + KV reservation + scratch under as_limit.
 * Returns 0, or -1 with one line in err giving the sizes, the largest context that fits and the
 * way out (--max-context, --allow-overcommit). Pure. */
int engine_mem_check(const engine_mem_need *need, const engine_mem_env *env, int allow_overcommit,
                     char *err, size_t errlen);

/* Peak resident set size of this process in bytes. */
uint64_t engine_peak_rss(void);
/* Bytes of this process's memory on transparent huge pages now (AnonHugePages of
 * /proc/self/smaps_rollup; 0 where unknown): the weights' copy, when the kernel granted them. */
uint64_t engine_huge_bytes(void);

/* argmax with ties to the lowest id, and the top-1 minus top-2 gap. */
int engine_argmax(const float *row, int n, float *gap);

#endif
