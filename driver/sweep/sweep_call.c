/* sweep_call.c — the sweep's requests to every arm: timeouts, test hooks, worker faults and
 * restarts; the prefill, truncate and generate requests with their checks; bringing every arm to
 * the journalled position. See sweep_internal.h. */
#include "driver/sweep/sweep_internal.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void sweep_free_reps(proto_msg *rep, int n) {
    for (int i = 0; i < n; i++) proto_msg_free(&rep[i]);
}

/* ============================================================================================
 * Requests: timeouts, test hooks, worker faults
 * ========================================================================================== */

int sweep_request_timeout_ms(double spt, double tokens, int override_ms) {
    if (override_ms > 0) return override_ms;
    if (!(spt > 0)) return SWEEP_TIMEOUT_FIRST_MS;
    double ms = SWEEP_TIMEOUT_FACTOR * spt * (tokens > 1 ? tokens : 1) * 1000.0;
    if (!(ms >= SWEEP_TIMEOUT_MIN_MS)) return SWEEP_TIMEOUT_MIN_MS;
    if (ms > SWEEP_TIMEOUT_MAX_MS) return SWEEP_TIMEOUT_MAX_MS;
    return (int)ms;
}

double sweep_prefill_tokens(int at, int m, int worker_chunk) {
    return (double)m + (worker_chunk > 0 ? (double)(at % worker_chunk) : 0.0);
}

/* Parses STRATA_TEST_FAULT into st->faults. Returns 0 or SWEEP_ERROR. */
int sweep_parse_faults(sweep_state *st, const char *spec, char *err, size_t errlen) {
    const char *p = spec;
    while (p && *p) {
        char act[8] = "";
        long at = 0;
        int a = -1, used = 0;
        int got = sscanf(p, "%7[a-z]@%ld%n:%d%n", act, &at, &used, &a, &used);
        char c = !strcmp(act, "kill") ? 'k' : !strcmp(act, "stop") ? 's' : !strcmp(act, "die") ? 'd'
                 : !strcmp(act, "tear") ? 't' : 0;
        int needs_arm = c == 'k' || c == 's';
        if (got < 2 || !c || at < 0 || needs_arm != (got == 3) || (needs_arm && (a < 0 || a >= st->n)) ||
            (p[used] != ',' && p[used] != 0) || st->n_faults == SWEEP_MAX_FAULTS)
            return errmsg_set(err, errlen, SWEEP_ERROR, "bad STRATA_TEST_FAULT item at \"%s\" (kill@N:ARM, "
                              "stop@N:ARM, die@N, tear@SEQ; comma separated, at most %d)", p, SWEEP_MAX_FAULTS);
        st->faults[st->n_faults++] = (sweep_test_fault){ c, at, a };
        p += used;
        if (*p == ',') p++;
    }
    return 0;
}

