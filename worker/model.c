/* model.c — GGUF model loading, and the description a backend runs. See model.h. */
#include "worker/model.h"
#include "kernels/errmsg.h"
#include "kernels/quant.h"

#include <float.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading --------------------------------------------------------------------------------- */

typedef struct {
    const gguf_file *g;
    const char *path;
    char *err;
    size_t errlen;
} loader;

static int fail(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(loader *L, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    errmsg_vset(msg, sizeof msg, -1, fmt, ap);
    va_end(ap);
    return errmsg_set(L->err, L->errlen, -1, "%s: %s", L->path, msg);
}

/* "<arch>.<key>" as an integer in [lo, hi]; def when absent (def < 0 means required). A present key
 * of another type, or out of range, is an error naming it (gguf_meta_int). The limits (model.h's
 * MODEL_MAX_*) keep every product of two hyperparameters inside an int. */
static int meta_int(loader *L, const char *arch, const char *key, int64_t def, int64_t lo, int64_t hi, int *out) {
    char full[128], why[320];
    int64_t v = def;
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int rc = gguf_meta_int(L->g, full, lo, hi, &v, why, sizeof why);
    if (rc < 0) return fail(L, "%s", why);
    if (rc == GGUF_ABSENT && def < 0) return fail(L, "missing metadata %s", full);
    if (v < lo || v > hi)   /* a default derived from other keys */
        return fail(L, "metadata %s = %lld is outside [%lld, %lld]", full, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

/* "<arch>.<key>" as a finite float in [lo, hi]; def when absent; another type is an error. */
static int meta_float(loader *L, const char *arch, const char *key, double def, double lo, double hi, float *out) {
    char full[128], why[320];
    double v = def;
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (gguf_meta_float(L->g, full, lo, hi, &v, why, sizeof why) < 0) return fail(L, "%s", why);
    float f = (float)v;
    if (!isfinite(f) || f < lo || f > hi) return fail(L, "metadata %s = %g is outside [%g, %g]", full, f, lo, hi);
    *out = f;
    return 0;
}

/* A name-valued key ("general.architecture", "<arch>.rope.scaling.type") into buf: printable ASCII
 * (gguf_meta_name). Returns 0, GGUF_ABSENT, or -1 with the message in L. */
static int meta_name(loader *L, const char *key, char *buf, size_t buflen) {
    char why[400];
    int rc = gguf_meta_name(L->g, key, buf, buflen, why, sizeof why);
    return rc < 0 ? fail(L, "%s", why) : rc;
}

/* An array-valued key whose elements have one of the types in elem_types (1u << GGUF_VT_*). */
static int meta_arr(loader *L, const char *key, uint32_t elem_types, const void **data, uint64_t *n, uint32_t *type) {
    char why[320];
    int rc = gguf_meta_arr(L->g, key, elem_types, data, n, type, why, sizeof why);
    return rc < 0 ? fail(L, "%s", why) : rc;
}

/* Every tensor blk.N.* must have N < block_count: a file with more blocks than its metadata says
 * is refused (running the first block_count of them would measure another model). */
static int check_blocks(loader *L, const char *arch, int n_block) {
    for (uint64_t i = 0; i < L->g->n_tensors; i++) {
        const char *nm = L->g->tensors[i].name;
        if (strncmp(nm, "blk.", 4) || nm[4] < '0' || nm[4] > '9') continue;
        uint64_t b = 0;
        for (const char *p = nm + 4; *p >= '0' && *p <= '9'; p++) b = b > UINT32_MAX ? b : b * 10 + (uint64_t)(*p - '0');
        if (b >= (uint64_t)n_block)
            return fail(L, "tensor %s belongs to block %llu, but %s.block_count is %d (a file with more blocks than its "
                        "metadata says is refused)", nm, (unsigned long long)b, arch, n_block);
    }
    return 0;
}

/* A weight matrix [rows][cols]; ne[0] = cols. */
static int get_weight(loader *L, const char *name, int rows, int cols, backend_weight *w) {
    const gguf_tensor *t = gguf_tensor_find(L->g, name);
    if (!t) return fail(L, "missing tensor %s", name);
    if (!quant_supported(t->type)) {
        char buf[32];
        return fail(L, "tensor %s has type %s, which is not supported (supported: F32 F16 BF16 Q8_0 "
                    "Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K)", name, quant_type_name_buf(t->type, buf, sizeof buf));
    }
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(L, "tensor %s has shape [%llu, %llu], expected [%d, %d]", name,
                    (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], cols, rows);
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = quant_row_bytes(t->type, (uint64_t)cols);
    w->data = t->data;
    return 0;
}

/* The stacked experts of a MoE layer: a 3-D tensor ne = [cols, rows, n_expert] (expert e's matrix
 * [rows][cols] is rows e*rows .. (e+1)*rows - 1 of the stack), as one weight [n_expert*rows][cols]. */
static int get_experts(loader *L, const char *name, int n_expert, int rows, int cols, backend_weight *w) {
    const gguf_tensor *t = gguf_tensor_find(L->g, name);
    if (!t) return fail(L, "missing tensor %s", name);
    if (!quant_supported(t->type)) {
        char buf[32];
        return fail(L, "tensor %s has type %s, which is not supported", name, quant_type_name_buf(t->type, buf, sizeof buf));
    }
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != (uint64_t)n_expert || t->ne[3] != 1)
        return fail(L, "tensor %s has shape [%llu, %llu, %llu], expected [%d, %d, %d] (expert_count %d)", name,
                    (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2], cols,
                    rows, n_expert, n_expert);
    w->type = t->type;
    w->rows = n_expert * rows;   /* <= MODEL_MAX_EXPERT_ROWS, checked at load */
    w->cols = cols;
    w->row_bytes = quant_row_bytes(t->type, (uint64_t)cols);
    w->data = t->data;
    return 0;
}

/* rows vectors of n values (a tensor ne = [n, rows]; rows = 1: a plain vector) copied to f32 as
 * [rows][n] (*out allocated, owned by the model); optional ones give NULL. */
static int get_vecs(loader *L, const char *name, int n, int rows, int required, float **out) {
    const gguf_tensor *t = gguf_tensor_find(L->g, name);
    *out = NULL;
    if (!t) return required ? fail(L, "missing tensor %s", name) : 0;
    if (t->ne[0] != (uint64_t)n || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 || t->ne[3] != 1 || !quant_supported(t->type))
        return fail(L, "tensor %s: expected [%d, %d] values of a supported type", name, n, rows);
    *out = malloc(sizeof(float) * (size_t)n * rows);
    if (!*out) return fail(L, "out of memory");
    size_t rb = quant_row_bytes(t->type, (uint64_t)n);
    for (int r = 0; r < rows; r++) quant_dequant_row(t->type, t->data + (size_t)r * rb, *out + (size_t)r * n, n);
    return 0;
}

/* A vector of n values copied to f32 (*out allocated, owned by the model); optional ones give NULL. */
static int get_vec(loader *L, const char *name, int n, int required, float **out) {
    const gguf_tensor *t = gguf_tensor_find(L->g, name);
    *out = NULL;
    if (!t) return required ? fail(L, "missing tensor %s", name) : 0;
    if (t->ne[0] != (uint64_t)n || t->ne[1] != 1 || !quant_supported(t->type))
        return fail(L, "tensor %s: expected %d values of a supported type", name, n);
    *out = malloc(sizeof(float) * (size_t)n);
    if (!*out) return fail(L, "out of memory");
    quant_dequant_row(t->type, t->data, *out, n);
    return 0;
}

/* A small matrix [rows][cols] (ne = [cols, rows]) copied to f32 (*out allocated, owned by the model). */
static int get_fmat(loader *L, const char *name, int rows, int cols, float **out) {
    backend_weight w;
    *out = NULL;
    if (get_weight(L, name, rows, cols, &w)) return -1;
    *out = malloc(sizeof(float) * (size_t)rows * cols);
    if (!*out) return fail(L, "out of memory");
    for (int r = 0; r < rows; r++) quant_dequant_row(w.type, w.data + (size_t)r * w.row_bytes, *out + (size_t)r * cols, cols);
    return 0;
}

/* qwen35's linear-attention tensors of layer l (kernels/backend.h lists them with their shapes). */
static int load_linear(loader *L, model *m, int l) {
    char nm[96];
    backend_layer *ly = &m->layers[l];
    int nk = m->ssm_nk, nv = m->ssm_nv, d = m->ssm_d, cd = 2 * nk * d + nv * d;
#define W(field, suffix, r, c) snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix); \
    if (get_weight(L, nm, r, c, &ly->field)) return -1;
#define V(field, suffix, n) snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix); \
    if (get_vec(L, nm, n, 1, &ly->field)) return -1;
    W(w_qkv, "attn_qkv.weight", cd, m->dim);
    W(w_z, "attn_gate.weight", nv * d, m->dim);
    W(w_beta, "ssm_beta.weight", nv, m->dim);
    W(w_alpha, "ssm_alpha.weight", nv, m->dim);
    W(w_ssm_out, "ssm_out.weight", m->dim, nv * d);
    V(dt_bias, "ssm_dt.bias", nv);
    V(ssm_a, "ssm_a", nv);
    V(ssm_norm, "ssm_norm.weight", d);
#undef W
#undef V
    snprintf(nm, sizeof nm, "blk.%d.ssm_conv1d.weight", l);
    return get_fmat(L, nm, cd, m->ssm_conv, &ly->conv_w);
}

static int file_sha256(const gguf_file *g, char hex[65]) {
    unsigned char md[32];
    unsigned int len = 0;
    if (!EVP_Digest(g->base, g->size, md, &len, EVP_sha256(), NULL) || len != 32) return -1;
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", md[i]);
    return 0;
}

static int load_layers(loader *L, model *m) {
    char nm[96];
    for (int l = 0; l < m->n_layer; l++) {
        backend_layer *ly = &m->layers[l];
        int qd = m->n_head * m->hd, kd = m->n_kv * m->hd;
        int qwen35 = m->arch == ARCH_QWEN35 || m->arch == ARCH_QWEN35MOE;
#define W(field, suffix, r, c) snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, suffix); \
        if (get_weight(L, nm, r, c, &ly->field)) return -1;
#define V(field, suffix, n, req) snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix); \
        if (get_vec(L, nm, n, req, &ly->field)) return -1;
        if (ly->recurrent) {
            if (load_linear(L, m, l)) return -1;
        } else {
            W(wq, "attn_q", m->attn_gate ? 2 * qd : qd, m->dim);   /* qwen35: per head, queries then gates */
            W(wk, "attn_k", kd, m->dim);
            W(wv, "attn_v", kd, m->dim);
            W(wo, "attn_output", m->dim, qd);
        }
        int oss = m->arch == ARCH_GPTOSS;
        if (m->n_expert > 0) {   /* qwen3moe, gpt-oss, qwen2moe, qwen35moe: router and stacked experts */
            W(w_router, "ffn_gate_inp", m->n_expert, m->dim);
#define E(field, suffix, r, c) snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, suffix); \
            if (get_experts(L, nm, m->n_expert, r, c, &ly->field)) return -1;
            E(w_gate, "ffn_gate_exps", m->ffn, m->dim);
            E(w_up, "ffn_up_exps", m->ffn, m->dim);
            E(w_down, "ffn_down_exps", m->dim, m->ffn);
#undef E
            if (oss) {   /* biases: the router's [n_expert], the experts' [n_expert][ffn] and [n_expert][dim] */
#define B(field, suffix, n, rows) snprintf(nm, sizeof nm, "blk.%d.%s.bias", l, suffix); \
                if (get_vecs(L, nm, n, rows, 1, &ly->field)) return -1;
                B(b_router, "ffn_gate_inp", m->n_expert, 1);
                B(b_gate, "ffn_gate_exps", m->ffn, m->n_expert);
                B(b_up, "ffn_up_exps", m->ffn, m->n_expert);
                B(b_down, "ffn_down_exps", m->dim, m->n_expert);
#undef B
            }
            if (m->ffn_sh > 0) {   /* qwen2moe's and qwen35moe's shared expert and its gate */
                W(w_sh_inp, "ffn_gate_inp_shexp", 1, m->dim);
                W(w_sh_gate, "ffn_gate_shexp", m->ffn_sh, m->dim);
                W(w_sh_up, "ffn_up_shexp", m->ffn_sh, m->dim);
                W(w_sh_down, "ffn_down_shexp", m->dim, m->ffn_sh);
            }
        } else {
            W(w_gate, "ffn_gate", m->ffn, m->dim);
            W(w_up, "ffn_up", m->ffn, m->dim);
            W(w_down, "ffn_down", m->dim, m->ffn);
        }
        V(attn_norm, "attn_norm.weight", m->dim, 1);
        /* gpt-oss and qwen35 name their pre-FFN norm post_attention_norm (it normalises the FFN's input) */
        V(ffn_norm, oss || qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight", m->dim, 1);
        int qwen2 = m->arch == ARCH_QWEN2;
        int qkn = m->arch == ARCH_QWEN3 || m->arch == ARCH_QWEN3MOE || m->arch == ARCH_GEMMA3 ||
                  (qwen35 && !ly->recurrent);
        int gemma = m->arch == ARCH_GEMMA3;
        V(bq, "attn_q.bias", qd, qwen2);   /* qwen2moe, gpt-oss: optional, as llama.cpp */
        V(bk, "attn_k.bias", kd, qwen2);
        V(bv, "attn_v.bias", kd, qwen2);
        if (oss) {
            V(bo, "attn_output.bias", m->dim, 1);
            V(sinks, "attn_sinks.weight", m->n_head, 1);
        }
        V(q_norm, "attn_q_norm.weight", m->hd, qkn);
        V(k_norm, "attn_k_norm.weight", m->hd, qkn);
        if (!oss && !qwen35) {   /* their post_attention_norm is the FFN norm (above) */
            V(post_attn_norm, "post_attention_norm.weight", m->dim, gemma);
        }
        V(post_ffn_norm, "post_ffw_norm.weight", m->dim, gemma);
#undef W
#undef V
        ly->rope_local = 0;
        ly->window = 0;
    }
    return 0;
}

/* gpt-oss's sliding-window layers, as llama.cpp assigns them: attention.sliding_window (required)
 * keys; attention.sliding_window_pattern, when it is an array of n_layer bools, says per layer;
 * otherwise it is the period n (absent: 2) and layer l slides iff l % n < n - 1 (n = 0: every
 * layer), so with 2 the even layers slide and the odd ones attend to everything. */
static int gptoss_windows(loader *L, model *m) {
    const char *a = m->arch_name;
    int window = 0, n = 2;
    if (meta_int(L, a, "attention.sliding_window", -1, 1, MODEL_MAX_CTX, &window)) return -1;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    const void *arr = NULL;
    uint64_t na = 0;
    const gguf_kv *kv = gguf_find(L->g, key);
    if (kv && kv->type == GGUF_VT_ARRAY) {   /* one bool per layer; else an integer period */
        if (meta_arr(L, key, 1u << GGUF_VT_BOOL, &arr, &na, NULL)) return -1;
        if (na != (uint64_t)m->n_layer) return fail(L, "metadata %s has %llu entries, not one per layer (%d)", key,
                                                    (unsigned long long)na, m->n_layer);
        for (int l = 0; l < m->n_layer; l++) {
            m->layers[l].window = ((const uint8_t *)arr)[l] ? window : 0;
            m->layers[l].rope_local = ((const uint8_t *)arr)[l] != 0;
        }
        return 0;
    }
    if (meta_int(L, a, "attention.sliding_window_pattern", 2, 0, MODEL_MAX_LAYER, &n)) return -1;
    for (int l = 0; l < m->n_layer; l++) {
        int swa = n == 0 || l % n < n - 1;
        m->layers[l].window = swa ? window : 0;
        m->layers[l].rope_local = swa;
    }
    return 0;
}

/* qwen35: the linear-attention hyperparameters and which layers are recurrent, as llama.cpp reads
 * them: attention.recurrent_layers (one bool / integer per layer) when present, else every layer
 * but each full_attention_interval-th (default 4: layers 3, 7, ... attend); the RoPE sections
 * (rope.dimension_sections, 4 integers) must give every rotated pair the position (for text, the
 * three position sections are the same and the fourth is 0: a pair in no section is not rotated,
 * which strata does not model). */
static int load_hybrid(loader *L, model *m) {
    const char *a = m->arch_name;
    int inner;
    if (meta_int(L, a, "ssm.conv_kernel", -1, 1, MODEL_MAX_SSM_CONV, &m->ssm_conv) ||
        meta_int(L, a, "ssm.state_size", -1, 1, MODEL_MAX_HEAD_DIM, &m->ssm_d) ||
        meta_int(L, a, "ssm.group_count", -1, 1, MODEL_MAX_HEADS, &m->ssm_nk) ||
        meta_int(L, a, "ssm.time_step_rank", -1, 1, MODEL_MAX_HEADS, &m->ssm_nv) ||
        meta_int(L, a, "ssm.inner_size", -1, 1, MODEL_MAX_QKV, &inner))
        return -1;
    if (m->ssm_nv % m->ssm_nk)
        return fail(L, "metadata %s.ssm.time_step_rank %d is not a multiple of ssm.group_count %d", a, m->ssm_nv, m->ssm_nk);
    if ((int64_t)m->ssm_nv * m->ssm_d != inner)
        return fail(L, "metadata %s.ssm.inner_size %d is not ssm.time_step_rank x ssm.state_size = %d x %d (value "
                    "head dim must equal key head dim)", a, inner, m->ssm_nv, m->ssm_d);
    if ((2 * (int64_t)m->ssm_nk + m->ssm_nv) * m->ssm_d > MODEL_MAX_QKV)
        return fail(L, "metadata %s.ssm: (2 x group_count + time_step_rank) x state_size exceeds %d", a, MODEL_MAX_QKV);
    char key[96];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    const void *data = NULL;
    uint64_t n = 0;
    uint32_t type = 0;
    int rc = meta_arr(L, key, 1u << GGUF_VT_BOOL | 1u << GGUF_VT_INT32 | 1u << GGUF_VT_UINT32, &data, &n, &type);
    if (rc < 0) return -1;
    if (rc == 0) {
        if (n < (uint64_t)m->n_layer)   /* it may go on over the multi-token-prediction blocks */
            return fail(L, "metadata %s has %llu entries, fewer than the %d layers", key, (unsigned long long)n, m->n_layer);
        for (int l = 0; l < m->n_layer; l++) {   /* the array may sit unaligned in the mapping */
            uint32_t v = 0;
            if (type == GGUF_VT_BOOL) v = ((const uint8_t *)data)[l];
            else memcpy(&v, (const uint8_t *)data + 4 * (size_t)l, 4);
            m->layers[l].recurrent = v != 0;
        }
    } else {
        int interval;
        if (meta_int(L, a, "full_attention_interval", 4, 1, MODEL_MAX_LAYER, &interval)) return -1;
        for (int l = 0; l < m->n_layer; l++) m->layers[l].recurrent = (l + 1) % interval != 0;
    }
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    const void *sd = NULL;
    uint64_t ns = 0;
    int sec[4] = { 0, 0, 0, 0 };
    rc = meta_arr(L, key, 1u << GGUF_VT_INT32 | 1u << GGUF_VT_UINT32, &sd, &ns, NULL);
    if (rc < 0) return -1;
    if (rc == GGUF_ABSENT) return fail(L, "missing metadata %s (4 integers)", key);
    for (uint64_t i = 0; i < ns && i < 4; i++) memcpy(&sec[i], (const uint8_t *)sd + 4 * i, 4);
    int64_t sum = (int64_t)sec[0] + sec[1] + sec[2] + sec[3];   /* u32 entries may be huge: no int overflow */
    int total = sum > 0 && sum <= m->n_rot / 2 ? (int)sum : 0;
    if (sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[3] < 0 || total <= 0)
        return fail(L, "metadata %s = [%d, %d, %d, %d] does not fit rope.dimension_count %d", key, sec[0], sec[1],
                    sec[2], sec[3], m->n_rot);
    for (int i = 0; i < m->n_rot / 2; i++) {   /* llama.cpp's interleaved sections, text positions */
        int s = i % total;
        int rot = (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]);
        if (!rot)
            return fail(L, "metadata %s = [%d, %d, %d, %d] leaves RoPE pair %d of %d unrotated for text (not supported)",
                        key, sec[0], sec[1], sec[2], sec[3], i, m->n_rot / 2);
    }
    return 0;
}

int model_load(const char *path, model **out, char *err, size_t errlen, char *warn, size_t warnlen) {
    return model_load_as(path, GGUF_HOLD_MAP, out, err, errlen, warn, warnlen);
}

/* The loading steps below fill one part of *m each from L's file; they return 0, or -1 with the
 * message in L (fail). They run in this order: each reads what the ones before it set. */

/* general.architecture: m->arch_name and m->arch. */
static int load_arch(loader *L, model *m) {
    int rc = meta_name(L, "general.architecture", m->arch_name, sizeof m->arch_name);
    if (rc) {
        if (rc == GGUF_ABSENT) fail(L, "missing general.architecture");
        return -1;
    }
    const char *a = m->arch_name;
    if (!strcmp(a, "llama")) m->arch = ARCH_LLAMA;
    else if (!strcmp(a, "qwen2")) m->arch = ARCH_QWEN2;
    else if (!strcmp(a, "qwen3")) m->arch = ARCH_QWEN3;
    else if (!strcmp(a, "gemma3")) m->arch = ARCH_GEMMA3;
    else if (!strcmp(a, "qwen3moe")) m->arch = ARCH_QWEN3MOE;
    else if (!strcmp(a, "gpt-oss")) m->arch = ARCH_GPTOSS;
    else if (!strcmp(a, "qwen2moe")) m->arch = ARCH_QWEN2MOE;
    else if (!strcmp(a, "qwen35")) m->arch = ARCH_QWEN35;
    else if (!strcmp(a, "qwen35moe")) m->arch = ARCH_QWEN35MOE;
    else
        return fail(L, "architecture '%s' is not supported (llama, qwen2, qwen3, gemma3, qwen3moe, qwen2moe, gpt-oss, "
                    "qwen35, qwen35moe are)", a);
    return 0;
}

static int is_moe(const model *m) {
    return m->arch == ARCH_QWEN3MOE || m->arch == ARCH_GPTOSS || m->arch == ARCH_QWEN2MOE || m->arch == ARCH_QWEN35MOE;
}
static int is_hybrid(const model *m) { return m->arch == ARCH_QWEN35 || m->arch == ARCH_QWEN35MOE; }

/* The trunk's sizes: layers (less a hybrid's multi-token-prediction blocks), width, heads, FFN,
 * training context, and a MoE model's experts. */
static int load_sizes(loader *L, model *m) {
    const char *a = m->arch_name;
    int moe = is_moe(m);
    if (meta_int(L, a, "block_count", -1, 1, MODEL_MAX_LAYER, &m->n_layer) || check_blocks(L, a, m->n_layer) ||
        meta_int(L, a, "embedding_length", -1, 1, MODEL_MAX_DIM, &m->dim) ||
        meta_int(L, a, "attention.head_count", -1, 1, MODEL_MAX_HEADS, &m->n_head) ||
        meta_int(L, a, "feed_forward_length", moe ? 0 : -1, moe ? 0 : 1, MODEL_MAX_FFN, &m->ffn) ||
        meta_int(L, a, "context_length", 2048, 1, MODEL_MAX_CTX, &m->n_ctx_train))
        return -1;
    if (is_hybrid(m)) {   /* multi-token-prediction blocks after the trunk (nextn_predict_layers) are not run */
        int nextn;
        if (meta_int(L, a, "nextn_predict_layers", 0, 0, m->n_layer - 1, &nextn)) return -1;
        m->n_layer -= nextn;
    }
    if (moe) {
        /* as llama.cpp: every layer is a MoE layer; one expert's width is expert_feed_forward_length,
         * or (qwen3moe, qwen35moe) feed_forward_length / expert_used_count when that key is absent */
        int gptoss = m->arch == ARCH_GPTOSS, ffn_dense = m->ffn;
        if (meta_int(L, a, "expert_count", -1, 1, MODEL_MAX_EXPERT, &m->n_expert) ||
            meta_int(L, a, "expert_used_count", -1, 1, m->n_expert, &m->n_expert_used) ||
            meta_int(L, a, "expert_feed_forward_length", gptoss ? -1 : m->ffn / m->n_expert_used, 1, MODEL_MAX_FFN, &m->ffn))
            return -1;
        /* qwen2moe's and qwen35moe's shared expert: expert_shared_feed_forward_length, else
         * feed_forward_length */
        if ((m->arch == ARCH_QWEN2MOE || m->arch == ARCH_QWEN35MOE) &&
            meta_int(L, a, "expert_shared_feed_forward_length", ffn_dense > 0 ? ffn_dense : -1, 1, MODEL_MAX_FFN, &m->ffn_sh))
            return -1;
        if ((int64_t)m->n_expert * m->ffn > MODEL_MAX_EXPERT_ROWS || (int64_t)m->n_expert * m->dim > MODEL_MAX_EXPERT_ROWS)
            return fail(L, "metadata %s.expert_count x expert_feed_forward_length (or x embedding_length) = %d x %d exceeds %d",
                        a, m->n_expert, m->ffn > m->dim ? m->ffn : m->dim, MODEL_MAX_EXPERT_ROWS);
    }
    /* each block has at least 9 tensors (q k v o gate up down and two norms), plus the embedding and
     * the output norm: a block count the tensor directory cannot hold is refused before allocating */
    if ((uint64_t)m->n_layer * 9 + 2 > m->g->n_tensors)
        return fail(L, "metadata %s.block_count = %d needs at least %llu tensors, the file has %llu", a, m->n_layer,
                    (unsigned long long)m->n_layer * 9 + 2, (unsigned long long)m->g->n_tensors);
    return 0;
}

/* Attention: KV heads, head dim (K = V), rotary dims, the norm's epsilon and the fixed scales. */
static int load_attention(loader *L, model *m) {
    const char *a = m->arch_name;
    if (meta_int(L, a, "attention.head_count_kv", m->n_head, 1, m->n_head, &m->n_kv)) return -1;
    if (m->n_head % m->n_kv)
        return fail(L, "metadata %s.attention.head_count %d is not a multiple of head_count_kv %d", a, m->n_head, m->n_kv);
    if (meta_int(L, a, "attention.key_length", m->dim / m->n_head, 1, MODEL_MAX_HEAD_DIM, &m->hd)) return -1;
    int vlen;
    if (meta_int(L, a, "attention.value_length", m->hd, 1, MODEL_MAX_HEAD_DIM, &vlen)) return -1;
    if (vlen != m->hd)
        return fail(L, "metadata %s.attention.value_length %d differs from key_length %d (not supported)", a, vlen, m->hd);
    if ((int64_t)m->n_head * m->hd > MODEL_MAX_QKV)
        return fail(L, "metadata %s.attention.head_count x key_length = %d x %d exceeds %d", a, m->n_head, m->hd,
                    MODEL_MAX_QKV);
    if (meta_int(L, a, "rope.dimension_count", m->hd, 0, m->hd, &m->n_rot)) return -1;
    if (m->n_rot % 2 || (m->arch == ARCH_QWEN3MOE && m->n_rot != m->hd))
        return fail(L, "rope.dimension_count %d does not fit head dim %d", m->n_rot, m->hd);
    if (meta_float(L, a, "attention.layer_norm_rms_epsilon", 1e-5, FLT_MIN, 1, &m->eps)) return -1;   /* > 0 */
    m->neox = m->arch != ARCH_LLAMA;
    m->emb_scale = m->arch == ARCH_GEMMA3 ? sqrtf((float)m->dim) : 1.0f;
    m->attn_scale = 1.0f / sqrtf((float)m->hd);
    return 0;
}

/* RoPE: base and scaling, read as llama.cpp reads them: rope.scaling.type absent means "linear";
 * the factor is rope.scaling.factor or else the older rope.scale_linear (angles at pos / factor;
 * absent, 0 or 1: none); rope.scaling.attn_factor multiplies cos and sin in every layer whatever
 * the type; "yarn" adds the ramp and its own magnitude scale (ops_rope_table). Scaling present is
 * said in warn [warnlen] (when warn is not NULL). */
static int load_rope(loader *L, model *m, char *warn, size_t warnlen) {
    const char *a = m->arch_name;
    backend_rope *rg = &m->rope_global;
    if (meta_float(L, a, "rope.freq_base", m->arch == ARCH_GEMMA3 ? 1000000.0 : 10000.0, 1e-3, 1e30, &rg->base) ||
        meta_float(L, a, "rope.scaling.attn_factor", 1.0, 0, 1e6, &rg->attn_factor))
        return -1;
    rg->freq_scale = 1.0f;
    rg->beta_fast = 32.0f;
    rg->beta_slow = 1.0f;
    rg->n_ctx_orig = m->n_ctx_train;
    char stype[32];
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    int rc = meta_name(L, key, stype, sizeof stype);
    if (rc < 0) return -1;
    if (rc == GGUF_ABSENT) snprintf(stype, sizeof stype, "linear");
    float factor;
    if (meta_float(L, a, "rope.scaling.factor", 0.0, 0, 1e6, &factor)) return -1;
    if (factor == 0 && meta_float(L, a, "rope.scale_linear", 0.0, 0, 1e6, &factor)) return -1;
    if (strcmp(stype, "none") && factor > 0 && factor != 1.0f) {
        rg->freq_scale = 1.0f / factor;
        m->rope_scaled = 1;
        if (!strcmp(stype, "yarn")) {
            rg->ext_factor = 1.0f;
            int orig = 0;
            if (meta_int(L, a, "rope.scaling.original_context_length", m->n_ctx_train, 1, MODEL_MAX_CTX, &orig)) return -1;
            rg->n_ctx_orig = orig;
        } else if (strcmp(stype, "linear")) {
            return fail(L, "RoPE scaling type '%s' is not supported (linear, yarn are)", stype);
        }
        if (warn) snprintf(warn, warnlen, "%s: RoPE %s scaling x%g from the metadata", L->path, stype, factor);
    }
    m->rope_local = *rg;
    if (m->arch == ARCH_GPTOSS &&   /* sliding-window layers: their own base if given, the same scaling */
        meta_float(L, a, "rope.freq_base_swa", rg->base, 1e-3, 1e30, &m->rope_local.base))
        return -1;
    if (m->arch == ARCH_GEMMA3) {   /* local layers: own base, no scaling (attn_factor stays, as in llama.cpp) */
        m->rope_local.base = 10000.0f;
        m->rope_local.freq_scale = 1.0f;
        m->rope_local.ext_factor = 0.0f;
    }
    return 0;
}

/* The weights: the layer table (a hybrid's recurrent layers first), the embedding (n_vocab is its
 * row count), the output matrix (or the tied embedding), the output norm, every layer's tensors, and
 * the sliding windows of gemma3 and gpt-oss. */
static int load_weights(loader *L, model *m) {
    const char *a = m->arch_name;
    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers) return fail(L, "out of memory");
    if (is_hybrid(m)) {
        m->attn_gate = 1;
        if (load_hybrid(L, m)) return -1;
    }
    m->n_attn = 0;
    for (int l = 0; l < m->n_layer; l++) m->n_attn += !m->layers[l].recurrent;
    const gguf_tensor *emb = gguf_tensor_find(m->g, "token_embd.weight");
    if (!emb) return fail(L, "missing tensor token_embd.weight");
    if (emb->ne[1] > MODEL_MAX_VOCAB)
        return fail(L, "tensor token_embd.weight has %llu rows: more than the %d tokens supported",
                    (unsigned long long)emb->ne[1], MODEL_MAX_VOCAB);
    m->n_vocab = (int)emb->ne[1];
    if (get_weight(L, "token_embd.weight", m->n_vocab, m->dim, &m->tok_emb)) return -1;
    /* gpt-oss, qwen2moe: never tied (llama.cpp requires output.weight) */
    if (m->arch == ARCH_GPTOSS || m->arch == ARCH_QWEN2MOE || gguf_tensor_find(m->g, "output.weight")) {
        if (get_weight(L, "output.weight", m->n_vocab, m->dim, &m->output)) return -1;
    } else {
        m->output = m->tok_emb;   /* tied embeddings */
    }
    if (get_vec(L, "output_norm.weight", m->dim, 1, &m->out_norm)) return -1;
    if (load_layers(L, m)) return -1;
    if (m->arch == ARCH_GEMMA3) {
        int window = 0;
        if (meta_int(L, a, "attention.sliding_window", -1, 0, MODEL_MAX_CTX, &window)) return -1;
        for (int l = 0; l < m->n_layer; l++)
            if (l % 6 < 5) {   /* 5 local layers, then 1 global */
                m->layers[l].window = window;
                m->layers[l].rope_local = 1;
            }
    }
    if (m->arch == ARCH_GPTOSS && gptoss_windows(L, m)) return -1;
    return 0;
}

int model_load_as(const char *path, gguf_hold hold, model **out, char *err, size_t errlen, char *warn, size_t warnlen) {
    model *m = calloc(1, sizeof *m);
    loader L = { NULL, path, err, errlen };
    *out = NULL;
    if (warn && warnlen) warn[0] = 0;
    if (!m) return errmsg_set(err, errlen, -1, "out of memory");
    if (gguf_open_as(path, hold, &m->g, err, errlen)) goto fail;
    L.g = m->g;
    if (load_arch(&L, m) || load_sizes(&L, m) || load_attention(&L, m) || load_rope(&L, m, warn, warnlen) ||
        load_weights(&L, m))
        goto fail;
    if (file_sha256(m->g, m->sha256)) { fail(&L, "sha256 failed"); goto fail; }
    *out = m;
    return 0;
fail:
    model_free(m);
    return -1;
}

void model_free(model *m) {
    if (!m) return;
    for (int l = 0; m->layers && l < m->n_layer; l++) {
        backend_layer *ly = &m->layers[l];
        free(ly->attn_norm); free(ly->ffn_norm); free(ly->bq); free(ly->bk); free(ly->bv);
        free(ly->q_norm); free(ly->k_norm); free(ly->post_attn_norm); free(ly->post_ffn_norm);
        free(ly->bo); free(ly->sinks); free(ly->b_router); free(ly->b_gate); free(ly->b_up); free(ly->b_down);
        free(ly->conv_w); free(ly->dt_bias); free(ly->ssm_a); free(ly->ssm_norm);
    }
    free(m->layers);
    free(m->out_norm);
    gguf_close(m->g);
    free(m);
}

/* ---- the backend's view ------------------------------------------------------------------------ */

void model_window(const model *m, int *window, int *n_full) {
    *window = 0;
    *n_full = 0;
    for (int l = 0; l < m->n_layer; l++) {
        if (m->layers[l].window > *window) *window = m->layers[l].window;
        *n_full += m->layers[l].window <= 0;
    }
}

void model_net(const model *m, backend_model *net) {
    memset(net, 0, sizeof *net);
    net->n_layer = m->n_layer;
    net->dim = m->dim;
    net->n_head = m->n_head;
    net->n_kv = m->n_kv;
    net->hd = m->hd;
    net->ffn = m->ffn;
    net->n_expert = m->n_expert;
    net->n_expert_used = m->n_expert_used;
    net->n_vocab = m->n_vocab;
    net->n_rot = m->n_rot;
    net->neox = m->neox;
    net->attn_gate = m->attn_gate;
    net->ssm_conv = m->ssm_conv;
    net->ssm_nk = m->ssm_nk;
    net->ssm_nv = m->ssm_nv;
    net->ssm_d = m->ssm_d;
    net->act = m->arch == ARCH_GEMMA3 ? BACKEND_ACT_GEGLU : m->arch == ARCH_GPTOSS ? BACKEND_ACT_SWIGLU_OAI : BACKEND_ACT_SWIGLU;
    net->gate = m->arch == ARCH_GPTOSS ? BACKEND_GATE_SOFTMAX_TOPK
              : m->arch == ARCH_QWEN2MOE ? BACKEND_GATE_SOFTMAX_PLAIN : BACKEND_GATE_SOFTMAX_ALL;
    net->ffn_sh = m->ffn_sh;
    net->sh_gate_plain = m->arch == ARCH_QWEN35MOE;
    net->eps = m->eps;
    net->emb_scale = m->emb_scale;
    net->attn_scale = m->attn_scale;
    net->rope_global = m->rope_global;
    net->rope_local = m->rope_local;
    net->tok_emb = m->tok_emb;
    net->output = m->output;
    net->out_norm = m->out_norm;
    net->layers = m->layers;
}
