/* transport.h — the driver <-> worker messages over nng req/rep: a worker listens (rep0), a driver
 * dials (req0), plain or with mutual TLS; where a worker may listen (proto_listen_url); one request
 * and its reply (proto_call, proto_recv, proto_reply). Implemented in proto/transport.c; the
 * messages themselves and their bytes are proto/codec.h (included here), and proto/proto.h
 * includes both.
 *
 * Why a header of its own: this is the part that brings nng (and, in transport.c, TLS and name
 * resolution); the codec builds and tests without it.
 *
 * Ownership: a socket opened here (*s) is the caller's, closed with nng_close (which also closes
 * the listener or dialer made on it). proto_tls holds the caller's strings; nothing here keeps
 * them. A message filled by proto_call or proto_recv owns its payloads: release it with
 * proto_msg_free. proto_call and proto_reply only read the message they send.
 */
#ifndef STRATA_PROTO_TRANSPORT_H
#define STRATA_PROTO_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <nng/nng.h>

#include "proto/codec.h"

/* Server side: open a rep0 socket, set NNG_OPT_RECVMAXSZ = recv_max (0 means PROTO_REQ_MAX; a
 * larger message makes nng drop that connection and the socket keeps serving, so to answer an
 * oversize request with PROTO_E_TOOBIG give a recv_max above proto_recv's max_len, e.g.
 * PROTO_REQ_FRAME_MAX), set
 * NNG_OPT_RECVTIMEO and NNG_OPT_SENDTIMEO to timeout_ms (< 0: no timeout), and listen on url.
 * Returns 0 with *s open (close it with nng_close), or PROTO_E_TRANSPORT with a message naming url
 * and nng's error. */
int proto_listen(const char *url, size_t recv_max, int timeout_ms, nng_socket *s,
                 char *err, size_t errlen);

/* The same, with cb(pipe, event, arg) registered for NNG_PIPE_EV_ADD_PRE and NNG_PIPE_EV_REM_POST
 * before listening (cb may close a pipe in ADD_PRE to refuse a connection). cb runs on nng's
 * threads: it must synchronise with the serving thread itself. */
int proto_listen_notify(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                        nng_socket *s, char *err, size_t errlen);

/* ---- remote workers: where a worker listens, and TLS ---------------------------------------- */

/* TLS for tls+tcp:// URLs (nng's TLS transport, mbedTLS): paths of PEM files. Both ends present a
 * certificate and verify the peer's against ca (mutual authentication); a dialling client also
 * checks that the worker's certificate names the URL's host (CN or a DNS subjectAltName; the
 * mbedTLS 2.28 of Debian 12 does not match IP subjectAltNames, so a numeric host must appear as a
 * DNS name or the CN). The strings are the caller's; nothing here keeps them. */
typedef struct {
    const char *cert;                  /* our certificate (chain), PEM */
    const char *key;                   /* its private key, PEM, not encrypted */
    const char *ca;                    /* CA certificate(s) the peer's certificate must chain to */
} proto_tls;

/* Checks a worker's listen URL and writes the one to listen on into out [outlen]:
 *   ipc://, inproc://          unchanged;
 *   tcp://:PORT (no host)      the loopback interface: tcp://127.0.0.1:PORT (tcp6: [::1]);
 *   tcp:// on a host that is not loopback (127.0.0.0/8, ::1, "localhost", a name resolving only
 *                              to those), "*" and 0.0.0.0 included: refused unless allow_plain
 *                              (anyone who can reach the port could use the worker);
 *   tls+tcp://                 needs tls (have_tls != 0); any host; no host = loopback as above.
 * have_tls with a plain tcp:// or ipc:// URL is refused too (certificates that would be ignored).
 * Returns 0, or PROTO_E_BADARG with one message in err. Allocates nothing. */
int proto_listen_url(const char *url, int have_tls, int allow_plain, char *out, size_t outlen,
                     char *err, size_t errlen);

/* proto_listen_notify with TLS (tls: required for a tls+tcp:// URL, must be NULL otherwise); *lst
 * (may be NULL) receives the listener (closed with the socket). A tcp URL with port 0 binds a free
 * port (proto_listener_port). A refused TLS handshake (no certificate, or one the CA did not sign,
 * or bytes that are not TLS) never becomes a connection: cb is not called, the client gets
 * nothing, and proto_listener_refused counts it. */