/* The test hooks due before request batch st->n_calls. */
static void apply_faults(sweep_state *st) {
    for (int f = 0; f < st->n_faults; f++) {
        const sweep_test_fault *t = &st->faults[f];
        if (t->action == 't' || t->at != st->n_calls) continue;
        if (t->action == 'd') {
            fprintf(stderr, "strata-driver: test hook: killing the driver before request %ld\n", t->at);
            fflush(stderr);
            raise(SIGKILL);
        }
        if (t->arm >= st->n || st->arms[t->arm].remote || st->arms[t->arm].pid <= 0) continue;
        fprintf(stderr, "strata-driver: test hook: %s the worker of arm %s before request %ld\n",
                t->action == 'k' ? "killing" : "stopping", st->arms[t->arm].name, t->at);
        arm_signal(&st->arms[t->arm], t->action == 'k' ? SIGKILL : SIGSTOP);
        /* a killed worker is gone before the request (a death between two requests) */
        for (int w = 0; t->action == 'k' && w < 200 && arm_alive(&st->arms[t->arm]); w++) {
            struct timespec ts = { 0, 10 * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
}

/* Sends st->req to every arm (arm_call_all) with a timeout scaled from the measured rate.
 * what describes the request for messages ("a prefill request (positions 0..99)"); tokens is its
 * size for the timeout and the rate. Returns 0; SWEEP_INTERRUPTED; SWEEP_FAULT when every failing
 * arm is a local worker that died, hung or dropped its connection (st->sa[a].failed marks them,
 * st->fault describes it); else SWEEP_ERROR. On failure the replies are freed. */
int sweep_call(sweep_state *st, int kind, double tokens, const char *what, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    char e[1024];
    st->n_calls++;
    apply_faults(st);
    double spt = kind == SWEEP_KIND_PREFILL ? st->spt_prefill : kind == SWEEP_KIND_DECODE ? st->spt_decode
               : st->spt_prefill > 0 ? st->spt_prefill : st->spt_decode;
    int timeout = sweep_request_timeout_ms(spt, kind == SWEEP_KIND_OTHER ? 1 : tokens, c->request_timeout_ms);
    double t = clock_s();
    int rc = arm_call_all(st->arms, st->n, st->req, st->rep, c->recv_max, timeout, c->stop, st->codes, e, sizeof e);
    if (!rc) {
        double per = (clock_s() - t) / (tokens > 1 ? tokens : 1);
        if (kind == SWEEP_KIND_PREFILL && per > st->spt_prefill) st->spt_prefill = per;
        if (kind == SWEEP_KIND_DECODE && per > st->spt_decode) st->spt_decode = per;
        return 0;
    }
    sweep_free_reps(st->rep, st->n);
    if (rc == ARM_E_INTERRUPTED) return SWEEP_INTERRUPTED;
    int n_fault = 0, other = 0;
    for (int a = 0; a < st->n; a++) {
        int code = st->codes[a];
        st->sa[a].failed = 0;
        if (!code) continue;
        if (!st->arms[a].remote && (code == ARM_E_DIED || code == PROTO_E_TIMEOUT || code == PROTO_E_TRANSPORT)) {
            st->sa[a].failed = 1;
            n_fault++;
        } else {
            other++;
        }
    }
    if (!n_fault || other) return errmsg_set(err, errlen, SWEEP_ERROR, "%s (%s)", e, what);
    /* describe each failed worker: what happened, during which request, its last stderr lines */
    size_t off = 0;
    st->fault[0] = 0;
    for (int a = 0; a < st->n; a++) {
        if (!st->sa[a].failed) continue;
        arm *A = &st->arms[a];
        char how[300], tail[700];
        if (st->codes[a] == ARM_E_DIED) {
            char s[96];
            arm_describe_status(A->status, s, sizeof s);
            snprintf(how, sizeof how, "the worker (pid %d) exited (%s), noticed at", (int)A->pid, s);
        } else if (st->codes[a] == PROTO_E_TIMEOUT) {
            char state = arm_proc_state(A);
            snprintf(how, sizeof how, "the worker (pid %d, state %c%s) sent no reply within %.3g s to", (int)A->pid,
                     state, state == 'T' ? ": stopped" : "", timeout / 1000.0);
        } else {
            snprintf(how, sizeof how, "the connection to the worker (pid %d) failed during", (int)A->pid);
        }
        arm_log_tail_lines(A, 3, tail, sizeof tail);
        int w = snprintf(st->fault + off, sizeof st->fault - off, "%sarm %s: %s %s; its last stderr lines: %s",
                         off ? "; " : "", A->name, how, what, tail[0] ? tail : "(none)");
        if (w > 0) off += (size_t)w;
        if (off >= sizeof st->fault) break;
    }
    errmsg_set(err, errlen, SWEEP_ERROR, "%s", st->fault);
    return SWEEP_FAULT;
}

/* After SWEEP_FAULT: restarts the failed workers (within c->max_restarts), marks them for a
 * rebuild from position 0 and journals a warning. Returns SWEEP_FAULT (continue) or SWEEP_ERROR. */
int sweep_handle_fault(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    fprintf(stderr, "strata-driver: worker fault: %s\n", st->fault);
    if (!c->launch || st->restarts >= c->max_restarts)
        return errmsg_set(err, errlen, SWEEP_ERROR, "%s; giving up after %d worker restart%s (--max-restarts %d)",
                          st->fault, st->restarts, st->restarts == 1 ? "" : "s", c->max_restarts);
    st->restarts++;
    char e[1024];
    for (int a = 0; a < st->n; a++) {
        if (!st->sa[a].failed) continue;
        int rc = arm_restart(&st->arms[a], a, c->launch, c->dial_ms, SWEEP_TIMEOUT_FIRST_MS, c->recv_max, c->stop,
                             e, sizeof e);
        if (rc == ARM_E_INTERRUPTED) return SWEEP_INTERRUPTED;
        if (rc) return errmsg_set(err, errlen, SWEEP_ERROR, "restarting after a worker fault: %s", e);
        st->sa[a].need_full = 1;
        if (!c->quiet)
            fprintf(stderr, "strata-driver: restarted the worker of arm %s (pid %d; restart %d of at most %d); "
                    "continuing from position %d\n", st->arms[a].name, (int)st->arms[a].pid, st->restarts,
                    c->max_restarts, st->pos_done);
    }
    int rc = sweep_warn_loud(st, -1, err, errlen, "worker restarted (%d of at most %d), the sweep continued from position "
                             "%d: %s", st->restarts, c->max_restarts, st->pos_done, st->fault);
    return rc ? rc : SWEEP_FAULT;
}

/* ============================================================================================
 * Bringing every arm to the journalled position
 * ========================================================================================== */

#define CATCHUP_CHUNK 2048   /* tokens per re-prefill request (no rows come back) */

/* One prefill of positions pos..pos+m-1 on every arm (rebuild: on the arms marked need_full), rows as asked.
 * MoE: count = 1 asks every arm for its routing (the caller counts it, sweep_count_routing); in pinned
 * mode the reference arm runs first, alone, and the other arms then get its experts as their pin
 * (with rebuild, the reference must be marked). The replies are in st->rep as after one call. */
int sweep_prefill_step(sweep_state *st, int rebuild, int pos, int m, uint32_t rows, int count, const char *what,
                        char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref;
    int replay = st->pf && pinfile_replaying(st->pf);   /* every arm gets the file's experts */
    int pinned = st->moe && c->pin_experts && !replay;   /* the reference first, then the others */
    if (replay && pinfile_read(st->pf, pos, m, c->tokens + pos, st->pin, err, errlen)) return SWEEP_ERROR;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_NONE, 0, 0);
        if (rebuild && !st->sa[a].need_full) continue;
        if (pinned && a != R) continue;   /* second round */
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + pos);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = rows;
        st->req[a].prefill_req.experts = st->moe && (count || (pinned && a == R));
        if (replay) {
            st->req[a].prefill_req.pin = st->pin;
            st->req[a].prefill_req.n_pin = (size_t)m * st->per_tok;
        }
    }
    double cost = sweep_prefill_tokens(pos, m, c->worker_chunk);
    int rc = sweep_call(st, SWEEP_KIND_PREFILL, cost, what, err, errlen);
    if (rc || !pinned) return rc;
    /* pinned: the reference's experts become the others' pin */
    proto_msg ref = st->rep[R];
    if (ref.prefill_rep.n_experts != (size_t)m * st->per_tok) {
        rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: the routing of %d tokens has %zu expert ids, not %zu",
                        st->arms[R].name, m, ref.prefill_rep.n_experts, (size_t)m * st->per_tok);
        sweep_free_reps(st->rep, n);
        return rc;
    }
    memcpy(st->pin, ref.prefill_rep.experts, sizeof(int32_t) * (size_t)m * st->per_tok);
    /* --pin-experts=FILE being recorded: these positions reach the file (fsync'd) before the
     * journal can claim them */
    if (st->pf && pinfile_record(st->pf, pos, m, c->tokens + pos, st->pin, err, errlen)) {
        sweep_free_reps(st->rep, n);
        return SWEEP_ERROR;
    }
    memset(&st->rep[R], 0, sizeof st->rep[R]);   /* kept in ref while the others run */
    int others = 0;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_NONE, 0, 0);
        if ((rebuild && !st->sa[a].need_full) || a == R) continue;
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + pos);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = rows;
        st->req[a].prefill_req.experts = count;
        st->req[a].prefill_req.pin = st->pin;
        st->req[a].prefill_req.n_pin = (size_t)m * st->per_tok;
        others++;
    }
    if (others) rc = sweep_call(st, SWEEP_KIND_PREFILL, cost, what, err, errlen);
    st->rep[R] = ref;   /* sweep_call() zeroed the reference's slot; its reply comes back */
    if (rc) sweep_free_reps(st->rep, n);
    return rc;
}

