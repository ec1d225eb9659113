/* backend_llama.c — the "llama" implementation of kernels/backend.h: llama.cpp's C library
 * (libllama, the pinned commit of kernels/llama/build.sh) runs the forward passes and holds the KV
 * cache, so an arm measures what the user's own engine does. The only file of strata that includes
 * llama.h; compiled into strata-worker only when that library is built (`make llama`,
 * docs/DESIGN.md §1.1.1).
 *
 * What it maps:
 *   forward   one llama_batch of the T tokens (sequence 0, positions pos0..), output flags set on
 *             every row (llama.cpp runs the last layer for the output rows only, so asking for fewer
 *             would change the bits of those asked); the requested ones are copied out. The
 *             context is made with n_batch = n_ubatch = max_tokens, so one forward is one ubatch
 *             and its logit buffer is max_tokens x n_vocab floats (host memory O(chunk x vocab)).
 *             Not batch-invariant: backend_aligned_prefill says so, and the engine gives it every
 *             prefill in chunks aligned to absolute positions (worker/engine.h)
 *   truncate  llama_memory_seq_rm(seq 0, depth, end). A recurrent or hybrid model cannot drop part
 *             of its state there; it gets a branch point instead: when a single-token forward (a
 *             generation step) follows a longer one or a truncation, sequence 0 is first copied to
 *             sequence 1 (llama_memory_seq_cp), and a truncation back to that depth (the end of a
 *             fork probe) drops sequence 0 and copies sequence 1 back: the state of before, exactly.
 *             A truncation to any other depth of such a model is refused with one line
 *   route     pinning or reporting MoE experts: refused (the next forward fails with one line)
 *   KV        one K and one V type for all layers (llama.cpp has no per-layer formats): f32 f16 bf16
 *             q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1; strata's other formats, mixes and rotation modifiers
 *             are refused. llama.cpp's own Hadamard rotation of quantised K / V (head dims that are
 *             multiples of 64) stays on unless cfg->llama_rot_off: that sets the environment
 *             variable LLAMA_ATTN_ROT_DISABLE=1, which llama.cpp reads when it makes a KV cache
 *             (src/llama-kv-cache.cpp), so the setting is per process (a worker has one backend).
 * Weights: llama.cpp maps the GGUF itself (the engine's own loader maps the same file, so the
 * pages are shared); no extra buffer types (use_extra_bufts = false: no AMX or repacked weights),
 * no offload on the "cpu" device (the devices list is empty); another device (device_name: cuda:N,
 * hip:N, vulkan:N, metal, or a ggml device name) gets every layer and the KV cache.
 * What llama.cpp resolved (flash attention under "auto", the K/V rotation) is read from its log
 * lines, the only place it says so; backend_name reports the effective settings, e.g.
 * "llama.cpp-0c1e570-cpu+fa-on+rot-off". llama.cpp's log is otherwise silenced; its last error line
 * becomes the message of a failed create or forward. */
#include "kernels/backend_impl.h"
#include "kernels/errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define LLAMA_COMMIT "0c1e570"

typedef struct {
    backend base;                 /* first: a pointer to this is a backend pointer */
    struct llama_model *model;
    struct llama_context *ctx;
    llama_memory_t mem;
    struct llama_batch batch;     /* [max_tokens] tokens, positions, sequence ids, output flags */
    int have_batch;
    int n_vocab, n_ctx, max_tokens, threads;
    int n_past;                   /* positions of sequence 0 in llama.cpp's memory */
    int recurrent;                /* recurrent or hybrid: no partial truncation, branch points */
    int branch_pos;               /* recurrent: sequence 1 holds sequence 0 as it was at this depth, or -1 */
    int last_T;                   /* tokens of the last forward (0 after a truncation) */
    int route_asked;              /* backend_route asked for pinned or reported experts */
    uint64_t kv_bpt;
    int fa_off_seen;              /* llama.cpp said flash attention is off after all */
    int rot_seen;                 /* llama.cpp said it rotates K or V */
    char name[96];
    char log_err[256];            /* llama.cpp's last error line */
} llama_backend;

/* ---- llama.cpp's log --------------------------------------------------------------------------- */

