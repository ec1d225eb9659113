/* transport.c — the driver <-> worker messages over nng req/rep: where a worker may listen (listen
 * URLs), the TLS configuration of either end, the endpoints (a worker listens on a rep0 socket, a
 * driver dials from a req0 one; both open through endpoint_open), and one request and its reply.
 * The bytes of a message are proto/codec.c and proto/decode.c; see proto/transport.h for the
 * contract of each function.
 *
 * Who allocates: a socket opened here is the caller's (nng_close). A TLS configuration is made by
 * tls_config and freed here as soon as the listener or dialer holds its own reference. A request
 * or reply is encoded straight into an nng message (nng_msg_alloc) that nng_sendmsg takes over;
 * a received nng message is decoded (payloads copied out, malloc'd by the decoder and owned by the
 * caller's proto_msg) and freed here. PEM texts read for the key check are freed before return. */
#include "proto/transport.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/supplemental/tls/tls.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

static int nng_code(int rv) {
    return rv == NNG_ETIMEDOUT ? PROTO_E_TIMEOUT : PROTO_E_TRANSPORT;
}

static nng_duration to_duration(int timeout_ms) {
    return timeout_ms < 0 ? NNG_DURATION_INFINITE : (nng_duration)timeout_ms;
}

/* ---- listen URLs ---------------------------------------------------------------------------- */

/* The URL's scheme: 1 tcp (tcp4, tcp6), 2 tls+tcp (tls+tcp4, tls+tcp6), 3 ipc or inproc, 0 other.
 * *rest points after "://"; *v6 is 1 for the tcp6 forms. */
static int url_scheme(const char *url, const char **rest, int *v6) {
    static const struct { const char *p; int kind, v6; } k[] = {
        {"tcp://", 1, 0}, {"tcp4://", 1, 0}, {"tcp6://", 1, 1}, {"tls+tcp://", 2, 0}, {"tls+tcp4://", 2, 0},
        {"tls+tcp6://", 2, 1}, {"ipc://", 3, 0}, {"inproc://", 3, 0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].p);
        if (!strncmp(url, k[i].p, n)) { *rest = url + n; *v6 = k[i].v6; return k[i].kind; }
    }
    *rest = url;
    *v6 = 0;
    return 0;
}

/* Splits "HOST:PORT" or "[V6]:PORT" into host [hostlen] (no brackets) and *port_at (the port's
 * text). Returns 0, or -1 when there is no ":PORT" with a decimal port. */
static int split_host_port(const char *hp, char *host, size_t hostlen, const char **port_at) {
    const char *colon;
    size_t hl;
    if (hp[0] == '[') {
        const char *close = strchr(hp, ']');
        if (!close || close[1] != ':') return -1;
        hl = (size_t)(close - hp - 1);
        hp++;
        colon = close + 1;
    } else {
        if (!(colon = strrchr(hp, ':'))) return -1;
        hl = (size_t)(colon - hp);
    }
    if (hl >= hostlen) return -1;
    memcpy(host, hp, hl);
    host[hl] = 0;
    const char *p = colon + 1;
    if (!*p || strlen(p) > 5) return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    if (atoi(p) > 65535) return -1;
    *port_at = p;
    return 0;
}

static int addr_is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    return 0;
}

/* 1 when every address host stands for is a loopback address (a name is resolved). */
static int host_is_loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    if (!host[0] || !strcmp(host, "*")) return 0;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) || !res) return 0;
    int all = 1;
    for (struct addrinfo *r = res; r; r = r->ai_next) all &= addr_is_loopback(r->ai_addr);
    freeaddrinfo(res);
    return all;
}

