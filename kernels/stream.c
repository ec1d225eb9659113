/* stream.c — the token stream's bookkeeping for models with recurrent layers, above the backend
 * implementations (stream.h, docs/DESIGN.md §3.1.3): token ids, snapshots of the recurrent state,
 * the MoE route log, and the restore + re-run of a truncation through the implementation's
 * forward. */
#include "kernels/stream.h"
#include "kernels/backend_impl.h"
#include "kernels/errmsg.h"

#include <stdlib.h>
#include <string.h>

/* Snapshots a stream keeps: as many as fit in STREAM_SNAP_BYTES, at least STREAM_SNAP_MIN, at most
 * STREAM_SNAP_MAX. */
#define STREAM_SNAP_BYTES (1ull << 30)
#define STREAM_SNAP_MIN 4
#define STREAM_SNAP_MAX 64

struct stream {
    size_t n_state;     /* floats of the implementation's whole recurrent state (stream_state_floats) */
    int n_snap;
    float *snap;        /* [n_snap][n_state] snapshots of the state */
    int *snap_pos;      /* [n_snap] the depth a snapshot was taken at (-1: empty) */
    int32_t *toks;      /* [n_ctx] the stream's token ids, for the re-run after a truncation */
    int32_t *route_log; /* [n_ctx][per_tok] the experts each position used (MoE: the re-run pins them, so
                         * a position gets its first bits whatever the pinning of the forward that first
                         * ran it), or NULL (dense) */
    size_t per_tok;     /* n_layer * n_expert_used (MoE), else 0 */
    int n_ctx, max_T;
    int depth;          /* positions 0..depth-1 hold this stream's tokens (the implementation's depth) */
    const int32_t *pin; /* [T][per_tok] the caller's pinned experts for the next forward, or NULL */
    int32_t *used;      /* [T][per_tok] where the caller wants the next forward's experts, or NULL */
};

int stream_wanted(const backend_model *m) {
    for (int l = 0; l < m->n_layer; l++)
        if (m->layers[l].recurrent) return 1;
    return 0;
}

size_t stream_state_floats(const backend_model *m) {
    int n_rec = 0;
    for (int l = 0; l < m->n_layer; l++) n_rec += m->layers[l].recurrent != 0;
    if (n_rec == 0 || m->ssm_conv < 1 || m->ssm_nk < 0 || m->ssm_nv < 0 || m->ssm_d < 0) return 0;
    size_t d = (size_t)m->ssm_d, cd = (2 * (size_t)m->ssm_nk + (size_t)m->ssm_nv) * d;
    return (size_t)n_rec * ((size_t)(m->ssm_conv - 1) * cd + (size_t)m->ssm_nv * d * d);
}

/* The snapshot slots for a state of n_state floats. */
static int snap_count(size_t n_state) {
    uint64_t st = 4ull * n_state, n = st ? STREAM_SNAP_BYTES / st : STREAM_SNAP_MAX;
    return n < STREAM_SNAP_MIN ? STREAM_SNAP_MIN : n > STREAM_SNAP_MAX ? STREAM_SNAP_MAX : (int)n;
}

/* n_layer * n_expert_used for a MoE model, else 0. */
static size_t route_per_tok(const backend_model *m) {
    return m->n_expert > 0 && m->n_expert_used > 0 ? (size_t)m->n_layer * m->n_expert_used : 0;
}

uint64_t stream_bytes(const backend_model *m, int n_ctx) {
    if (!stream_wanted(m)) return 0;
    size_t n_state = stream_state_floats(m);
    uint64_t ctx = n_ctx > 0 ? (uint64_t)n_ctx : 0;
    return 4ull * n_state * snap_count(n_state) + 4ull * ctx + 4ull * ctx * route_per_tok(m);
}

void stream_free(stream *s) {
    if (!s) return;
    free(s->snap);
    free(s->snap_pos);
    free(s->toks);
    free(s->route_log);
    free(s);
}

int stream_create(const backend_model *m, int n_ctx, int max_T, stream **out, char *err, size_t errlen) {
    stream *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) goto oom;
    s->n_state = stream_state_floats(m);
    s->n_snap = snap_count(s->n_state);
    s->per_tok = route_per_tok(m);
    s->n_ctx = n_ctx;
    s->max_T = max_T;
    /* calloc: snapshot pages are committed only when one is taken */
    s->snap = calloc((size_t)s->n_snap * (s->n_state ? s->n_state : 1), sizeof(float));
    s->snap_pos = malloc(sizeof(int) * (size_t)s->n_snap);
    s->toks = calloc((size_t)n_ctx, sizeof(int32_t));
    if (!s->snap || !s->snap_pos || !s->toks) goto oom;
    if (s->per_tok > 0 && !(s->route_log = calloc((size_t)n_ctx * s->per_tok, sizeof(int32_t)))) goto oom;
    for (int i = 0; i < s->n_snap; i++) s->snap_pos[i] = -1;
    *out = s;
    return 0;