/* The log callback (process-wide in llama.cpp, pointed at the one backend of this process): keeps
 * the last error line and notes the two facts it only logs; prints nothing. */
static void on_log(enum ggml_log_level level, const char *text, void *ud) {
    llama_backend *b = ud;
    if (!b || !text) return;
    if (level == GGML_LOG_LEVEL_ERROR) {
        size_t n = strcspn(text, "\n");
        if (n >= sizeof b->log_err) n = sizeof b->log_err - 1;
        memcpy(b->log_err, text, n);
        b->log_err[n] = 0;
    }
    if (strstr(text, "Flash Attention not supported") || strstr(text, "flash_attn is not compatible"))
        b->fa_off_seen = 1;
    if (strstr(text, "attn_rot_k = 1") || strstr(text, "attn_rot_v = 1")) b->rot_seen = 1;
}

static void log_quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)level;
    (void)text;
    (void)ud;
}

/* "what: llama.cpp's last error line" or just "what" when it logged none. */
static int fail(llama_backend *b, char *err, size_t errlen, const char *what) {
    if (b && b->log_err[0]) return errmsg_set(err, errlen, -1, "%s: llama.cpp: %s", what, b->log_err);
    return errmsg_set(err, errlen, -1, "%s", what);
}

/* ---- KV formats -------------------------------------------------------------------------------- */

#define LLAMA_KV_NAMES "f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1"

/* strata's format -> llama.cpp's cache type; 0 and *t set, or -1 */
static int kv_type(kv_fmt f, enum ggml_type *t) {
    static const struct { kv_fmt f; enum ggml_type t; } map[] = {
        { KV_F32, GGML_TYPE_F32 },   { KV_F16, GGML_TYPE_F16 },   { KV_BF16, GGML_TYPE_BF16 },
        { KV_Q8_0, GGML_TYPE_Q8_0 }, { KV_Q4_0, GGML_TYPE_Q4_0 }, { KV_Q4_1, GGML_TYPE_Q4_1 },
        { KV_IQ4_NL, GGML_TYPE_IQ4_NL }, { KV_Q5_0, GGML_TYPE_Q5_0 }, { KV_Q5_1, GGML_TYPE_Q5_1 },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].f == f) { *t = map[i].t; return 0; }
    return -1;
}

/* The one format of K (v = 0) or V (v = 1) over every attention layer and KV head of cells
 * [n_layer][n_kv], as llama.cpp's type in *t. Returns 0, or -1 with one line. */
static int uniform_type(const backend_model *m, const kv_fmt *cells, int v, enum ggml_type *t, char *err,
                        size_t errlen) {
    const char *what = v ? "V" : "K";
    int have = 0;
    kv_fmt f0 = KV_F16;
    for (int l = 0; l < m->n_layer; l++) {
        if (m->layers[l].recurrent) continue;
        for (int h = 0; h < m->n_kv; h++) {
            kv_fmt f = cells[(size_t)l * m->n_kv + h];
            if (!have) { f0 = f; have = 1; }
            else if (f != f0) {
                return errmsg_set(err, errlen, -1,
                                  "llama backend: llama.cpp stores one %s format in every layer and head; a mix "
                                  "(%s in one place, %s in another) is for strata's own backend", what, kv_fmt_name(f0),
                                  kv_fmt_name(f));
            }
        }
    }
    if (kv_type(f0, t)) {
        char nm[64];
        kv_fmt_format(f0, nm, sizeof nm);
        return errmsg_set(err, errlen, -1, "llama backend: %s format '%s' is not one llama.cpp stores (it takes "
                          LLAMA_KV_NAMES "; its own rotation of quantised K/V: --kv-rotation on|off)", what, nm);
    }
    return 0;
}

/* ---- the interface ----------------------------------------------------------------------------- */

static void llama_free_impl(backend *base) {
    llama_backend *b = (llama_backend *)base;
    if (b->have_batch) llama_batch_free(b->batch);
    if (b->ctx) llama_free(b->ctx);
    if (b->model) llama_model_free(b->model);
    llama_log_set(log_quiet, NULL);   /* the callback pointed at b */
    llama_backend_free();
    free(b);
}

static int llama_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen);

static int llama_forward(backend *base, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                         float *logits, char *err, size_t errlen);