/* MoE: adds the routing of m tokens in st->rep to the pending counts: for every arm but the
 * reference, the (token, layer) decisions and those whose set of experts (order aside) differs
 * from the reference's. */
int sweep_count_routing(sweep_state *st, int m, char *err, size_t errlen) {
    const int R = st->c->ref;
    size_t k = st->arms[R].hello.n_expert_used, want = (size_t)m * st->per_tok;
    for (int a = 0; a < st->n; a++)
        if (st->rep[a].prefill_rep.n_experts != want)
            return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: the routing of %d tokens has %zu expert ids, not %zu",
                              st->arms[a].name, m, st->rep[a].prefill_rep.n_experts, want);
    const int32_t *r = st->rep[R].prefill_rep.experts;   /* [m][n_layer][k] */
    for (int a = 0; a < st->n; a++) {
        if (a == R) continue;
        const int32_t *x = st->rep[a].prefill_rep.experts;
        for (size_t d = 0; d < want; d += k) {   /* one (token, layer) decision */
            size_t same = 0;
            for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < k; j++) same += x[d + i] == r[d + j];
            st->sa[a].pend_n++;
            st->sa[a].pend_diff += same != k;
        }
    }
    return 0;
}

/* --pin-experts=FILE: opens it (a resumed recording, after the journal: it keeps what the journal
 * claims); a replayed file must hold every teacher-forced position of the plan, of this document. */