int proto_listen_url(const char *url, int have_tls, int allow_plain, char *out, size_t outlen,
                     char *err, size_t errlen) {
    const char *rest, *port;
    char host[256];
    int v6, kind = url_scheme(url, &rest, &v6);
    if (!kind)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': use ipc://PATH, tcp://HOST:PORT or "
                          "tls+tcp://HOST:PORT", url);
    if (have_tls && kind != 2)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': --tls-cert/--tls-key/--tls-ca are for "
                          "tls+tcp://HOST:PORT (a plain URL would ignore them)", url);
    if (kind == 3) {
        if (snprintf(out, outlen, "%s", url) >= (int)outlen)
            return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
        return 0;
    }
    if (kind == 2 && !have_tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': tls+tcp:// needs --tls-cert, --tls-key "
                          "and --tls-ca", url);
    if (split_host_port(rest, host, sizeof host, &port))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': expected HOST:PORT after the scheme "
                          "(PORT 0 to 65535)", url);
    size_t scheme_len = (size_t)(rest - url);
    if (!host[0]) {   /* no host: loopback, never every interface */
        if (snprintf(out, outlen, "%.*s%s:%s", (int)scheme_len, url, v6 ? "[::1]" : "127.0.0.1", port) >= (int)outlen)
            return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
        return 0;
    }
    if (kind == 1 && !allow_plain && !host_is_loopback(host))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': plain tcp:// on a non-loopback address "
                          "serves anyone who can reach the port: use tls+tcp:// with --tls-cert, --tls-key and "
                          "--tls-ca, or say --allow-plain-tcp (a trusted network only)", url);
    if (snprintf(out, outlen, "%s", url) >= (int)outlen)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
    return 0;
}

/* ---- TLS ------------------------------------------------------------------------------------ */

/* Reads a PEM file (at most 1 MiB) into *text (malloc'd, NUL-terminated; the caller frees it).
 * Returns 0 or an NNG_E* code. */
static int read_pem(const char *path, char **text) {
    FILE *f = fopen(path, "rb");
    size_t cap = (size_t)1 << 20, n;
    char *t = f ? malloc(cap + 1) : NULL;   /* [cap + 1] */
    int rv = !f ? NNG_ENOENT : !t ? NNG_ENOMEM : 0;
    if (!rv) {
        n = fread(t, 1, cap, f);
        if (ferror(f) || n == cap) rv = NNG_EINVAL;   /* unreadable, or over 1 MiB: not a PEM file */
        else t[n] = 0;
    }
    if (f) fclose(f);
    if (rv) { free(t); return rv; }
    *text = t;
    return 0;
}

/* 1 when the PEM private key belongs to the PEM certificate (checked with libcrypto: mbedTLS 2.28
 * takes a key that does not match, and every handshake then fails without saying why). */