static int llama_truncate_impl(backend *base, int depth, char *err, size_t errlen) {
    llama_backend *b = (llama_backend *)base;
    if (depth < 0 || depth > b->n_past) {
        return errmsg_set(err, errlen, -1, "cannot truncate to depth %d: the stream holds %d tokens", depth, b->n_past);
    }
    if (depth == b->n_past) return 0;
    b->log_err[0] = 0;
    if (depth == 0) {                 /* every sequence, whole (which any memory can drop) */
        llama_memory_seq_rm(b->mem, -1, -1, -1);
        b->branch_pos = -1;
    } else if (b->recurrent) {        /* only back to the branch point, never a partial cut */
        if (depth != b->branch_pos) {
            return errmsg_set(err, errlen, -1,
                              "llama backend: this model's recurrent state (a recurrent or hybrid model) cannot "
                              "be cut back from depth %d to %d in llama.cpp, only to where its last generation "
                              "began (%d): run it on strata's own backend", b->n_past, depth, b->branch_pos);
        }
        llama_memory_seq_rm(b->mem, 0, -1, -1);
        llama_memory_seq_cp(b->mem, 1, 0, -1, -1);
    } else if (!llama_memory_seq_rm(b->mem, 0, depth, -1)) {
        return fail(b, err, errlen, "llama backend: llama_memory_seq_rm failed");
    }
    b->n_past = depth;
    b->last_T = 0;
    return 0;
}

static void llama_route(backend *base, const int32_t *pin, int32_t *used) {
    llama_backend *b = (llama_backend *)base;
    b->route_asked = pin != NULL || used != NULL;
}

static uint64_t llama_kv_bpt(const backend *base) { return ((const llama_backend *)base)->kv_bpt; }
static const char *llama_name(const backend *base) { return ((const llama_backend *)base)->name; }
static int llama_threads(const backend *base) { return ((const llama_backend *)base)->threads; }
/* chunk shape matters (flash attention, rows asked); a recurrent state cannot be cut to re-run */
static int llama_aligned(const backend *base) { return !((const llama_backend *)base)->recurrent; }

const backend_impl backend_llama_impl = {
    "llama", llama_create, llama_forward, llama_truncate_impl, llama_route, llama_kv_bpt, llama_name,
    llama_threads, llama_free_impl, llama_aligned,
    NULL, NULL, NULL,   /* recurrent state not exposed: llama.cpp's sequence branches keep hybrids exact */
};

/* The device spec of `--backend llama:SPEC` as ggml names its device: "cpu"; "cuda:N" -> CUDA<N>,
 * "hip:N" -> ROCm<N>, "vulkan:N" -> Vulkan<N> (N defaults to 0); "metal" -> the first GPU device; any
 * other spec is taken as a ggml device name as it is (e.g. "CUDA1"). label [len] gets the lower-case
 * form for backend_name ("cuda0"). Returns 0, or -1 with a message for a spec that is too long or has
 * a bad index. */
static int device_name(const char *spec, char *name, size_t len, char *err, size_t errlen) {
    static const struct { const char *kind, *ggml; } kinds[] = { { "cuda", "CUDA" }, { "hip", "ROCm" }, { "vulkan", "Vulkan" } };
    if (strlen(spec) >= len - 1) return errmsg_set(err, errlen, -1, "llama backend: device spec too long");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = strlen(kinds[k].kind);
        if (strncmp(spec, kinds[k].kind, n) || (spec[n] && spec[n] != ':')) continue;
        long idx = 0;
        if (spec[n] == ':') {
            char *end;
            idx = strtol(spec + n + 1, &end, 10);
            if (end == spec + n + 1 || *end || idx < 0 || idx > 255)
                return errmsg_set(err, errlen, -1, "llama backend: device '%s': the index must be 0..255", spec);
        }
        snprintf(name, len, "%s%ld", kinds[k].ggml, idx);
        return 0;
    }
    snprintf(name, len, "%s", spec);
    return 0;
}

