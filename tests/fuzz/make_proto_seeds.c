/* make_proto_seeds.c — writes the protocol fuzzer's seed corpus: one valid encoding of every
 * request and reply type (tests/fuzz/corpus/proto/<type>-<req|rep>.bin), so the fuzzer starts from
 * messages the decoder accepts. Built and run by `make fuzz-seeds`; the output is committed.
 * Usage: make_proto_seeds OUT_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

static int put(const char *dir, const char *name, const proto_msg *m) {
    void *buf = NULL;
    size_t len = 0;
    char err[256], path[1024];
    if (proto_encode(m, &buf, &len, err, sizeof err)) { fprintf(stderr, "%s: %s\n", name, err); return -1; }
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f) fclose(f);
    free(buf);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: make_proto_seeds OUT_DIR\n"); return 2; }
    const char *d = argv[1];
    int32_t toks[5] = { 1, 42, 7, 0, 511 };     /* [5] */
    float rows[2][4] = { { 0.5f, -1.0f, 3.25f, 0.0f }, { 1e-30f, 2.0f, -7.5f, 1e30f } };  /* [2][4] */
    float gaps[5] = { 0.1f, 0.2f, 0.0f, 3.0f, 0.5f };
    char text[] = "Once upon a time\n";
    proto_msg m;
    int rc = 0;

    proto_init(&m, PROTO_HELLO, 0, 1); rc |= put(d, "hello-req", &m);
    proto_init(&m, PROTO_HELLO, 1, 1);
    strcpy(m.hello_rep.engine, "strata-worker 0.1"); strcpy(m.hello_rep.git, "abc");
    strcpy(m.hello_rep.model_sha256, "00ff"); strcpy(m.hello_rep.arch, "llama");
    strcpy(m.hello_rep.tokenizer_hash, "11ee"); strcpy(m.hello_rep.kv_k, "int8");
    strcpy(m.hello_rep.kv_v, "f16"); strcpy(m.hello_rep.device, "cpu");
    m.hello_rep.n_vocab = 512; m.hello_rep.n_ctx = 2048; m.hello_rep.n_layer = 5;
    m.hello_rep.threads = 2; m.hello_rep.kv_bytes_per_token = 1234; m.hello_rep.bos = 1;
    rc |= put(d, "hello-rep", &m);
    proto_init(&m, PROTO_TOKENIZE, 0, 2); m.tokenize_req.text = text; m.tokenize_req.n_text = strlen(text);
    m.tokenize_req.add_bos = 1; rc |= put(d, "tokenize-req", &m);
    proto_init(&m, PROTO_TOKENIZE, 1, 2); m.tokenize_rep.tokens = toks; m.tokenize_rep.n_tokens = 5;
    rc |= put(d, "tokenize-rep", &m);
    proto_init(&m, PROTO_PREFILL, 0, 3); m.prefill_req.tokens = toks; m.prefill_req.n_tokens = 5;
    m.prefill_req.rows = PROTO_ROWS_ALL; rc |= put(d, "prefill-req", &m);
    proto_init(&m, PROTO_PREFILL, 1, 3); m.prefill_rep.n_past = 5; m.prefill_rep.n_vocab = 4;
    m.prefill_rep.n_rows = 2; m.prefill_rep.logits = &rows[0][0]; rc |= put(d, "prefill-rep", &m);
    proto_init(&m, PROTO_GENERATE, 0, 4); m.generate_req.n = 5; m.generate_req.temperature = 0.7;
    m.generate_req.seed = 12345; rc |= put(d, "generate-req", &m);
    proto_init(&m, PROTO_GENERATE, 1, 4); m.generate_rep.tokens = toks; m.generate_rep.gaps = gaps;
    m.generate_rep.n = 5; m.generate_rep.n_past = 10; rc |= put(d, "generate-rep", &m);
    proto_init(&m, PROTO_TRUNCATE, 0, 5); m.truncate_req.depth = 3; rc |= put(d, "truncate-req", &m);
    proto_init(&m, PROTO_TRUNCATE, 1, 5); m.truncate_rep.n_past = 3; rc |= put(d, "truncate-rep", &m);
    proto_init(&m, PROTO_STATS, 0, 6); rc |= put(d, "stats-req", &m);
    proto_init(&m, PROTO_STATS, 1, 6); m.stats_rep.n_past = 3; m.stats_rep.kv_bytes = 4096;
    m.stats_rep.prefill_tokens = 5; m.stats_rep.prefill_seconds = 0.25; m.stats_rep.decode_tokens = 5;
    m.stats_rep.decode_seconds = 0.125; m.stats_rep.peak_rss = 1 << 20; rc |= put(d, "stats-rep", &m);
    proto_init(&m, PROTO_SHUTDOWN, 0, 7); rc |= put(d, "shutdown-req", &m);
    proto_init(&m, PROTO_SHUTDOWN, 1, 7); rc |= put(d, "shutdown-rep", &m);
    proto_error(&m, 8, PROTO_E_RANGE, "depth %d is past n_past %d", 9, 3); rc |= put(d, "error-rep", &m);
    return rc ? 1 : 0;
}