int proto_listen_tls(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                     const proto_tls *tls, nng_socket *s, nng_listener *lst, char *err, size_t errlen);

/* The TCP port a listener is bound to; 0 for ipc:// or when unknown. */
int proto_listener_port(nng_listener l);

/* Connections the listener dropped before they became pipes (nng's statistics: failed TLS
 * authentication, protocol errors such as a peer that does not speak TLS or SP, other errors);
 * 0 when nng keeps no statistics. */
uint64_t proto_listener_refused(nng_listener l);

/* Client side: open a req0 socket with NNG_OPT_RECVTIMEO = NNG_OPT_SENDTIMEO = timeout_ms (< 0: no
 * timeout), NNG_OPT_REQ_RESENDTIME = infinite (a request is never resent, so one that crashed a
 * worker is not sent to its successor; a lost connection fails the call with PROTO_E_TRANSPORT),
 * NNG_OPT_RECVMAXSZ = recv_max (0: no limit — don't), and dial url in the background, retrying
 * until a worker listens. Waits until connected or timeout_ms passes (< 0: forever).
 * Returns 0 with *s open (close with nng_close), PROTO_E_TIMEOUT if nothing answered in time (socket
 * closed), or PROTO_E_TRANSPORT. Change timeouts later with nng_socket_set_ms(). */
int proto_dial(const char *url, int timeout_ms, size_t recv_max, nng_socket *s,
               char *err, size_t errlen);

/* proto_dial over TLS: tls is required for a tls+tcp:// URL (and must be NULL for other URLs).
 * A worker whose certificate does not verify is never connected: the call times out like a
 * silent peer (nng retries in the background and does not report why), with a message that
 * names the certificates to check. */
int proto_dial_tls(const char *url, int timeout_ms, size_t recv_max, const proto_tls *tls, nng_socket *s,
                   char *err, size_t errlen);

/* Client side: encode *req, send it, receive the reply and decode it (at most max_len bytes) into
 * *rep, which the caller frees with proto_msg_free. Returns:
 *   0                      *rep is a reply of req's type with req's id;
 *   the error reply's code  *rep is the PROTO_ERROR reply (id = req's id, or 0 when the worker
 *                          could not read the id, e.g. an oversized request), its message copied
 *                          to err;
 *   PROTO_E_TIMEOUT / PROTO_E_TRANSPORT  nng failed (peer gone, timeout): *rep zeroed;
 *   PROTO_E_BADMSG etc.    the reply was malformed, or its type or id do not match: *rep zeroed.
 * A worker's error code is never 0: a (bad) error reply with code 0 is returned as PROTO_E_BADMSG. */
int proto_call(nng_socket s, const proto_msg *req, proto_msg *rep, size_t max_len,
               char *err, size_t errlen);

/* Server side: receive one request (nng_recvmsg; decoded in place, payloads copied out) and decode
 * it (at most max_len bytes) into *req (free with proto_msg_free). Returns:
 *   0                      *req holds the request: dispatch it, then proto_reply;
 *   PROTO_E_TIMEOUT        nothing arrived within the socket's receive timeout: do not reply;
 *   PROTO_E_TRANSPORT      the socket failed or was closed: do not reply (stop serving);
 *   any other code         a bad request arrived: reply proto_error(req->id, rc, "%s", err) and
 *                          keep serving (req->id is 0 when the id could not be read). */
int proto_recv(nng_socket s, size_t max_len, proto_msg *req, char *err, size_t errlen);

/* proto_recv that also gives the connection the request came on (*pipe; NNG_PIPE_INITIALIZER when
 * nothing was received): a server binds its session to one pipe. */
int proto_recv_pipe(nng_socket s, size_t max_len, proto_msg *req, nng_pipe *pipe, char *err, size_t errlen);

/* Server side: encode *rep and send it as the reply to the request last received. Encodes straight
 * into an nng message that nng takes over (no second copy of a large payload). Returns 0, an encode
 * error (then nothing was sent: reply an error instead), or PROTO_E_TIMEOUT / PROTO_E_TRANSPORT
 * with nng's error in err. */
int proto_reply(nng_socket s, const proto_msg *rep, char *err, size_t errlen);

#endif