static int key_matches_cert(const char *cert_pem, const char *key_pem) {
    BIO *bc = BIO_new_mem_buf(cert_pem, -1), *bk = BIO_new_mem_buf(key_pem, -1);
    X509 *x = bc ? PEM_read_bio_X509(bc, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = bk ? PEM_read_bio_PrivateKey(bk, NULL, NULL, NULL) : NULL;
    int ok = x && k && X509_check_private_key(x, k) == 1;
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(bk);
    BIO_free(bc);
    return ok;
}

/* A TLS configuration for one end (server: a listening worker; client: a dialling driver, which
 * checks the worker's certificate against server_name). The caller frees *cfg with
 * nng_tls_config_free (an endpoint it was set on keeps its own reference). */
static int tls_config(const proto_tls *t, int server, const char *server_name, nng_tls_config **cfg,
                      char *err, size_t errlen) {
    const char *what = "nng_tls_config_alloc";
    char *cert_pem = NULL, *key_pem = NULL;   /* the files' text, NUL-terminated (read_pem) */
    int rv;
    *cfg = NULL;
    if (!t || !t->cert || !t->key || !t->ca || !t->cert[0] || !t->key[0] || !t->ca[0])
        return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS needs all three of --tls-cert, --tls-key and --tls-ca");
    const char *files[3] = { t->cert, t->key, t->ca };
    for (int i = 0; i < 3; i++)
        if (access(files[i], R_OK))
            return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS: cannot read %s: %s", files[i], strerror(errno));
    if ((rv = nng_tls_config_alloc(cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT))) goto fail;
    what = "the CA file (--tls-ca: PEM certificates)";
    if ((rv = nng_tls_config_ca_file(*cfg, t->ca))) goto fail;
    what = "the certificate and key (--tls-cert, --tls-key: PEM; do they match?)";
    if ((rv = read_pem(t->cert, &cert_pem)) || (rv = read_pem(t->key, &key_pem))) goto fail;
    if (!key_matches_cert(cert_pem, key_pem)) { rv = NNG_EINVAL; goto fail; }
    if ((rv = nng_tls_config_own_cert(*cfg, cert_pem, key_pem, NULL))) goto fail;
    what = "nng_tls_config_auth_mode";
    if ((rv = nng_tls_config_auth_mode(*cfg, NNG_TLS_AUTH_MODE_REQUIRED))) goto fail;
    what = "nng_tls_config_version";
    if ((rv = nng_tls_config_version(*cfg, NNG_TLS_1_2, NNG_TLS_1_3))) goto fail;
    what = "nng_tls_config_server_name";
    if (!server && server_name && (rv = nng_tls_config_server_name(*cfg, server_name))) goto fail;
    free(cert_pem);
    free(key_pem);
    return 0;
fail:
    if (*cfg) nng_tls_config_free(*cfg);
    *cfg = NULL;
    free(cert_pem);
    free(key_pem);
    return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS: %s: %s", what, nng_strerror(rv));
}

/* Checks that tls is given exactly for a tls+tcp URL; for one, also its host (the server name). */
static int tls_for_url(const char *url, const proto_tls *tls, char *host, size_t hostlen, char *err,
                       size_t errlen) {
    const char *rest, *port;
    int v6, kind = url_scheme(url, &rest, &v6);
    host[0] = 0;
    if (kind == 2 && !tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: tls+tcp:// needs --tls-cert, --tls-key and --tls-ca", url);
    if (kind != 2 && tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: TLS certificates are only for tls+tcp:// URLs", url);
    if (kind == 2 && split_host_port(rest, host, hostlen, &port))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: expected tls+tcp://HOST:PORT", url);
    return 0;
}

/* ---- endpoints: what listen and dial share -------------------------------------------------- */

/* A socket option in milliseconds, and its name for an error message. */
typedef struct {
    const char *opt;                   /* NNG_OPT_* */
    const char *what;                  /* "set NNG_OPT_..." */
    nng_duration ms;
} ms_option;
#define MS_OPTION(opt, ms) { opt, "set " #opt, ms }

/* Sets opts[n] on s in order. Returns 0, or nng's error with *what naming the option. */
static int set_ms_options(nng_socket s, const ms_option *opts, int n, const char **what) {
    for (int i = 0; i < n; i++) {
        int rv = nng_socket_set_ms(s, opts[i].opt, opts[i].ms);
        if (rv) { *what = opts[i].what; return rv; }
    }
    return 0;
}

/* How the messages of either end begin: "listen on URL: ..." (server), "dial URL: ..." (client). */
static const char *end_verb(int server) {
    return server ? "listen on" : "dial";
}

/* A step after the socket opened failed: close s, free cfg (may be NULL) and say which step
 * (what) failed with nng's error rv. A listen fails with PROTO_E_TRANSPORT; a dial with
 * PROTO_E_TIMEOUT when nng timed out, else PROTO_E_TRANSPORT. */
static int endpoint_fail(int server, const char *url, nng_socket s, nng_tls_config *cfg, const char *what,
                         int rv, char *err, size_t errlen) {
    nng_close(s);
    if (cfg) nng_tls_config_free(cfg);
    return errmsg_set(err, errlen, server ? PROTO_E_TRANSPORT : nng_code(rv), "%s %s: %s: %s", end_verb(server),
                      url, what, nng_strerror(rv));
}

/* What listen (server = 1) and dial (server = 0) share, up to their listener or dialer: check that
 * tls comes exactly with a tls+tcp:// URL and build its configuration (a client's also checks that
 * the worker's certificate names the URL's host), open the socket (rep0 or req0), and set its
 * receive cap (recv_max; 0: no limit) and its receive and send timeouts (timeout_ms; < 0: none).
 * On success *s is open and *cfg is the TLS configuration (NULL without TLS), both the caller's: it
 * sets *cfg on its endpoint and frees it with nng_tls_config_free (the endpoint keeps its own
 * reference), or hands both to endpoint_fail. On failure nothing is left open or allocated
 * (*cfg = NULL) and err says "listen on URL: ..." or "dial URL: ...". */
static int endpoint_open(int server, const char *url, const proto_tls *tls, size_t recv_max, int timeout_ms,
                         nng_socket *s, nng_tls_config **cfg, char *err, size_t errlen) {
    char host[256], why[600];
    const char *what = server ? "nng_rep0_open" : "nng_req0_open";
    *cfg = NULL;
    int rv, rc = tls_for_url(url, tls, host, sizeof host, why, sizeof why);
    if (!rc && tls) rc = tls_config(tls, server, server ? NULL : host, cfg, why, sizeof why);
    if (rc) return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "%s %s: %s", end_verb(server), url, why);
    if ((rv = server ? nng_rep0_open(s) : nng_req0_open(s))) {
        if (*cfg) nng_tls_config_free(*cfg);
        *cfg = NULL;
        return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "%s %s: %s: %s", end_verb(server), url, what,
                          nng_strerror(rv));
    }
    const ms_option timeouts[] = {
        MS_OPTION(NNG_OPT_RECVTIMEO, to_duration(timeout_ms)),
        MS_OPTION(NNG_OPT_SENDTIMEO, to_duration(timeout_ms)),
    };
    what = "set NNG_OPT_RECVMAXSZ";
    if ((rv = nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ, recv_max)) || (rv = set_ms_options(*s, timeouts, 2, &what))) {
        rc = endpoint_fail(server, url, *s, *cfg, what, rv, err, errlen);
        *cfg = NULL;
        return rc;
    }
    return 0;
}

