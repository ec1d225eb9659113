/* fuzz_proto.c — the protocol decoder on untrusted bytes (see fuzz.h).
 * Each input is decoded as a request and as a reply with a 1 MiB cap. Properties: the decoder
 * never crashes, never reads past the input (ASan), and every message it accepts re-encodes to
 * bytes y with encode(decode(y)) == y (decoding loses nothing the encoder writes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "tests/fuzz/fuzz.h"

static void one_direction(const uint8_t *data, size_t size, int is_reply) {
    proto_msg m, m2;
    char err[256];
    void *y = NULL, *y2 = NULL;   /* [ny], [ny2] re-encodings */
    size_t ny = 0, ny2 = 0;
    if (proto_decode(data, size, (size_t)1 << 20, is_reply, &m, err, sizeof err)) return;
    if (proto_encode(&m, &y, &ny, err, sizeof err)) {
        fprintf(stderr, "fuzz_proto: a decoded %s %s does not re-encode: %s\n", proto_type_name(m.type),
                is_reply ? "reply" : "request", err);
        abort();
    }
    if (proto_decode(y, ny, (size_t)1 << 21, is_reply, &m2, err, sizeof err) ||
        proto_encode(&m2, &y2, &ny2, err, sizeof err) || ny2 != ny || memcmp(y, y2, ny)) {
        fprintf(stderr, "fuzz_proto: encode(decode(y)) != y for a %s\n", proto_type_name(m.type));
        abort();
    }
    proto_msg_free(&m2);
    proto_msg_free(&m);
    free(y);
    free(y2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_direction(data, size, 0);
    one_direction(data, size, 1);
    return 0;
}
