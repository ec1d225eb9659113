/* workers.c — see workers.h. */
#include "driver/workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <ctype.h>
#include <string.h>
#include <unistd.h>

#include "kernels/errmsg.h"

/* ---- the arm options (sweep and needle) ---- */

static int push_str(const char ***arr, int *n, const char *s) {
    const char **na = realloc(*arr, (size_t)(*n + 1) * sizeof *na);
    if (!na) return -1;
    *arr = na;
    na[(*n)++] = s;
    return 0;
}

int workers_arm_opt(workers_arm_opts *a, int c, const char *arg) {
    switch (c) {
    case 'A': return push_str(&a->remote, &a->n_remote, arg) ? -1 : 1;
    case 'B': return push_str(&a->arm_models, &a->n_arm_models, arg) ? -1 : 1;
    case 1001: a->tls_cert = arg; return 1;
    case 1002: a->tls_key = arg; return 1;
    case 1003: a->tls_ca = arg; return 1;
    case 1004: a->launch = arg; return 1;
    case 1005: a->launch_listen = arg; return 1;
    case 1006: a->allow_overcommit = 1; return 1;
    case 1007: a->rope_angles = arg; return 1;
    case 1008: a->mmap_weights = 1; return 1;
    case 1009: a->allow_kv_mismatch = 1; return 1;
    case 1010: a->devices = arg; return 1;
    case 1011:
        if (!strcmp(arg, "host")) a->kv_host = 1;
        else if (!strcmp(arg, "device")) a->kv_host = 0;
        else a->kv_host = -1;   /* refused by workers_arm_opts_check */
        return 1;
    default: return 0;
    }
}

static int device_at(const char *list, int j, char *dev, size_t len);

int workers_arm_opts_check(const workers_arm_opts *a, char *err, size_t errlen) {
    int n_tls = !!a->tls_cert + !!a->tls_key + !!a->tls_ca;
    if (n_tls && n_tls != 3) return errmsg_set(err, errlen, -1, "TLS needs all three of --tls-cert, --tls-key and --tls-ca");
    if (a->launch && arm_launch_check(a->launch, err, errlen)) return -1;
    if (a->launch_listen && !a->launch) return errmsg_set(err, errlen, -1, "--launch-listen goes with --launch");
    if (a->rope_angles && strcmp(a->rope_angles, "exact") && strcmp(a->rope_angles, "f32"))
        return errmsg_set(err, errlen, -1, "--rope-angles: exact or f32, got '%s'", a->rope_angles);
    if (a->kv_host < 0) return errmsg_set(err, errlen, -1, "--kv-resident: host or device");
    char dev[ARM_DEVICE_MAX];
    for (int j = 0, r; a->devices && (r = device_at(a->devices, j, dev, sizeof dev)) != 0; j++)
        if (r < 0)
            return errmsg_set(err, errlen, -1, "--devices '%.60s': a comma-separated list of llama.cpp devices "
                              "(cuda:0, vulkan:1, metal, ...), each 1..%d characters of [A-Za-z0-9:_]",
                              a->devices, ARM_DEVICE_MAX - 1);
    return 0;
}

/* The j-th device of the list (0-based) into dev [len]: 1, 0 past the end, -1 for an entry that is
 * empty, too long or has a character other than [A-Za-z0-9:_]. */
static int device_at(const char *list, int j, char *dev, size_t len) {
    const char *p = list;
    for (int i = 0; i < j; i++) {
        p = strchr(p, ',');
        if (!p) return 0;
        p++;
    }
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= len) return -1;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != ':' && p[i] != '_') return -1;
    memcpy(dev, p, n);
    dev[n] = 0;
    return 1;
}

/* --devices: the local llama arms get the list's devices in turn ("llama" -> "llama:cuda:1"). */
static void assign_devices(arm *arms, int n, const char *list) {
    char dev[ARM_DEVICE_MAX];
    int j = 0, n_dev = 0;
    while (device_at(list, n_dev, dev, sizeof dev) == 1) n_dev++;
    for (int i = 0; i < n && n_dev; i++) {
        if (arms[i].remote || strcmp(arms[i].backend, "llama")) continue;
        device_at(list, j++ % n_dev, dev, sizeof dev);
        snprintf(arms[i].backend, sizeof arms[i].backend, "llama:%s", dev);
    }
}

void workers_arm_opts_free(workers_arm_opts *a) {
    free(a->remote);
    free(a->arm_models);
    memset(a, 0, sizeof *a);
}