/* The sum of the named counters among the statistics of one endpoint (scope "dialer" or
 * "listener" with that id). The tree is walked here: nng 1.5.2's nng_stat_find_dialer stops after
 * the first top-level scope, so it misses the endpoints of every socket but the first. */
static uint64_t endpoint_stats(const char *scope, int id, const char *const *names, int n) {
    nng_stat *all = NULL;
    uint64_t sum = 0;
    if (id <= 0 || nng_stats_get(&all)) return 0;
    for (nng_stat *ep = nng_stat_child(all); ep; ep = nng_stat_next(ep)) {
        if (strcmp(nng_stat_name(ep), scope)) continue;
        nng_stat *idc = nng_stat_child(ep);
        while (idc && strcmp(nng_stat_name(idc), "id")) idc = nng_stat_next(idc);
        if (!idc || nng_stat_value(idc) != (uint64_t)id) continue;
        for (nng_stat *c = nng_stat_child(ep); c; c = nng_stat_next(c))
            for (int i = 0; i < n; i++)
                if (!strcmp(nng_stat_name(c), names[i])) sum += nng_stat_value(c);
        break;
    }
    nng_stats_free(all);
    return sum;
}

/* ---- listen: the worker's end --------------------------------------------------------------- */

int proto_listen(const char *url, size_t recv_max, int timeout_ms, nng_socket *s,
                 char *err, size_t errlen) {
    return proto_listen_tls(url, recv_max, timeout_ms, NULL, NULL, NULL, s, NULL, err, errlen);
}

int proto_listen_notify(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                        nng_socket *s, char *err, size_t errlen) {
    return proto_listen_tls(url, recv_max, timeout_ms, cb, arg, NULL, s, NULL, err, errlen);
}

int proto_listen_tls(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                     const proto_tls *tls, nng_socket *s, nng_listener *lst, char *err, size_t errlen) {
    nng_tls_config *cfg;
    nng_listener l;
    const char *what;
    int rv, rc = endpoint_open(1, url, tls, recv_max ? recv_max : PROTO_REQ_MAX, timeout_ms, s, &cfg, err, errlen);
    if (rc) return rc;
    if (cb && ((rv = nng_pipe_notify(*s, NNG_PIPE_EV_ADD_PRE, cb, arg)) ||
               (rv = nng_pipe_notify(*s, NNG_PIPE_EV_REM_POST, cb, arg)))) {
        what = "nng_pipe_notify"; goto fail;
    }
    if ((rv = nng_listener_create(&l, *s, url))) { what = "nng_listener_create"; goto fail; }
    if (cfg && (rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg))) { what = "set NNG_OPT_TLS_CONFIG"; goto fail; }
    if ((rv = nng_listener_start(l, 0))) { what = "nng_listen"; goto fail; }
    if (lst) *lst = l;
    if (cfg) nng_tls_config_free(cfg);   /* the listener holds its own reference */
    return 0;
fail:
    return endpoint_fail(1, url, *s, cfg, what, rv, err, errlen);
}

int proto_listener_port(nng_listener l) {
    int port = 0;
    if (nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port)) return 0;
    return port;
}

