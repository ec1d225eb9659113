/* test_sweep.c — the driver's pure logic: depth spacing, the deepest prefix, fork indices, arm
 * specs, names and the handshake check (driver/sweep/sweep.h, driver/arm.h).
 *
 * A second mode serves tests/driver.test.sh: `test_sweep --garbage URL` dials a running worker,
 * sends it malformed messages (raw bytes, a msgpack header claiming a 4 GiB array, a valid map
 * with an unknown type), checks that each gets an error reply, then checks that a valid hello
 * is still answered. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver/arm.h"
#include "driver/sweep/sweep.h"
#include "tests/check.h"

/* ---- sweep_depths ---------------------------------------------------------------------------- */

static void test_depths(void) {
    int d[64];
    CHECK(sweep_depths(2040, 4, d) == 0 && d[0] == 510 && d[1] == 1020 && d[2] == 1530 && d[3] == 2040,
          "2040 over 4 depths: 510 1020 1530 2040 (got %d %d %d %d)", d[0], d[1], d[2], d[3]);
    /* 10/3 = 3.33 -> 3, 20/3 = 6.67 -> 7, 10 */
    CHECK(sweep_depths(10, 3, d) == 0 && d[0] == 3 && d[1] == 7 && d[2] == 10,
          "10 over 3 rounds to nearest: 3 7 10 (got %d %d %d)", d[0], d[1], d[2]);
    /* 5/2 = 2.5 rounds up to 3 */
    CHECK(sweep_depths(5, 2, d) == 0 && d[0] == 3 && d[1] == 5, "a half rounds up: 5 over 2 -> 3 5 (got %d %d)",
          d[0], d[1]);
    CHECK(sweep_depths(5, 5, d) == 0 && d[0] == 1 && d[4] == 5, "D == K gives 1..K");
    CHECK(sweep_depths(4, 5, d) == -1, "D < K is refused");
    CHECK(sweep_depths(100, 0, d) == -1, "K = 0 is refused");
    /* property over many (D, K): strictly increasing, last = D, within 1/2 of k*D/K */
    int ok = 1;
    for (int K = 1; K <= 64 && ok; K += 7)
        for (int D = K; D < 5000 && ok; D = D * 3 / 2 + 1) {
            if (sweep_depths(D, K, d)) { ok = 0; break; }
            for (int k = 1; k <= K; k++) {
                double exact = (double)k * D / K;
                if (fabs(d[k - 1] - exact) > 0.5 + 1e-9 || (k > 1 && d[k - 1] <= d[k - 2])) ok = 0;
            }
            if (d[K - 1] != D) ok = 0;
        }
    CHECK(ok, "depths increase strictly, end at D and are within 1/2 of k*D/K for many (D, K)");
}

/* ---- sweep_max_depth ------------------------------------------------------------------------- */

static void test_max_depth(void) {
    char err[512];
    CHECK(sweep_max_depth(100, 0, 2048, 32, 16, err, sizeof err) == 99, "short document: D = n_tokens - 1");
    CHECK(sweep_max_depth(3000, 0, 2048, 32, 16, err, sizeof err) == 2016, "long document: D = n_ctx - fork");
    CHECK(sweep_max_depth(3000, 500, 2048, 32, 16, err, sizeof err) == 500, "--max-depth caps D");
    err[0] = 0;
    CHECK(sweep_max_depth(3000, 2017, 2048, 32, 16, err, sizeof err) == -1 && strstr(err, "context"),
          "--max-depth past n_ctx - fork is an error naming the context (%s)", err);
    err[0] = 0;
    CHECK(sweep_max_depth(100, 150, 2048, 32, 16, err, sizeof err) == -1 && strstr(err, "document"),
          "--max-depth past the document is an error naming the document (%s)", err);
    err[0] = 0;
    CHECK(sweep_max_depth(10, 0, 2048, 32, 16, err, sizeof err) == -1 && strstr(err, "too short"),
          "fewer tokens than depths: 'too short' (%s)", err);
    CHECK(sweep_max_depth(17, 0, 2048, 32, 16, err, sizeof err) == 16, "17 tokens are just enough for 16 depths");
    CHECK(sweep_max_depth(3000, 0, 32, 32, 1, err, sizeof err) == -1, "no room for the fork probe");
}