static int device_label(const char *spec, char *label, size_t len, char *err, size_t errlen) {
    if (!strcmp(spec, "cpu") || !strcmp(spec, "metal")) {
        snprintf(label, len, "%s", spec);
        return 0;
    }
    if (device_name(spec, label, len, err, errlen)) return -1;
    for (char *c = label; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    return 0;
}

/* The ggml device for spec (not "cpu") in this libllama build, after llama_backend_init. Returns 0,
 * or -1 with a message listing the devices the build has (a CPU-only build has only "CPU"). */
static int find_device(const char *spec, ggml_backend_dev_t *out, char *err, size_t errlen) {
    char name[64], have[256] = "";
    if (device_name(spec, name, sizeof name, err, errlen)) return -1;
    *out = strcmp(spec, "metal") ? ggml_backend_dev_by_name(name) : ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (*out && ggml_backend_dev_type(*out) != GGML_BACKEND_DEVICE_TYPE_CPU) return 0;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        size_t used = strlen(have);
        snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "", ggml_backend_dev_name(ggml_backend_dev_get(i)));
    }
    *out = NULL;
    return errmsg_set(err, errlen, -1,
                      "llama backend: no device '%s' (%s) in this llama.cpp build, which has: %s; build one for it, "
                      "e.g. make llama LLAMA_CMAKE=\"-DGGML_CUDA=ON\"", spec, name, have[0] ? have : "none");
}

/* The steps of llama_create below; each returns 0, or -1 with the message in err [errlen]. */

/* The KV cache's ggml types (*tk, *tv: one for all layers), what it holds per token (*bpt: K and V
 * rows of every attention layer, all KV heads), and the memory check on them. */
static int kv_config(const backend_model *m, const backend_config *cfg, enum ggml_type *tk, enum ggml_type *tv,
                     uint64_t *bpt, char *err, size_t errlen) {
    if (uniform_type(m, cfg->kv_k, 0, tk, err, errlen) || uniform_type(m, cfg->kv_v, 1, tv, err, errlen)) return -1;
    if (ggml_is_quantized(*tv) && cfg->flash_attn == BACKEND_FA_OFF) {
        return errmsg_set(err, errlen, -1,
                          "llama backend: llama.cpp stores a quantised V (%s) only with flash attention: "
                          "--flash-attn on or auto", ggml_type_name(*tv));
    }
    *bpt = 0;
    int64_t row = (int64_t)m->hd * m->n_kv;
    for (int l = 0; l < m->n_layer; l++)
        if (!m->layers[l].recurrent) *bpt += (uint64_t)ggml_row_size(*tk, row) + (uint64_t)ggml_row_size(*tv, row);
    if (cfg->mem_check) {
        /* scratch: llama.cpp's logit buffer (max_tokens rows) and, as an estimate, as much again for its
         * compute buffers */
        backend_need need = { *bpt, 2ull * 4 * (uint64_t)cfg->max_tokens * (uint64_t)m->n_vocab };
        if (cfg->mem_check(cfg->mem_ctx, &need, err, errlen)) return -1;
    }
    return 0;
}

/* llama.cpp loads the model (every layer on gpu, or none offloaded when NULL) into b->model; it must
 * read the vocabulary, the layer count and the sliding window as strata's loader (m) does. */
static int load_model(llama_backend *b, const backend_model *m, const backend_config *cfg, ggml_backend_dev_t gpu,
                      char *err, size_t errlen) {
    struct llama_model_params mp = llama_model_default_params();
    ggml_backend_dev_t devices[2] = { gpu, NULL };   /* [the device, end]; the cpu: none to offload to */
    mp.devices = devices;
    mp.n_gpu_layers = gpu ? 1 << 20 : 0;             /* a device holds every layer (no split) */
    mp.split_mode = LLAMA_SPLIT_MODE_NONE;
    mp.use_extra_bufts = false;
    b->model = llama_model_load_from_file(cfg->model_path, mp);
    if (!b->model) return fail(b, err, errlen, "llama backend: llama.cpp could not load the model");
    b->recurrent = llama_model_is_recurrent(b->model) || llama_model_is_hybrid(b->model);
    b->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(b->model));
    if (b->n_vocab != m->n_vocab || llama_model_n_layer(b->model) != m->n_layer) {
        return errmsg_set(err, errlen, -1,
                          "llama backend: llama.cpp reads the model as %d tokens and %d layers, strata's loader "
                          "as %d and %d: the logit rows would not line up", b->n_vocab, llama_model_n_layer(b->model),
                          m->n_vocab, m->n_layer);
    }
    /* the hello's sliding window comes from strata's loader (m); llama.h says only llama.cpp's window,
     * not which layers slide: the window must agree, the layer count is the loader's alone */
    int window = 0;
    for (int l = 0; l < m->n_layer; l++)
        if (m->layers[l].window > window) window = m->layers[l].window;
    if (llama_model_n_swa(b->model) != window) {
        return errmsg_set(err, errlen, -1, "llama backend: llama.cpp reads the sliding window as %d tokens, strata's "
                          "loader as %d: the handshake would misreport it", llama_model_n_swa(b->model), window);
    }
    return 0;
}

