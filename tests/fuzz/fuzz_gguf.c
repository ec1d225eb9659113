/* fuzz_gguf.c — the GGUF reader, the tokenizer loader and the model loader on untrusted bytes
 * (see fuzz.h). Each input is opened in memory (gguf_open_mem) and its tokenizer loaded; then the
 * same bytes, written to a memory file, go through model_load (every metadata and tensor check a
 * worker makes before serving). Properties: no crash, no read past the input, no leak (ASan), and
 * a file that opens in memory opens from the memory file too (the two readers agree). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"
#include "worker/gguf.h"
#include "worker/model.h"
#include "worker/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;           /* one memory file for the whole run (the harness's own state) */
    char err[512], warn[512], path[64];
    gguf_file *g = NULL, *g2 = NULL;
    tok_vocab *v = NULL;
    model *m = NULL;
    if (fd < 0 && (fd = memfd_create("fuzz_gguf", 0)) < 0) { perror("memfd_create"); abort(); }
    int in_mem = gguf_open_mem(data, size, &g, err, sizeof err) == 0;
    if (in_mem && tok_load(g, &v, err, sizeof err) == 0) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(v, "Hello world", 11, 1, 0, &ids, &n, err, sizeof err) == 0) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) { fprintf(stderr, "fuzz_gguf: id %d out of range\n", ids[i]); abort(); }
        }
        free(ids);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) { perror("memfd write"); abort(); }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (gguf_open(path, &g2, err, sizeof err) == 0) {
        if (!in_mem) { fprintf(stderr, "fuzz_gguf: opens from a file but not in memory\n"); abort(); }
    } else if (in_mem) {
        fprintf(stderr, "fuzz_gguf: opens in memory but not from a file: %s\n", err);
        abort();
    }
    if (in_mem && model_load(path, &m, err, sizeof err, warn, sizeof warn) == 0) model_free(m);
    gguf_close(g2);
    tok_free(v);
    gguf_close(g);
    return 0;
}
