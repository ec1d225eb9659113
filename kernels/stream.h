/* stream.h — the token stream's bookkeeping above the backend implementations, for a model with
 * recurrent layers (qwen35's linear attention, docs/DESIGN.md §3.1.3): the recurrence cannot be
 * undone, so a truncation must bring the states back from a copy. kernels/backend.c keeps one
 * stream per backend handle whose implementation exposes its recurrent state (backend_impl's
 * state_floats / state_get / state_set; the cpu backend does) and routes backend_forward,
 * backend_truncate and backend_route through it:
 *   - the stream's token ids, one per position of the context;
 *   - snapshots of the implementation's whole recurrent state, taken at the end of every forward
 *     of more than one token (a prefill chunk);
 *   - a MoE model's route log: the experts each position used, so that a re-run pins them.
 * A truncation below the depth reached restores the newest snapshot at or below the new depth and
 * re-runs the stream's own tokens from there through the implementation (in chunks of max_tokens,
 * no logit rows, the logged experts pinned): the same bits as the first time, by batch invariance.
 *
 * An implementation without the state calls (llama: llama.cpp's sequence branches) or a model
 * without recurrent layers gets no stream (backend->stream is NULL) and every call goes straight
 * to the implementation. Private to kernels/backend*.c and kernels/stream.c, like backend_impl.h.
 */
#ifndef STRATA_STREAM_H
#define STRATA_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef struct stream stream;   /* opaque */

/* 1 if m has a recurrent layer (a stream is wanted when the implementation exposes its state). */
int stream_wanted(const backend_model *m);

/* Floats of m's whole recurrent state: per linear layer the conv state [conv-1][cd] then S
 * [nv][d][d] (cd = 2*nk*d + nv*d; backend.h), over all linear layers. 0 without them. */
size_t stream_state_floats(const backend_model *m);

/* Bytes a stream of m at a context of n_ctx positions allocates (its snapshots, token ids and
 * route log; the live state is the implementation's): what backend_create adds to the
 * implementation's backend_need.scratch_bytes before anything is reserved. 0 without recurrent
 * layers. */
uint64_t stream_bytes(const backend_model *m, int n_ctx);

/* Allocates *out for m with n_ctx positions and forwards of up to max_T tokens (free with
 * stream_free; *out is NULL on failure). Snapshot pages are committed only when one is taken.
 * Returns 0, or -1 with "out of memory (stream bookkeeping)". */
int stream_create(const backend_model *m, int n_ctx, int max_T, stream **out, char *err, size_t errlen);

/* Frees everything stream_create allocated; NULL is a no-op. */
void stream_free(stream *s);

/* backend_route for b->stream: keeps pin and used (the caller's) for the next stream_forward. */
void stream_route(stream *s, const int32_t *pin, int32_t *used);

/* backend_forward for a handle with b->stream (kernels/backend.h): a forward at pos0 below the
 * depth reached truncates first (stream_truncate); the implementation's forward runs with the
 * pending route, the experts it uses written into the route log (and copied to the caller's
 * used); on success the tokens are recorded and, with T > 1, the state is snapshotted. A forward
 * the implementation will refuse (chunk size, context, a gap) goes to it unchanged for its
 * message. Returns 0, or -1 with the implementation's message. */
int stream_forward(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows, float *logits,
                   char *err, size_t errlen);

/* backend_truncate for a handle with b->stream: below the depth reached, restores the newest
 * snapshot at or below depth (none: the zero state of position 0), drops the snapshots above
 * depth, truncates the implementation to the snapshot's depth and re-runs the stream's tokens from
 * there to depth (chunks of max_T, no rows, a MoE model's logged experts pinned), keeping the
 * result as a snapshot; otherwise the implementation's truncate (its range check and message).
 * Returns 0, or -1 with a message. */
int stream_truncate(backend *b, int depth, char *err, size_t errlen);

#endif