int sweep_open_pin_file(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const proto_hello_rep *h = &st->arms[c->ref].hello;
    if (pinfile_open(c->pin_file, h->n_layer, h->n_expert, h->n_expert_used, h->model_sha256,
                     c->resume ? st->pos_done : 0, &st->pf, err, errlen))
        return SWEEP_ERROR;
    int need = c->depths[c->n_depths - 1];
    if (pinfile_replaying(st->pf) && pinfile_positions(st->pf) < need)
        return errmsg_set(err, errlen, SWEEP_ERROR, "--pin-experts: %s holds the routing of %lld positions; this "
                          "sweep reaches depth %d (record a longer one: a FILE that does not exist is recorded)",
                          c->pin_file, (long long)pinfile_positions(st->pf), need);
    if (pinfile_replaying(st->pf) && pinfile_check_tokens(st->pf, c->tokens, need, err, errlen)) return SWEEP_ERROR;
    if (!c->quiet)
        fprintf(stderr, "strata-driver: %s the experts of %s (%lld positions)\n",
                pinfile_replaying(st->pf) ? "every arm replays" : "recording the reference's experts into",
                c->pin_file, (long long)pinfile_positions(st->pf));
    return 0;
}

/* Arms marked need_full are truncated to 0 and prefilled (no rows) to st->pos_done; the others
 * are truncated back to st->pos_done (they may be ahead after a failed request). */
int sweep_sync_arms(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, p = st->pos_done;
    char what[160];
    int any = 0;
    for (int a = 0; st->moe && a < n; a++) st->sa[a].pend_n = st->sa[a].pend_diff = 0;   /* not journalled: redone */
    /* pinned experts: the reference's routing is what the others replay, so a rebuild rebuilds every arm
     * (a replayed file gives every arm its experts: only the arms that need it are rebuilt) */
    int from_ref = c->pin_experts && !(st->pf && pinfile_replaying(st->pf));
    for (int a = 0; st->moe && from_ref && a < n; a++) any |= st->sa[a].need_full;
    for (int a = 0; any && a < n; a++) st->sa[a].need_full = 1;
    any = 0;
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_TRUNCATE, 0, 0);
        st->req[a].truncate_req.depth = st->sa[a].need_full ? 0 : (uint64_t)p;
        any |= st->sa[a].need_full;
    }
    snprintf(what, sizeof what, "a truncate request (to position %d)", p);
    int rc = sweep_call(st, SWEEP_KIND_OTHER, 1, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < n && !rc; a++)
        if (st->rep[a].truncate_rep.n_past != (st->sa[a].need_full ? 0 : (uint64_t)p))
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: truncate to %d left %llu tokens", st->arms[a].name,
                            st->sa[a].need_full ? 0 : p, (unsigned long long)st->rep[a].truncate_rep.n_past);
    sweep_free_reps(st->rep, n);
    if (rc) return rc;
    if (any && p > 0 && !c->quiet)
        fprintf(stderr, "strata-driver: prefilling the new worker%s to position %d\n", n > 1 ? "s" : "", p);
    for (int q = 0; any && q < p;) {
        if (c->stop && *c->stop) return SWEEP_INTERRUPTED;
        int cap = st->moe ? c->chunk : CATCHUP_CHUNK;   /* MoE: st->pin holds one chunk's routing */
        int m = p - q < cap ? p - q : cap;
        snprintf(what, sizeof what, "a prefill request (positions %d..%d, rebuilding the stream to %d)", q,
                 q + m - 1, p);
        if ((rc = sweep_prefill_step(st, 1, q, m, PROTO_ROWS_NONE, 0, what, err, errlen))) return rc;
        for (int a = 0; a < n && !rc; a++)
            if (st->sa[a].need_full && st->rep[a].prefill_rep.n_past != (uint64_t)(q + m))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: prefill to %d left %llu tokens", st->arms[a].name,
                                q + m, (unsigned long long)st->rep[a].prefill_rep.n_past);
        sweep_free_reps(st->rep, n);
        if (rc) return rc;
        q += m;
    }
    for (int a = 0; a < n; a++) st->sa[a].need_full = 0;
    return 0;
}