int workers_arms_build(const char *list, const char *ref, const workers_arm_opts *a, proto_tls *tls,
                       arm_options *opt, arm **arms, int *n, char *err, size_t errlen) {
    if (list && arm_add_local(list, arms, n, err, errlen)) return -1;
    for (int i = 0; i < a->n_arm_models; i++)
        if (arm_add_model(a->arm_models[i], arms, n, err, errlen)) return -1;
    for (int i = 0; i < a->n_remote; i++)
        if (arm_add_remote(a->remote[i], arms, n, err, errlen)) return -1;
    int r = arm_resolve_formats(*arms, *n, ref, err, errlen);
    if (r < 0) return -1;
    *tls = (proto_tls){ a->tls_cert, a->tls_key, a->tls_ca };
    *opt = (arm_options){ a->tls_cert ? tls : NULL, a->launch, a->launch_listen, a->allow_overcommit,
                          a->rope_angles && !strcmp(a->rope_angles, "f32"), a->mmap_weights,
                          a->allow_kv_mismatch, a->kv_host > 0 };
    arm_set_options(*arms, *n, opt);
    if (a->devices) assign_devices(*arms, *n, a->devices);
    return r;
}

/* Sets each local arm's mem_other, the other workers' weights its worker's memory check counts
 * (--mem-other-weights): with mapped weights (--mmap-weights) the sizes of the distinct model files
 * (by device and inode) the other local arms run, whose page cache is not shared with its file (0 for
 * all when every local arm runs the same file); with copied weights (copied = 1, the default) the
 * size of every other local arm's file, each worker holding its own copy. */
static void other_weights(arm *arms, int n, int copied) {
    for (int i = 0; i < n; i++) {
        struct stat si;
        arms[i].mem_other = 0;
        if (arms[i].remote || stat(arms[i].model, &si)) continue;
        for (int j = 0; j < n; j++) {
            struct stat sj;
            if (j == i || arms[j].remote || stat(arms[j].model, &sj)) continue;
            if (copied) {   /* every other local worker holds its own copy */
                arms[i].mem_other += (uint64_t)sj.st_size;
                continue;
            }
            if (sj.st_dev == si.st_dev && sj.st_ino == si.st_ino) continue;
            int seen = 0;   /* a file already counted for an earlier arm j' */
            for (int k = 0; k < j && !seen; k++) {
                struct stat sk;
                seen = !arms[k].remote && !stat(arms[k].model, &sk) && sk.st_dev == sj.st_dev && sk.st_ino == sj.st_ino;
            }
            if (!seen) arms[i].mem_other += (uint64_t)sj.st_size;
        }
    }
}

int workers_start(arm *arms, int n, const workers_opts *o, const volatile sig_atomic_t *stop, char *tmpdir,
                  size_t tmplen, int *tmp_lock, arm_launch *launch, json_t *warnings, char *err, size_t errlen) {
    int n_local = 0;
    for (int i = 0; i < n; i++) n_local += !arms[i].remote;
    if (n_local) {
        if (arm_tmpdir_create(tmpdir, tmplen, tmp_lock, err, errlen)) return WORKERS_ERROR;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        arm_launch l = { o->worker, o->model, o->threads, o->prefill, o->max_context, tmpdir, n_local };
        if (!l.threads) l.threads = cores / n_local > 1 ? (int)(cores / n_local) : 1;
        if (launch) *launch = l;
        for (int i = 0; i < n; i++)   /* every local arm knows its file: the run's, or its own (--arm-model) */
            if (!arms[i].remote && !arms[i].model[0]) snprintf(arms[i].model, sizeof arms[i].model, "%s", o->model);
        other_weights(arms, n, !(arms[0].opt && arms[0].opt->mmap_weights));
        for (int i = 0; i < n; i++)
            if (!arms[i].remote && arm_spawn(&arms[i], i, &l, err, errlen)) return WORKERS_ERROR;
        if (!o->quiet)
            fprintf(stderr, "strata-driver: started %d worker%s (%d thread%s each), loading %s\n", n_local,
                    n_local > 1 ? "s" : "", l.threads, l.threads > 1 ? "s" : "", o->model);
    }
    for (int i = 0; i < n; i++) {
        int rc = arm_connect(&arms[i], WORKERS_DIAL_MS, WORKERS_REQ_MS, (size_t)1 << 20, stop, err, errlen);
        if (rc == ARM_E_INTERRUPTED) return errmsg_set(err, errlen, WORKERS_INTERRUPTED, "interrupted");
        if (rc) return WORKERS_ERROR;
    }
    char notes[4096] = "";
    if (arm_check_handshake(arms, n, o->quiet ? NULL : stderr, notes, sizeof notes, err, errlen))
        return WORKERS_MISMATCH;
    if (arm_relabel_ran(arms, n, err, errlen)) return WORKERS_MISMATCH;   /* allowed: labelled by what they run */
    for (char *line = notes, *nl; *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) break;
        *nl = 0;
        fprintf(stderr, "strata-driver: note: %s\n", line);
        int seen = 0;   /* a resumed run restored its warnings already */
        for (size_t k = 0; warnings && k < json_array_size(warnings) && !seen; k++)
            seen = json_is_string(json_array_get(warnings, k)) && !strcmp(json_string_value(json_array_get(warnings, k)), line);
        if (warnings && !seen) json_array_append_new(warnings, json_string(line));
    }
    return WORKERS_OK;
}