/* ---- sweep_fork_index ------------------------------------------------------------------------ */

static void test_fork(void) {
    int32_t a[5] = { 1, 2, 3, 4, 5 }, b[5] = { 1, 2, 3, 4, 5 }, c[5] = { 9, 2, 3, 4, 5 },
            e[5] = { 1, 2, 3, 4, 6 };
    int cen = -1;
    CHECK(sweep_fork_index(a, b, 5, &cen) == 5 && cen == 1, "identical streams: fork = n, censored");
    CHECK(sweep_fork_index(a, c, 5, &cen) == 0 && cen == 0, "first token differs: fork 0");
    CHECK(sweep_fork_index(a, e, 5, &cen) == 4 && cen == 0, "last token differs: fork n-1, not censored");
    CHECK(sweep_fork_index(a, c, 0, &cen) == 0 && cen == 1, "n = 0: censored at 0");
}

/* ---- arm specs and names --------------------------------------------------------------------- */

static void test_specs(void) {
    char k[ARM_FMT_MAX], v[ARM_FMT_MAX], err[256];
    CHECK(arm_spec_parse("f16", NULL, NULL, k, v, err, sizeof err) == 0 && !strcmp(k, "f16") && !strcmp(v, "f16"),
          "f16 -> K f16, V f16");
    CHECK(arm_spec_parse("int8/f16", NULL, NULL, k, v, err, sizeof err) == 0 && !strcmp(k, "int8") && !strcmp(v, "f16"),
          "int8/f16 -> K int8, V f16");
    CHECK(arm_spec_parse("k:int8", "f16", "bf16", k, v, err, sizeof err) == 0 && !strcmp(k, "int8") && !strcmp(v, "bf16"),
          "k:int8 takes V from the reference (got %s/%s)", k, v);
    CHECK(arm_spec_parse("v:q4_0", "f32", "f16", k, v, err, sizeof err) == 0 && !strcmp(k, "f32") && !strcmp(v, "q4_0"),
          "v:q4_0 takes K from the reference (got %s/%s)", k, v);
    CHECK(arm_spec_parse("k:int8", NULL, NULL, k, v, err, sizeof err) == ARM_E_SPEC, "k: without a reference is refused");
    err[0] = 0;
    CHECK(arm_spec_parse("int9", NULL, NULL, k, v, err, sizeof err) == ARM_E_SPEC && strstr(err, "int9"),
          "unknown format refused, named in the message (%s)", err);
    CHECK(arm_spec_parse("int8/", NULL, NULL, k, v, err, sizeof err) == ARM_E_SPEC, "'int8/' refused");
    CHECK(arm_spec_parse("/f16", NULL, NULL, k, v, err, sizeof err) == ARM_E_SPEC, "'/f16' refused");
    CHECK(arm_spec_parse("k:", "f16", "f16", k, v, err, sizeof err) == ARM_E_SPEC, "'k:' refused");
    CHECK(arm_spec_parse("F16", NULL, NULL, k, v, err, sizeof err) == ARM_E_SPEC, "format names are lower case");

    arm *arms = NULL;
    int n = 0;
    CHECK(arm_add_local("f16,int8,f16", &arms, &n, err, sizeof err) == 0 && n == 3 &&
          !strcmp(arms[0].name, "f16") && !strcmp(arms[1].name, "int8") && !strcmp(arms[2].name, "f16#2"),
          "f16,int8,f16 -> f16 int8 f16#2");
    CHECK(arm_add_local("f16", &arms, &n, err, sizeof err) == 0 && n == 4 && !strcmp(arms[3].name, "f16#3"),
          "a third f16 -> f16#3");
    CHECK(arm_add_remote("int8=tcp://127.0.0.1:5555", &arms, &n, err, sizeof err) == 0 && n == 5 &&
          !strcmp(arms[4].name, "int8#2") && arms[4].remote && !strcmp(arms[4].url, "tcp://127.0.0.1:5555"),
          "a remote int8 next to a local one -> int8#2, remote, with its URL");
    int ref = arm_resolve_formats(arms, n, "f16", err, sizeof err);
    CHECK(ref == 0 && !strcmp(arms[2].kv_k, "f16") && !strcmp(arms[1].kv_v, "int8") && !strcmp(arms[4].kv_k, "int8"),
          "resolve: reference f16 at 0, f16#2 stored as f16, remote int8#2 expected int8");
    free(arms);
    arms = NULL;
    n = 0;
    CHECK(arm_add_local("f16,k:int8,v:int8,int8/f16", &arms, &n, err, sizeof err) == 0 &&
          arm_resolve_formats(arms, n, "f16", err, sizeof err) == 0 &&
          !strcmp(arms[1].kv_k, "int8") && !strcmp(arms[1].kv_v, "f16") &&
          !strcmp(arms[2].kv_k, "f16") && !strcmp(arms[2].kv_v, "int8") &&
          !strcmp(arms[3].kv_k, "int8") && !strcmp(arms[3].kv_v, "f16"),
          "k:/v: ablations resolve against the f16 reference");
    err[0] = 0;
    CHECK(arm_resolve_formats(arms, n, "bf16", err, sizeof err) < 0 && strstr(err, "bf16"),
          "a --ref that is not an arm is refused (%s)", err);
    CHECK(arm_resolve_formats(arms, n, "k:int8", err, sizeof err) < 0, "a k: arm cannot be the reference");
    free(arms);
    arms = NULL;
    n = 0;
    /* engine prefixes: llama:SPEC and ref:SPEC set the worker's --backend, the rest of the spec as usual */
    err[0] = 0;
    CHECK(arm_add_local("f16,ref:f16,ref:k:int8,ref:q4_0+f16@0/int8,llama:q8_0,refx:f16", &arms, &n, err, sizeof err) == 0 &&
          n == 6, "f16,ref:f16,ref:k:int8,ref:q4_0+f16@0/int8,llama:q8_0,refx:f16 are six arms (%s)", err);
    err[0] = 0;
    ref = arm_resolve_formats(arms, n, "refx:f16", err, sizeof err);
    CHECK(ref < 0 && strstr(err, "refx:f16"), "refx:f16 is no engine prefix: not a format (%s)", err);
    free(arms);
    arms = NULL;
    n = 0;
    CHECK(arm_add_local("f16,ref:f16,ref:k:int8,ref:q4_0+f16@0/int8,llama:q8_0", &arms, &n, err, sizeof err) == 0 &&
          arm_resolve_formats(arms, n, "f16", err, sizeof err) == 0 && !arms[0].backend[0] &&
          !strcmp(arms[1].backend, "ref") && !strcmp(arms[1].kv_k, "f16") && !strcmp(arms[1].kv_v, "f16") &&
          !strcmp(arms[2].backend, "ref") && !strcmp(arms[2].kv_k, "int8") && !strcmp(arms[2].kv_v, "f16") &&
          !strcmp(arms[3].backend, "ref") && !strcmp(arms[3].kv_k, "q4_0+f16@0") && !strcmp(arms[3].kv_v, "int8") &&
          !strcmp(arms[4].backend, "llama") && !strcmp(arms[4].kv_k, "q8_0") && !strcmp(arms[1].name, "ref:f16"),
          "ref:SPEC arms run --backend ref with SPEC's formats (k: against the reference, mixes too); llama:SPEC --backend "
          "llama; the plain arm no --backend; names keep the prefix (%s)", err);
    CHECK(arm_resolve_formats(arms, n, "ref:f16", err, sizeof err) == 1, "a ref:SPEC arm can be the reference (%s)", err);
    free(arms);
    arms = NULL;
    n = 0;
    CHECK(arm_add_local("f16,,int8", &arms, &n, err, sizeof err) == ARM_E_SPEC, "an empty item is refused");
    free(arms);
    arms = NULL;
    n = 0;
    CHECK(arm_add_local("f16,in t8", &arms, &n, err, sizeof err) == ARM_E_SPEC, "a space in a spec is refused");
    CHECK(arm_add_local("f16#2", &arms, &n, err, sizeof err) == ARM_E_SPEC, "'#' in a spec is refused");
    CHECK(arm_add_remote("int8", &arms, &n, err, sizeof err) == ARM_E_SPEC, "--arm without '=' is refused");
    CHECK(arm_add_remote("=tcp://h:1", &arms, &n, err, sizeof err) == ARM_E_SPEC, "--arm without a name is refused");
    CHECK(arm_add_remote("x=http://h:1", &arms, &n, err, sizeof err) == ARM_E_SPEC, "--arm with an http URL is refused");
    free(arms);
    arms = NULL;
    n = 0;
    /* weight arms (--arm-model) */
    CHECK(arm_add_local("f16,int8", &arms, &n, err, sizeof err) == 0 &&
          arm_add_model("q8=m/q8=x:y.gguf", &arms, &n, err, sizeof err) == 0 &&
          arm_add_model("q4:k:int8=q4.gguf", &arms, &n, err, sizeof err) == 0 &&
          arm_add_model("f16=f.gguf", &arms, &n, err, sizeof err) == 0 && n == 5 &&
          !strcmp(arms[2].name, "q8") && !strcmp(arms[2].model, "m/q8=x:y.gguf") && arms[2].own_model &&
          !arms[2].spec[0] && !strcmp(arms[3].spec, "k:int8") && !strcmp(arms[4].name, "f16#2"),
          "--arm-model NAME=FILE (FILE after the first '='), NAME:SPEC=FILE, a repeated name -> #2");
    CHECK(arm_resolve_formats(arms, n, "f16", err, sizeof err) == 0 && !strcmp(arms[2].kv_k, "f16") &&
          !strcmp(arms[2].kv_v, "f16") && !strcmp(arms[3].kv_k, "int8") && !strcmp(arms[3].kv_v, "f16") &&
          !strcmp(arms[4].kv_k, "f16"), "weight arms: the reference's formats, or SPEC's against the reference (%s)", err);
    CHECK(arm_resolve_formats(arms, n, "int8", err, sizeof err) == 1 && !strcmp(arms[2].kv_k, "int8"),
          "a weight arm without SPEC follows the reference (int8)");
    CHECK(arm_resolve_formats(arms, n, "q8", err, sizeof err) < 0 && strstr(err, "runs its own model"),
          "a weight arm without SPEC cannot be the reference (%s)", err);
    CHECK(arm_resolve_formats(arms, n, "q4", err, sizeof err) < 0, "nor can one with a k: SPEC");
    CHECK(arm_add_model("q8", &arms, &n, err, sizeof err) == ARM_E_SPEC && strstr(err, "NAME=FILE"),
          "--arm-model without '=' is refused");
    CHECK(arm_add_model("q8=", &arms, &n, err, sizeof err) == ARM_E_SPEC, "--arm-model without a file is refused");
    CHECK(arm_add_model("=f.gguf", &arms, &n, err, sizeof err) == ARM_E_SPEC, "--arm-model without a name is refused");
    CHECK(arm_add_model("q 8=f.gguf", &arms, &n, err, sizeof err) == ARM_E_SPEC, "a space in the name is refused");
    CHECK(arm_add_model("q8:int9=f.gguf", &arms, &n, err, sizeof err) == ARM_E_SPEC && strstr(err, "int9"),
          "an unknown format in SPEC is refused (%s)", err);
    CHECK(n == 5, "refused --arm-model arguments add no arm");
    free(arms);
}