/* ============================================================================================
 * Prefill, truncate and generate replies checked against their requests
 * ========================================================================================== */

/* Checks a prefill reply against its request. */
int sweep_check_prefill(const arm *a, const proto_msg *rep, uint64_t n_past, uint32_t V, uint32_t rows,
                         char *err, size_t errlen) {
    const proto_prefill_rep *p = &rep->prefill_rep;
    if (p->n_past != n_past || p->n_rows != rows || (rows && p->n_vocab != V) || (rows && !p->logits))
        return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: prefill reply has n_past %llu, %u rows of %u, "
                       "expected n_past %llu, %u rows of %u", a->name, (unsigned long long)p->n_past,
                       p->n_rows, p->n_vocab, (unsigned long long)n_past, rows, V);
    return 0;
}

/* Truncates the arms with which[a] (NULL: every arm) to depth and checks the replies. why says
 * what for ("back to the depth after the fork probe"). Returns 0 or sweep_call()'s codes. */
int sweep_truncate_arms(sweep_state *st, int depth, const int *which, const char *why, char *err, size_t errlen) {
    char what[200];
    for (int a = 0; a < st->n; a++) {
        proto_init(&st->req[a], which && !which[a] ? PROTO_NONE : PROTO_TRUNCATE, 0, 0);
        st->req[a].truncate_req.depth = (uint64_t)depth;
    }
    snprintf(what, sizeof what, "a truncate request (to %d: %s)", depth, why);
    int rc = sweep_call(st, SWEEP_KIND_OTHER, 1, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < st->n && !rc; a++)
        if ((!which || which[a]) && st->rep[a].truncate_rep.n_past != (uint64_t)depth)
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: truncate to %d left %llu tokens", st->arms[a].name,
                            depth, (unsigned long long)st->rep[a].truncate_rep.n_past);
    sweep_free_reps(st->rep, st->n);
    return rc;
}

/* Sends every arm `generate n = fork_n` at temperature T (0: greedy) with top_p and seed, and
 * checks the replies (kept in st->rep: the caller frees them). Every arm is at depth d. */
int sweep_generate_all(sweep_state *st, int d, double T, double top_p, uint64_t seed, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    char what[200];
    for (int a = 0; a < st->n; a++) {
        proto_init(&st->req[a], PROTO_GENERATE, 0, 0);
        st->req[a].generate_req.n = (uint32_t)c->fork_n;
        st->req[a].generate_req.temperature = T;
        st->req[a].generate_req.seed = seed;
        st->req[a].generate_req.top_p = top_p;
    }
    snprintf(what, sizeof what, "a generate request (the %d-token fork probe at depth %d, temperature %g)",
             c->fork_n, d, T);
    int rc = sweep_call(st, SWEEP_KIND_DECODE, c->fork_n, what, err, errlen);
    if (rc) return rc;
    for (int a = 0; !rc && a < st->n; a++) {
        const proto_generate_rep *g = &st->rep[a].generate_rep;
        if (g->n != (size_t)c->fork_n || !g->tokens || !g->gaps || g->n_past != (uint64_t)d + (uint64_t)c->fork_n - 1)
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s: generate reply has %zu tokens and n_past %llu, "
                            "expected %d and %d", st->arms[a].name, g->n, (unsigned long long)g->n_past,
                            c->fork_n, d + c->fork_n - 1);
    }
    if (rc) sweep_free_reps(st->rep, st->n);
    return rc;

}