uint64_t proto_listener_refused(nng_listener l) {
    static const char *const names[] = { "auth", "proto", "other", "reject" };
    return endpoint_stats("listener", nng_listener_id(l), names, 4);
}

/* ---- dial: the driver's end ----------------------------------------------------------------- */

/* Over TLS, why the dialer's handshakes say this worker will not take us, or NULL while they do
 * not: a handshake that failed authentication fails again, so say so now, not at the timeout.
 * "auth": a certificate did not verify (the worker's here, or ours there: the worker's alert says
 * so); "other": the worker hung up during the handshake (e.g. we sent no certificate). Twice
 * "other": not a worker that is still starting. */
static const char *dial_tls_refused(nng_dialer d) {
    static const char *const auth[] = { "auth" }, *const other[] = { "other" };
    if (endpoint_stats("dialer", nng_dialer_id(d), auth, 1) >= 1) return "a certificate was refused";
    if (endpoint_stats("dialer", nng_dialer_id(d), other, 1) >= 2) return "the worker closed the connection";
    return NULL;
}

/* Waits until the req socket s has a connection or timeout_ms passes (< 0: forever); over TLS
 * (tls != 0) it looks at the dialer's handshakes every 100 ms in between. Returns 0 with s open,
 * or PROTO_E_TIMEOUT / PROTO_E_TRANSPORT with s closed. */
static int dial_wait(nng_socket s, nng_dialer d, const char *url, int timeout_ms, int tls, char *err,
                     size_t errlen) {
    int fd, rv;
    /* The req socket's send descriptor becomes readable once a connection to a rep peer is up. */
    if ((rv = nng_socket_get_int(s, NNG_OPT_SENDFD, &fd)))
        return endpoint_fail(0, url, s, NULL, "get NNG_OPT_SENDFD", rv, err, errlen);
    int64_t deadline = clock_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        int wait = -1;
        if (timeout_ms >= 0) {
            int64_t left = deadline - clock_ms();
            wait = left > 0 ? (int)left : 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (tls && (wait < 0 || wait > 100)) wait = 100;   /* TLS: look at the handshakes in between */
        int n = poll(&pfd, 1, wait);
        if (n > 0) return 0;
        if (n == 0 && tls) {
            const char *refused = dial_tls_refused(d);
            if (refused) {
                nng_close(s);
                return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: TLS handshake failed (%s): check that "
                                  "our --tls-ca signed the worker's certificate and that it names this host, and that "
                                  "the CA the worker trusts signed our --tls-cert", url, refused);
            }
            if (timeout_ms >= 0 && clock_ms() < deadline) continue;
        }
        if (n == 0) {
            nng_close(s);
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "dial %s: no worker answered within %d ms%s",
                        url, timeout_ms, tls ? " (over TLS: also check that the worker's certificate names "
                        "this host and that each side's --tls-ca signed the other's --tls-cert)" : "");
        }
        if (errno != EINTR) {
            int e = errno;
            nng_close(s);
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: poll: %s", url, strerror(e));
        }
    }
}

int proto_dial(const char *url, int timeout_ms, size_t recv_max, nng_socket *s,
               char *err, size_t errlen) {
    return proto_dial_tls(url, timeout_ms, recv_max, NULL, s, err, errlen);
}

int proto_dial_tls(const char *url, int timeout_ms, size_t recv_max, const proto_tls *tls, nng_socket *s,
                   char *err, size_t errlen) {
    /* A request is never resent (one that crashed a worker must not reach its successor); retry
     * quickly while the worker starts, then at most every 200 ms. */
    static const ms_option retry[] = {
        MS_OPTION(NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE),
        MS_OPTION(NNG_OPT_RECONNMINT, 10),
        MS_OPTION(NNG_OPT_RECONNMAXT, 200),
    };
    nng_tls_config *cfg;
    nng_dialer d;
    const char *what;
    int rv, rc = endpoint_open(0, url, tls, recv_max, timeout_ms, s, &cfg, err, errlen);
    if (rc) return rc;
    if ((rv = set_ms_options(*s, retry, 3, &what))) goto fail;
    /* Non-blocking: the dialer keeps retrying in the background until a listener appears. */
    if ((rv = nng_dialer_create(&d, *s, url))) { what = "nng_dialer_create"; goto fail; }
    if (cfg && (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg))) { what = "set NNG_OPT_TLS_CONFIG"; goto fail; }
    if ((rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK))) { what = "nng_dial"; goto fail; }
    if (cfg) nng_tls_config_free(cfg);   /* the dialer holds its own reference */
    return dial_wait(*s, d, url, timeout_ms, tls != NULL, err, errlen);
