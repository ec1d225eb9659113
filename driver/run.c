/* run.c — the skeleton every driver command that runs arms goes through (see run.h): arms,
 * local checks, the document, the workers, the tokens, the results folder, stop, render, close.
 * Reading order: the order a command calls the steps in. */
#include "driver/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "driver/cli.h"
#include "kernels/errmsg.h"
#include "proto/proto.h"
#include "proto/safeio.h"

int run_init(run_ctx *r, const volatile sig_atomic_t *stop) {
    memset(r, 0, sizeof *r);
    r->stop = stop;
    r->ref = -1;
    r->tmp_lock = -1;
    if (!(r->warnings = json_array())) { cli_errorf("out of memory"); return RUN_EXIT_RUNTIME; }
    return 0;
}

int run_arms(run_ctx *r, const char *list, const char *ref_name, const workers_arm_opts *ao) {
    char err[2048];
    r->ref = workers_arms_build(list, ref_name, ao, &r->tls, &r->aopt, &r->arms, &r->n_arms, err, sizeof err);
    if (r->ref < 0) { cli_errorf("%s", err); return RUN_EXIT_USAGE; }
    r->n_local = 0;
    for (int i = 0; i < r->n_arms; i++) r->n_local += !r->arms[i].remote;
    return 0;
}

/* Model file sanity before any worker starts: exists, regular, starts with "GGUF". The open does
 * not block: a FIFO or device is refused before anything is read (proto/safeio.h). */
static int check_model(const char *path, char *err, size_t errlen) {
    char why[512];
    int fd = safeio_open_regular(path, SAFEIO_OPTIONAL, NULL, why, sizeof why);
    if (fd == SAFEIO_ABSENT) return errmsg_set(err, errlen, -1, "model not found: %s: %s", path, strerror(ENOENT));
    if (fd < 0) return errmsg_set(err, errlen, -1, "model %s", why);
    char magic[4] = { 0 };
    ssize_t got;
    do got = read(fd, magic, 4);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got != 4 || memcmp(magic, "GGUF", 4)) {
        return errmsg_set(err, errlen, -1, "model %s is not a GGUF file (it does not start with the magic \"GGUF\")",
                          path);
    }
    return 0;
}