/* llama.cpp's context on b->model (b->ctx, b->mem) with the KV types tk, tv, and the batch of one
 * forward (b->batch). */
static int make_context(llama_backend *b, const backend_config *cfg, ggml_backend_dev_t gpu, enum ggml_type tk,
                        enum ggml_type tv, char *err, size_t errlen) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)cfg->n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)cfg->max_tokens;
    cp.n_seq_max = b->recurrent ? 2 : 1;   /* sequence 1: the branch point */
    cp.n_threads = cp.n_threads_batch = cfg->threads;
    cp.flash_attn_type = cfg->flash_attn == BACKEND_FA_ON    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : cfg->flash_attn == BACKEND_FA_OFF ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                             : LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.type_k = tk;
    cp.type_v = tv;
    cp.offload_kqv = gpu != NULL && !cfg->kv_host;   /* the KV cache on the device that computes with
                                                      * it, unless kept in host memory */
    cp.op_offload = gpu != NULL;
    cp.no_perf = true;
    cp.swa_full = true;        /* sliding-window layers keep every position: truncation anywhere is exact */
    cp.kv_unified = true;
    cp.embeddings = false;
    b->ctx = llama_init_from_model(b->model, cp);
    if (!b->ctx) return fail(b, err, errlen, "llama backend: llama.cpp could not make its context");
    if ((int64_t)llama_n_ctx(b->ctx) < cfg->n_ctx) {
        return errmsg_set(err, errlen, -1, "llama backend: llama.cpp gave a context of %u tokens, %d were asked",
                          llama_n_ctx(b->ctx), cfg->n_ctx);
    }
    b->mem = llama_get_memory(b->ctx);
    b->batch = llama_batch_init(cfg->max_tokens, 0, 1);
    b->have_batch = 1;
    if (!b->batch.token || !b->batch.pos || !b->batch.seq_id || !b->batch.logits)
        return errmsg_set(err, errlen, -1, "out of memory (prefill chunk %d)", cfg->max_tokens);
    return 0;
}

static int llama_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    *out = NULL;
    const char *dev = cfg->device && cfg->device[0] ? cfg->device : "cpu";
    char dev_label[32];   /* the device in backend_name: "cpu", "cuda0", "vulkan0", ... */
    if (device_label(dev, dev_label, sizeof dev_label, err, errlen)) return -1;
    if (!cfg->model_path) return errmsg_set(err, errlen, -1, "llama backend: no model file given");
    if (cfg->threads < 1 || cfg->max_tokens < 1 || cfg->n_ctx < 1) {
        return errmsg_set(err, errlen, -1, "llama backend: threads, prefill chunk and context must be >= 1");
    }
    enum ggml_type tk, tv;
    uint64_t bpt;
    if (kv_config(m, cfg, &tk, &tv, &bpt, err, errlen)) return -1;

    llama_backend *b = calloc(1, sizeof *b);
    if (!b) return errmsg_set(err, errlen, -1, "out of memory");
    b->base.impl = &backend_llama_impl;
    b->n_ctx = cfg->n_ctx;
    b->max_tokens = cfg->max_tokens;
    b->threads = cfg->threads;
    b->kv_bpt = bpt;
    b->branch_pos = -1;
    llama_log_set(on_log, b);
    llama_backend_init();
    if (cfg->llama_rot_off) setenv("LLAMA_ATTN_ROT_DISABLE", "1", 1);
    else unsetenv("LLAMA_ATTN_ROT_DISABLE");

    ggml_backend_dev_t gpu = NULL;   /* NULL: the cpu */
    if (strcmp(dev, "cpu") && find_device(dev, &gpu, err, errlen)) goto fail;
    if (load_model(b, m, cfg, gpu, err, errlen) || make_context(b, cfg, gpu, tk, tv, err, errlen)) goto fail;
    int fa = cfg->flash_attn != BACKEND_FA_OFF && !b->fa_off_seen;
    snprintf(b->name, sizeof b->name, "llama.cpp-" LLAMA_COMMIT "-%s+fa-%s+rot-%s%s", dev_label, fa ? "on" : "off",
             b->rot_seen ? "on" : "off", gpu && cfg->kv_host ? "+kv-host" : "");
    b->log_err[0] = 0;
    *out = &b->base;
    return 0;