oom:
    stream_free(s);
    return errmsg_set(err, errlen, -1, "out of memory (stream bookkeeping)");
}

void stream_route(stream *s, const int32_t *pin, int32_t *used) {
    s->pin = pin;
    s->used = used;
}

/* Keeps the implementation's state as the snapshot of depth s->depth: in the slot that has it, else
 * an empty one, else the one of the smallest depth. */
static void snapshot(backend *b) {
    stream *s = b->stream;
    int slot = -1;
    for (int i = 0; i < s->n_snap && slot < 0; i++)
        if (s->snap_pos[i] == s->depth) slot = i;
    for (int i = 0; i < s->n_snap && slot < 0; i++)
        if (s->snap_pos[i] < 0) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < s->n_snap; i++)
            if (s->snap_pos[i] < s->snap_pos[slot]) slot = i;
    }
    b->impl->state_get(b, s->snap + (size_t)slot * s->n_state);
    s->snap_pos[slot] = s->depth;
}

int stream_truncate(backend *b, int depth, char *err, size_t errlen) {
    stream *s = b->stream;
    if (depth < 0 || depth >= s->depth) {   /* nothing to bring back: the implementation checks the depth */
        if (b->impl->truncate(b, depth, err, errlen)) return -1;
        s->depth = depth;
        return 0;
    }
    int best = -1;
    for (int i = 0; i < s->n_snap; i++)
        if (s->snap_pos[i] >= 0 && s->snap_pos[i] <= depth && (best < 0 || s->snap_pos[i] > s->snap_pos[best])) best = i;
    b->impl->state_set(b, best >= 0 ? s->snap + (size_t)best * s->n_state : NULL);   /* NULL: zeros */
    int from = best >= 0 ? s->snap_pos[best] : 0;
    for (int i = 0; i < s->n_snap; i++)   /* the positions after depth are about to change */
        if (s->snap_pos[i] > depth) s->snap_pos[i] = -1;
    if (b->impl->truncate(b, from, err, errlen)) return -1;
    s->depth = from;
    for (int p = from; p < depth;) {   /* the stream's own tokens again, with the experts they had */
        int T = depth - p < s->max_T ? depth - p : s->max_T;
        if (s->route_log) b->impl->route(b, s->route_log + (size_t)p * s->per_tok, NULL);
        if (b->impl->forward(b, s->toks + p, T, p, NULL, 0, NULL, err, errlen)) return -1;
        p += T;
        s->depth = p;
        if (T > 1) snapshot(b);   /* as the forward that first ran them */
    }
    if (from < depth) snapshot(b);
    return 0;
}

int stream_forward(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows, float *logits,
                   char *err, size_t errlen) {
    stream *s = b->stream;
    const int32_t *pin = s->pin;
    int32_t *used = s->used;
    s->pin = NULL;   /* backend_route applies to this forward only */
    s->used = NULL;
    /* one the implementation refuses before it touches anything: to it as it is, for its message */
    if (T < 1 || T > s->max_T || pos0 < 0 || pos0 + T > s->n_ctx || pos0 > s->depth)
        return b->impl->forward(b, tokens, T, pos0, rows, n_rows, logits, err, errlen);
    if (pos0 < s->depth && stream_truncate(b, pos0, err, errlen)) return -1;
    int32_t *log = s->route_log ? s->route_log + (size_t)pos0 * s->per_tok : NULL;   /* [T][per_tok] */
    if (pin || used || log) b->impl->route(b, pin, log ? log : used);
    if (b->impl->forward(b, tokens, T, pos0, rows, n_rows, logits, err, errlen)) return -1;
    if (used && log) memcpy(used, log, sizeof(int32_t) * (size_t)T * s->per_tok);
    memmove(s->toks + pos0, tokens, sizeof(int32_t) * (size_t)T);
    s->depth = pos0 + T;
    if (T > 1) snapshot(b);   /* a prefill chunk's end: where truncations go back to */
    return 0;
}