/* ---- the handshake check ------------------------------------------------------------------- */

static void make_arm(arm *a, const char *name, const char *k, const char *v) {
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->kv_k, sizeof a->kv_k, "%s", k);
    snprintf(a->kv_v, sizeof a->kv_v, "%s", v);
    proto_hello_rep *h = &a->hello;
    snprintf(h->engine, sizeof h->engine, "strata-worker 0.1");
    snprintf(h->git, sizeof h->git, "abc");
    snprintf(h->model_sha256, sizeof h->model_sha256, "%064d", 7);
    snprintf(h->arch, sizeof h->arch, "llama");
    snprintf(h->tokenizer_hash, sizeof h->tokenizer_hash, "%064d", 9);
    snprintf(h->kv_k, sizeof h->kv_k, "%s", k);
    snprintf(h->kv_v, sizeof h->kv_v, "%s", v);
    snprintf(h->device, sizeof h->device, "cpu");
    h->n_vocab = 512;
    h->n_ctx = 2048;
    h->n_layer = 5;
    h->threads = 1;
    h->bos = 1;
    a->have_hello = 1;
}

static void test_handshake(void) {
    arm a[3];
    char notes[1024], err[1024];
    make_arm(&a[0], "f16", "f16", "f16");
    make_arm(&a[1], "int8", "int8", "int8");
    make_arm(&a[2], "f16#2", "f16", "f16");
    notes[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == 0 && notes[0] == 0,
          "arms differing only in K/V formats pass without notes");
    a[1].hello.model_sha256[0] = 'f';
    err[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "model_sha256"), "a different model sha256 is a mismatch naming the field (%s)", err);
    a[1].hello.model_sha256[0] = '0';
    a[2].hello.n_vocab = 513;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "n_vocab"), "a different vocabulary size is a mismatch");
    a[2].hello.n_vocab = 512;
    snprintf(a[2].hello.tokenizer_hash, sizeof a[2].hello.tokenizer_hash, "x");
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "tokenizer_hash"), "a different tokenizer is a mismatch");
    snprintf(a[2].hello.tokenizer_hash, sizeof a[2].hello.tokenizer_hash, "%064d", 9);
    snprintf(a[1].hello.git, sizeof a[1].hello.git, "def");
    notes[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == 0 && strstr(notes, "git"),
          "a different engine git hash passes with a note");
    snprintf(a[1].hello.git, sizeof a[1].hello.git, "abc");
    snprintf(a[1].hello.kv_k, sizeof a[1].hello.kv_k, "f16");
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "started with"), "a local worker reporting other formats than it was started with is refused");
    a[1].remote = 1;
    notes[0] = err[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "remote arm int8 is named for K/V int8/int8 but its worker runs f16/int8") &&
          strstr(err, "--allow-kv-mismatch"),
          "a remote worker whose name disagrees with its formats is refused, naming both (%s)", err);
    arm_options allow = { .allow_kv_mismatch = 1 };
    arm_set_options(a, 3, &allow);
    notes[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == 0 &&
          strstr(notes, "remote arm int8 is named for K/V int8/int8 but its worker runs f16/int8") &&
          strstr(notes, "label it int8[ran:f16/int8]"),
          "allowed (--allow-kv-mismatch): it passes with a note giving its label (%s)", notes);
    CHECK(arm_relabel_ran(a, 3, err, sizeof err) == 0 && !strcmp(a[1].name, "int8[ran:f16/int8]") &&
          !strcmp(a[0].name, "f16") && !strcmp(a[2].name, "f16#2"),
          "arm_relabel_ran renames only that arm, by what it runs (%s)", a[1].name);
    snprintf(a[1].name, sizeof a[1].name, "int8#2");
    snprintf(a[1].hello.kv_k, sizeof a[1].hello.kv_k, "f16");
    snprintf(a[1].hello.kv_v, sizeof a[1].hello.kv_v, "f16");
    char label[ARM_NAME_MAX];
    CHECK(arm_ran_label(&a[1], label, err, sizeof err) == 0 && !strcmp(label, "int8[ran:f16]#2"),
          "a repeat's label keeps its #k suffix last: int8#2 running f16 -> int8[ran:f16]#2 (%s)", label);
    arm_set_options(a, 3, NULL);

    /* a weight arm: the same tokenizer, vocabulary and BOS; the model may differ */
    make_arm(&a[0], "f16", "f16", "f16");
    make_arm(&a[1], "int8", "int8", "int8");
    make_arm(&a[2], "q8", "f16", "f16");
    a[2].own_model = 1;
    snprintf(a[2].model, sizeof a[2].model, "m/q8.gguf");
    a[2].hello.model_sha256[0] = 'e';
    snprintf(a[2].hello.arch, sizeof a[2].hello.arch, "qwen2");
    a[2].hello.n_layer = 7;
    notes[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == 0 &&
          strstr(notes, "arm q8 runs its own model m/q8.gguf") && strstr(notes, "differ in weights"),
          "a weight arm with another sha256, arch and n_layer passes, with a note (%s)", notes);
    static const char *const tok_fields[3] = { "tokenizer_hash", "n_vocab", "bos" };
    for (int f = 0; f < 3; f++) {
        if (f == 0) snprintf(a[2].hello.tokenizer_hash, sizeof a[2].hello.tokenizer_hash, "x");
        if (f == 1) a[2].hello.n_vocab = 513;
        if (f == 2) a[2].hello.bos = 2;
        err[0] = 0;
        CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
              strstr(err, "same tokenizer") && strstr(err, tok_fields[f]) && strstr(err, " q8="),
              "a weight arm with another %s is refused, naming it (%s)", tok_fields[f], err);
        snprintf(a[2].hello.tokenizer_hash, sizeof a[2].hello.tokenizer_hash, "%064d", 9);
        a[2].hello.n_vocab = 512;
        a[2].hello.bos = 1;
    }
    a[1].hello.model_sha256[0] = 'f';
    err[0] = 0;
    CHECK(arm_check_handshake(a, 3, NULL, notes, sizeof notes, err, sizeof err) == ARM_E_MISMATCH &&
          strstr(err, "model_sha256") && !strstr(err, "q8="),
          "beside a weight arm, the other arms must still share one model (%s)", err);
}