int run_check_local(run_ctx *r, const char *model, const char *worker_opt) {
    char err[1024];
    if (cli_exe_dir(r->self_dir)) { cli_errorf("cannot find this program's directory (/proc/self/exe)"); return RUN_EXIT_RUNTIME; }
    if (!r->n_local) return 0;
    if (model && check_model(model, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    for (int i = 0; i < r->n_arms; i++)
        if (r->arms[i].own_model && check_model(r->arms[i].model, err, sizeof err)) {
            cli_errorf("--arm-model %s: %s", r->arms[i].name, err);
            return RUN_EXIT_RUNTIME;
        }
    if (snprintf(r->worker, sizeof r->worker, "%s%s", worker_opt ? worker_opt : r->self_dir,
                 worker_opt ? "" : "/strata-worker") >= (int)sizeof r->worker) {
        cli_errorf("the worker's path is too long");
        return RUN_EXIT_RUNTIME;
    }
    if (access(r->worker, X_OK)) {
        cli_errorf("cannot run the worker %s: %s (build it with make, or pass --worker PATH)", r->worker,
                   strerror(errno));
        return RUN_EXIT_RUNTIME;
    }
    return 0;
}

int run_doc(run_ctx *r, const char *doc, const char *corpus, const char *tokens_file) {
    char err[2048], root[PATH_MAX + 8], repo[PATH_MAX];
    if (snprintf(root, sizeof root, "%s/..", r->self_dir) >= (int)sizeof root || !realpath(root, repo))
        snprintf(repo, sizeof repo, "%s", r->self_dir);
    if (doc_load(doc, corpus, tokens_file, repo, &r->doc, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    if (r->doc.kjv_mismatch) {
        fprintf(stderr, "strata-driver: warning: '%s' gave a text whose sha256 is not %s: results are not "
                "comparable with runs on the standard text\n", DOC_KJV_COMMAND, DOC_KJV_SHA256);
        json_array_append_new(r->warnings, json_string("the KJV corpus differs from the standard text (sha256)"));
    }
    if (r->doc.perldoc_mismatch) {
        fprintf(stderr, "strata-driver: warning: --corpus perldoc gave a text whose sha256 is not %s: results are "
                "not comparable with runs on the standard text\n", DOC_PERLDOC_SHA256);
        json_array_append_new(r->warnings, json_string("the perldoc corpus differs from the standard text (sha256)"));
    }
    return 0;
}

int run_start(run_ctx *r, workers_opts wo) {
    char err[2048];
    wo.worker = r->worker;
    int rc = workers_start(r->arms, r->n_arms, &wo, r->stop, r->tmpdir, sizeof r->tmpdir, &r->tmp_lock, &r->launch,
                           r->warnings, err, sizeof err);
    if (rc == WORKERS_INTERRUPTED) return RUN_EXIT_INTERRUPTED;
    if (rc) { cli_errorf("%s", err); return rc == WORKERS_MISMATCH ? RUN_EXIT_MISMATCH : RUN_EXIT_RUNTIME; }
    return 0;
}

uint64_t run_n_ctx(const run_ctx *r) {
    uint64_t n_ctx = r->arms[r->ref].hello.n_ctx;
    for (int i = 0; i < r->n_arms; i++)
        if (r->arms[i].hello.n_ctx < n_ctx) n_ctx = r->arms[i].hello.n_ctx;
    return n_ctx;
}

int run_tokens(run_ctx *r, int32_t **tokens, size_t *n) {
    arm *ref = &r->arms[r->ref];
    uint32_t V = ref->hello.n_vocab;
    *tokens = r->doc.tokens;
    *n = r->doc.n_tokens;
    r->doc.tokens = NULL;
    if (!*tokens) {
        char err[1024], e[1024];
        size_t cap = proto_tokenize_reply_max(r->doc.n_text);
        if (arm_set_recv_max(ref, cap, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
        if (arm_tokenize(ref, r->doc.text, r->doc.n_text, 1, 0, cap, tokens, n, e, sizeof e)) {
            cli_errorf("tokenize: %s", e);
            return RUN_EXIT_RUNTIME;
        }
    }
    if (*r->stop) return RUN_EXIT_INTERRUPTED;
    for (size_t i = 0; i < *n; i++)
        if ((*tokens)[i] < 0 || (uint32_t)(*tokens)[i] >= V) {
            cli_errorf("token id %d at index %zu is outside the vocabulary (n_vocab %u)", (*tokens)[i], i, V);
            return RUN_EXIT_RUNTIME;
        }
    return 0;
}

int run_folder(run_ctx *r, int clear, const char *const *clear_files) {
    char err[1024], p[PATH_MAX + 64];
    if (cli_mkdir_p(r->out_dir, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    for (size_t i = 0; clear && clear_files && clear_files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", r->out_dir, clear_files[i]);
        unlink(p);
    }
    return 0;
}

void run_stop(run_ctx *r) {
    arm_stop_all(r->arms, r->n_arms, 1, RUN_STOP_GRACE_MS);
    arm_save_logs(r->arms, r->n_arms, r->out_dir);
}

int run_render(run_ctx *r, int (*render)(const char *dir, char *err, size_t errlen), int have_results, int quiet,
               int ret) {
    if (have_results && cli_render(render, r->out_dir, quiet) && ret == RUN_EXIT_OK) ret = RUN_EXIT_RUNTIME;
    return ret;
}

int run_close(run_ctx *r, int ret) {
    if (r->arms) arm_stop_all(r->arms, r->n_arms, 1, RUN_STOP_GRACE_MS);
    arm_tmpdir_remove(r->tmpdir, r->tmp_lock);
    free(r->arms);
    doc_free(&r->doc);
    json_decref(r->warnings);
    if (r->stop && *r->stop && ret != RUN_EXIT_OK) ret = RUN_EXIT_INTERRUPTED;
    memset(r, 0, sizeof *r);
    return ret;
}

void run_machine_string(char *buf, size_t len) {
    struct utsname u;
    char cpu[256] = "unknown CPU";
    if (uname(&u)) strcpy(u.sysname, "?"), strcpy(u.release, "?"), strcpy(u.machine, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon || strncmp(line, "model name", 10)) continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(cpu, sizeof cpu, "%s", v);
            break;
        }
        fclose(f);
    }
    snprintf(buf, len, "%s %s %s; %s; %ld cores", u.sysname, u.release, u.machine, cpu,
             sysconf(_SC_NPROCESSORS_ONLN));
}