int workers_stats(arm *a, proto_stats_rep *out, json_t *warnings) {
    proto_msg req, rep;
    char e[700];
    nng_socket_set_ms(a->sock, NNG_OPT_RECVTIMEO, 5000);
    nng_socket_set_ms(a->sock, NNG_OPT_SENDTIMEO, 5000);
    proto_init(&req, PROTO_STATS, 0, 0);
    int rc = arm_call(a, &req, &rep, 4096, e, sizeof e);
    if (!rc) *out = rep.stats_rep;
    proto_msg_free(&rep);
    if (rc == ARM_E_REPLY) {
        char w[800];
        snprintf(w, sizeof w, "%s: the worker's counters are left out of meta.json", e);
        fprintf(stderr, "strata-driver: warning: %s\n", w);
        if (warnings) json_array_append_new(warnings, json_string(w));
    }
    return rc == 0;
}

json_t *workers_arm_json(const arm *a) {
    json_t *ja = json_object();
    json_object_set_new(ja, "name", json_string(a->name));
    json_object_set_new(ja, "kv_k", json_string(a->hello.kv_k));
    json_object_set_new(ja, "kv_v", json_string(a->hello.kv_v));
    json_object_set_new(ja, "kv_bytes_per_token", json_integer((json_int_t)a->hello.kv_bytes_per_token));
    json_object_set_new(ja, "kv_layers", json_string(a->hello.kv_layers));
    json_object_set_new(ja, "url", json_string(a->url));
    json_object_set_new(ja, "remote", json_boolean(a->remote));
    /* the arm's own model: a weight arm (--arm-model) runs another file than the run's "model" */
    json_object_set_new(ja, "weight_arm", json_boolean(a->own_model));
    json_object_set_new(ja, "model", json_pack("{s:o,s:s,s:s,s:i}", "path",
                                               a->model[0] ? json_string(a->model) : json_null(),
                                               "sha256", a->hello.model_sha256, "arch", a->hello.arch,
                                               "n_layer", (json_int_t)a->hello.n_layer));
    json_object_set_new(ja, "device", json_string(a->hello.device));
    return ja;
}

json_t *workers_model_json(const char *path, const proto_hello_rep *h) {
    json_t *model = json_object();
    json_object_set_new(model, "path", json_string(path ? path : "unknown"));
    json_object_set_new(model, "sha256", json_string(h->model_sha256));
    json_object_set_new(model, "arch", json_string(h->arch));
    json_object_set_new(model, "n_vocab", json_integer(h->n_vocab));
    json_object_set_new(model, "n_ctx", json_integer((json_int_t)h->n_ctx));
    json_object_set_new(model, "n_layer", json_integer(h->n_layer));
    json_object_set_new(model, "tokenizer_hash", json_string(h->tokenizer_hash));
    if (h->has_window) {   /* absent: unknown (an older worker) */
        json_object_set_new(model, "window", json_integer(h->window));
        json_object_set_new(model, "layers_full_context", json_integer(h->layers_full));
    }
    return model;
}

int workers_twin(const arm *arms, int i) {
    const proto_hello_rep *a = &arms[i].hello;
    for (int j = 0; j < i; j++) {
        const proto_hello_rep *b = &arms[j].hello;
        if (!strcmp(a->kv_k, b->kv_k) && !strcmp(a->kv_v, b->kv_v) && !strcmp(a->device, b->device) &&
            !strcmp(a->engine, b->engine) && !strcmp(a->git, b->git) &&
            !strcmp(a->model_sha256, b->model_sha256))   /* a weight arm is another configuration */
            return j;
    }
    return -1;
}
