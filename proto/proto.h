/* proto.h — the driver <-> worker protocol, whole: include this to speak it.
 *
 *   proto/codec.h      the messages and their bytes: the wire format, the caps, the status codes,
 *                      proto_msg, encode and decode (proto/codec.c, proto/decode.c); no sockets
 *   proto/transport.h  the messages over nng req/rep: listen, dial, TLS, where a worker may listen,
 *                      call / recv / reply (proto/transport.c)
 *
 * Why two headers and this one: the codec needs no nng, so the fuzzer and whatever only turns
 * messages into bytes and back include proto/codec.h alone, and a reader finds the wire format in
 * one file and the sockets in another; every caller in driver/ and worker/ includes proto.h as
 * before and gets both, so the split changed none of them. Ownership is said in each header.
 */
#ifndef STRATA_PROTO_H
#define STRATA_PROTO_H

#include "proto/codec.h"
#include "proto/transport.h"

#endif