fail:
    llama_free_impl(&b->base);
    return -1;
}

static int llama_forward(backend *base, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                         float *logits, char *err, size_t errlen) {
    llama_backend *b = (llama_backend *)base;
    if (b->route_asked) {
        b->route_asked = 0;
        return errmsg_set(err, errlen, -1,
                          "llama backend: llama.cpp's expert routing cannot be pinned or reported (strata's own "
                          "backend does that)");
    }
    if (T < 1 || T > b->max_tokens) {
        return errmsg_set(err, errlen, -1, "forward of %d tokens: 1..%d per call", T, b->max_tokens);
    }
    if (pos0 < 0 || pos0 > b->n_past || pos0 > b->n_ctx - T) {
        return errmsg_set(err, errlen, -1, "forward at positions %d..%d: the stream holds %d tokens, the context %d",
                          pos0, pos0 + T - 1, b->n_past, b->n_ctx);
    }
    for (int i = 0; i < T; i++)
        if (tokens[i] < 0 || tokens[i] >= b->n_vocab) {
            return errmsg_set(err, errlen, -1, "token id %d at index %d is outside the vocabulary [0, %d)", tokens[i], i, b->n_vocab);
        }
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= T || (i && rows[i] <= rows[i - 1])) {
            return errmsg_set(err, errlen, -1, "row index %d (of %d) is outside the chunk of %d tokens or out of order", rows[i], i, T);
        }
    if (pos0 < b->n_past && llama_truncate_impl(base, pos0, err, errlen)) return -1;
    if (b->recurrent && T == 1 && b->last_T != 1) {   /* a generation begins: keep a branch point */
        llama_memory_seq_rm(b->mem, 1, -1, -1);
        llama_memory_seq_cp(b->mem, 0, 1, -1, -1);
        b->branch_pos = pos0;
    }
    struct llama_batch *bt = &b->batch;
    bt->n_tokens = T;
    for (int i = 0; i < T; i++) {
        bt->token[i] = tokens[i];
        bt->pos[i] = pos0 + i;
        bt->n_seq_id[i] = 1;
        bt->seq_id[i][0] = 0;
        bt->logits[i] = 1;   /* every row, whatever was asked: llama.cpp runs the last layer only
                              * for the rows it outputs, and a row's bits depend on how many */
    }
    b->log_err[0] = 0;
    int rc = llama_decode(b->ctx, *bt);
    if (rc) {
        char what[128];
        snprintf(what, sizeof what, "llama backend: llama_decode of %d tokens at position %d failed (%d)", T, pos0, rc);
        /* what it stored of this batch (a fatal error keeps the ubatches done) goes again; a recurrent
         * state cannot be cut (and a hybrid one would lose only its attention part): left as it is */
        if (!b->recurrent) llama_memory_seq_rm(b->mem, 0, pos0 ? pos0 : -1, -1);
        return fail(b, err, errlen, what);
    }
    b->n_past = pos0 + T;
    b->last_T = T;
    for (int i = 0; i < n_rows; i++) {
        const float *src = llama_get_logits_ith(b->ctx, rows[i]);
        if (!src) return fail(b, err, errlen, "llama backend: llama.cpp returned no logits for a requested row");
        memcpy(logits + (size_t)i * b->n_vocab, src, sizeof(float) * (size_t)b->n_vocab);
    }
    return 0;
}
