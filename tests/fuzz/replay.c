/* replay.c — runs a fuzz target over files (make test): each argument is a file or a folder of
 * files; with none, the target's committed seed corpus FUZZ_CORPUS. A file that crashes the
 * target ends the program (ASan/UBSan report it under SAN=1); each file that returns is one pass.
 * Prints "ok - FILE" lines and the closing line "N passed, N failed". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_CORPUS
#error "build with -DFUZZ_CORPUS=\"tests/fuzz/corpus/<target>\""
#endif

/* Runs one file; returns 0, or -1 when it cannot be read. */
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);   /* [n] the input, exactly its size (ASan sees overreads) */
    int ok = buf && n >= 0 && fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (ok) LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return ok ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs a file, or every regular file of a folder in name order. */
static void run_path(const char *path, int *pass, int *fail) {
    struct stat st;
    if (stat(path, &st)) { printf("FAIL - %s: cannot stat\n", path); (*fail)++; return; }
    if (!S_ISDIR(st.st_mode)) {
        if (run_file(path)) { printf("FAIL - %s: cannot read\n", path); (*fail)++; }
        else { printf("ok - %s\n", path); (*pass)++; }
        return;
    }
    DIR *d = opendir(path);
    char **names = NULL;     /* [n] file names of the folder, sorted */
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        run_path(p, pass, fail);
        free(names[i]);
    }
    free(names);
    if (n == 0) { printf("FAIL - %s: no seed files\n", path); (*fail)++; }
}

int main(int argc, char **argv) {
    int pass = 0, fail = 0;
    if (argc < 2) run_path(FUZZ_CORPUS, &pass, &fail);
    for (int i = 1; i < argc; i++) run_path(argv[i], &pass, &fail);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
