/* serve.h — strata-worker's --listen server: the driver protocol of proto/proto.h over one engine.
 *
 * One driver owns the worker at a time. The first connection whose hello is answered owns the
 * session (its nng pipe); every request from another connection gets a PROTO_E_BUSY error and
 * changes nothing. When the owner's connection closes the state is reset (n_past 0) and the next
 * hello takes over. At most SERVE_MAX_PIPES (4) connections are kept: a new one replaces the oldest
 * that is not the owner, and one that has not become the owner within --hello-timeout seconds
 * (time spent on the owner's requests not counted) is closed, so connections that never say hello
 * can neither lock the owner out nor stay. A request over the receive cap (the decoder's max_len:
 * a prefill of the whole context or a tokenize text, at most the protocol's 64 MiB) and within
 * nng's frame limit, PROTO_REQ_FRAME_MAX, gets a PROTO_E_TOOBIG reply on a connection that stays
 * open; nng drops a larger frame with its connection. A tokenize request whose text could give more
 * tokens than a reply carries is refused before tokenising (tok_max_tokens).
 *
 * Ownership: serve_run uses the caller's engine (it neither creates nor frees it) and reads the
 * strings of serve_opts, which stay the caller's. Every payload a reply points to is allocated and
 * freed inside serve_run, after the reply has been sent.
 */
#ifndef STRATA_SERVE_H
#define STRATA_SERVE_H

#include <stddef.h>

#include "proto/proto.h"
#include "worker/engine.h"

#define SERVE_HELLO_S   15   /* default --hello-timeout: longer than the driver's 10 s wait for a hello
                                reply, so a driver whose hello went unanswered retries on a new
                                connection before this one is closed under it */

/* How the worker listens (--listen and its companions), and what its hello says it is. */
typedef struct {
    const char *url;
    proto_tls tls;                    /* all NULL: no TLS */
    int allow_plain;                  /* --allow-plain-tcp */
    int exit_on_eof;                  /* --exit-on-stdin-eof */
    int hello_s;                      /* --hello-timeout: seconds a connection may stay without
                                         becoming the owner */
    const char *engine_name, *git;    /* the hello's engine and git fields (the program's build) */
} serve_opts;

/* Catches SIGINT and SIGTERM, listens on so->url and serves until a shutdown request, a signal or
 * (--exit-on-stdin-eof) the end of stdin. Prints "strata-worker: listening URL" on stdout (the URL
 * a client dials) and its log lines on stderr. Returns 0, or 1 with a message in err when it could
 * not listen. */
int serve_run(engine *e, const serve_opts *so, char *err, size_t errlen);

#endif