/* ---- --garbage URL: a worker answers malformed messages with errors and keeps serving ---------- */

static int garbage(const char *url) {
    nng_socket s;
    char err[512];
    if (proto_dial(url, 10000, 1 << 20, &s, err, sizeof err)) {
        printf("FAIL - %s\n", err);
        return 1;
    }
    static const unsigned char raw[] = "this is not msgpack \xc1\xc1\xc1";
    static const unsigned char huge_array[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
    /* {"v":1,"type":"nonsense","id":7} */
    static const unsigned char bad_type[] = { 0x83, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e', 0xa8, 'n', 'o',
                                              'n', 's', 'e', 'n', 's', 'e', 0xa2, 'i', 'd', 0x07 };
    const unsigned char *msgs[] = { raw, huge_array, bad_type };
    size_t lens[] = { sizeof raw - 1, sizeof huge_array, sizeof bad_type };
    const char *what[] = { "raw bytes", "an array header claiming 4G elements", "an unknown message type" };
    for (int i = 0; i < 3; i++) {
        int rv = nng_send(s, (void *)msgs[i], lens[i], 0);
        void *buf = NULL;
        size_t len = 0;
        if (!rv) rv = nng_recv(s, &buf, &len, NNG_FLAG_ALLOC);
        proto_msg rep;
        int rc = rv ? -1 : proto_decode(buf, len, 1 << 20, 1, &rep, err, sizeof err);
        CHECK(rv == 0 && rc == 0 && rep.type == PROTO_ERROR && rep.error.code != 0,
              "the worker answers %s with an error reply (%s: %s)", what[i], rv ? nng_strerror(rv) : "code",
              rc == 0 && rep.type == PROTO_ERROR ? rep.error.message : "?");
        if (buf) nng_free(buf, len);
        if (rc == 0) proto_msg_free(&rep);
    }
    proto_msg req, rep;
    proto_init(&req, PROTO_HELLO, 0, 42);
    int rc = proto_call(s, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.type == PROTO_HELLO && rep.hello_rep.n_vocab > 0,
          "after them a valid hello is answered (n_vocab %u)", rc == 0 ? rep.hello_rep.n_vocab : 0);
    proto_msg_free(&rep);
    nng_close(s);
    return check_done();
}

/* ---- request timeouts ------------------------------------------------------------------------ */

static void test_timeouts(void) {
    CHECK(sweep_request_timeout_ms(0.5, 100, 3000) == 3000, "--request-timeout overrides everything");
    CHECK(sweep_request_timeout_ms(0, 100, 0) == SWEEP_TIMEOUT_FIRST_MS, "nothing measured yet: the first timeout (30 min)");
    CHECK(sweep_request_timeout_ms(1e-4, 10, 0) == SWEEP_TIMEOUT_MIN_MS, "a fast request gets the 60 s floor");
    /* 0.05 s per token x 512 tokens = 25.6 s predicted, x 10 = 256 s */
    CHECK(sweep_request_timeout_ms(0.05, 512, 0) == 256000, "10x the predicted time: 256 s for 512 tokens at 20 tok/s (got %d)",
          sweep_request_timeout_ms(0.05, 512, 0));
    CHECK(sweep_request_timeout_ms(0.05, 1024, 0) == 2 * sweep_request_timeout_ms(0.05, 512, 0),
          "the timeout scales with the request's size");
    CHECK(sweep_request_timeout_ms(100, 1e6, 0) == SWEEP_TIMEOUT_MAX_MS, "capped at 6 h");
    CHECK(sweep_request_timeout_ms(NAN, 10, 0) == SWEEP_TIMEOUT_FIRST_MS, "an unmeasured (NaN) rate: the first timeout");
    /* an aligned worker re-runs its chunk's start: 12 tokens after 500 cost 512 (a 12-token
     * timeout killed llama.cpp workers on lavapipe, where 512 tokens take minutes) */
    CHECK(sweep_prefill_tokens(500, 12, 512) == 512.0, "12 tokens after 500, chunk 512: 512 computed (got %g)",
          sweep_prefill_tokens(500, 12, 512));
    CHECK(sweep_prefill_tokens(1024, 512, 512) == 512.0, "a request at a chunk boundary re-runs nothing");
    CHECK(sweep_prefill_tokens(0, 300, 512) == 300.0, "from position 0: the request only");
    CHECK(sweep_prefill_tokens(1500, 20, 1) == 20.0, "chunk 1: nothing to re-run");
    CHECK(sweep_request_timeout_ms(0.63, sweep_prefill_tokens(500, 12, 512), 0) > 40 * sweep_request_timeout_ms(0.63, 12, 0),
          "the timeout follows the re-run (0.63 s/token: %d ms, not %d)",
          sweep_request_timeout_ms(0.63, sweep_prefill_tokens(500, 12, 512), 0), sweep_request_timeout_ms(0.63, 12, 0));
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--garbage")) return garbage(argv[2]);
    test_timeouts();
    test_depths();
    test_max_depth();
    test_fork();
    test_specs();
    test_handshake();
    return check_done();
}