fail:
    return endpoint_fail(0, url, *s, cfg, what, rv, err, errlen);
}

/* ---- one request and its reply -------------------------------------------------------------- */

/* Encode straight into an nng message body (no extra copy of a large payload) and send it. */
static int send_msg(nng_socket s, const proto_msg *m, const char *what, char *err, size_t errlen) {
    size_t len;
    int rc = proto_encode_size(m, &len, err, errlen);
    if (rc) return rc;
    nng_msg *msg;
    int rv = nng_msg_alloc(&msg, len);
    if (rv)
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "allocate a %zu-byte %s %s: %s", len,
                    proto_type_name(m->type), what, nng_strerror(rv));
    if ((rc = proto_encode_into(m, nng_msg_body(msg), len, err, errlen))) {
        nng_msg_free(msg);
        return rc;
    }
    if ((rv = nng_sendmsg(s, msg, 0))) {   /* on success nng owns msg */
        nng_msg_free(msg);
        return errmsg_set(err, errlen, nng_code(rv), "send %s %s %" PRIu64 ": %s", proto_type_name(m->type),
                    what, m->id, nng_strerror(rv));
    }
    return 0;
}

int proto_call(nng_socket s, const proto_msg *req, proto_msg *rep, size_t max_len,
               char *err, size_t errlen) {
    memset(rep, 0, sizeof *rep);
    if (req->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "proto_call: the message is a reply, not a request");
    int rc = send_msg(s, req, "request", err, errlen);
    if (rc) return rc;
    nng_msg *msg;
    int rv = nng_recvmsg(s, &msg, 0);
    if (rv)
        return errmsg_set(err, errlen, nng_code(rv), "no reply to %s request %" PRIu64 ": %s",
                    proto_type_name(req->type), req->id, nng_strerror(rv));
    char why[256];
    rc = proto_decode(nng_msg_body(msg), nng_msg_len(msg), max_len, 1, rep, why, sizeof why);
    nng_msg_free(msg);
    if (rc) {
        memset(rep, 0, sizeof *rep);
        return errmsg_set(err, errlen, rc, "bad reply to %s request %" PRIu64 ": %s",
                    proto_type_name(req->type), req->id, why);
    }
    if (rep->type == PROTO_ERROR && (rep->id == req->id || rep->id == 0)) {
        rc = rep->error.code != 0 ? rep->error.code : PROTO_E_BADMSG;
        return errmsg_set(err, errlen, rc, "%s", rep->error.message);
    }
    if (rep->id != req->id || rep->type != req->type) {
        rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "%s request %" PRIu64 " got a %s reply with id %" PRIu64,
                  proto_type_name(req->type), req->id, proto_type_name(rep->type), rep->id);
        proto_msg_free(rep);
        return rc;
    }
    return 0;
}

int proto_recv(nng_socket s, size_t max_len, proto_msg *req, char *err, size_t errlen) {
    nng_pipe p;
    return proto_recv_pipe(s, max_len, req, &p, err, errlen);
}

int proto_recv_pipe(nng_socket s, size_t max_len, proto_msg *req, nng_pipe *pipe, char *err, size_t errlen) {
    memset(req, 0, sizeof *req);
    *pipe = (nng_pipe)NNG_PIPE_INITIALIZER;
    nng_msg *msg;   /* received in place: no copy of the body */
    int rv = nng_recvmsg(s, &msg, 0);
    if (rv) return errmsg_set(err, errlen, nng_code(rv), "receive a request: %s", nng_strerror(rv));
    *pipe = nng_msg_get_pipe(msg);
    int rc = proto_decode(nng_msg_body(msg), nng_msg_len(msg), max_len, 0, req, err, errlen);
    nng_msg_free(msg);
    return rc;
}

int proto_reply(nng_socket s, const proto_msg *rep, char *err, size_t errlen) {
    if (!rep->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "proto_reply: the message is a request, not a reply");
    return send_msg(s, rep, "reply", err, errlen);
}
