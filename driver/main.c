/* strata-driver — the driver's commands: runs the arms of a sweep or a needle bench (one
 * strata-worker per KV configuration) into a results folder; re-renders and compares results
 * folders.
 *
 *   strata-driver sweep --model M [--doc F | --corpus DIR | --tokens-file F] [--arms f16,int8] ...
 *                                                               (driver/sweep/sweep_cmd.c, sweep_cli.c)
 *   strata-driver needle --model M [--arms f16,int8] [--lengths ...] ...   (driver/needle/needle.c)
 *   strata-driver report DIR
 *   strata-driver compare DIR1 DIR2
 *
 * Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 arms mismatch (model or tokenizer differ),
 * 130 interrupted (Ctrl-C / SIGTERM; what was measured so far is kept and rendered).
 *
 * Reading order: usage; the command line as one string; signals; report and compare; main. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/cli.h"
#include "driver/needle/needle.h"
#include "driver/report/report.h"
#include "driver/run.h"
#include "driver/sweep/sweep.h"

#ifndef STRATA_GIT
#define STRATA_GIT "unknown"
#endif

static void usage_main(FILE *f) {
    fprintf(f,
        "usage: strata-driver COMMAND [options]   (COMMAND --help for details)\n"
        "  sweep     measure what KV-cache formats do to a model's output along one document\n"
        "  report    re-render README.md, summary.json and plots of a results folder\n"
        "  compare   compare two results folders (Markdown on stdout)\n"
        "  needle    needle in a haystack: retrieval accuracy and the key's log-prob per KV format\n"
        "exit codes: 0 ok, 1 runtime error, 2 usage error, 3 arms mismatch, 130 interrupted\n");
}

static void usage_report(FILE *f) {
    fprintf(f,
        "usage: strata-driver report DIR [--margin-ppl PCT] [--margin-top1 PP]\n"
        "Re-renders DIR/README.md, DIR/summary.json and DIR/plots/ from DIR/meta.json and the TSVs\n"
        "(no model needed); a needle folder (meta.json \"kind\": \"needle\") from its cells.tsv.\n"
        "  --margin-ppl PCT    equivalence margin on the PPL change, percent (default: meta.json's, else 1)\n"
        "  --margin-top1 PP    equivalence margin on top-1 agreement, percentage points (default: meta.json's,\n"
        "                      else 1)\n"
        "example:\n"
        "  strata-driver report results/2025-01-01-stories260K-f16-int8\n");
}

static void usage_compare(FILE *f) {
    fprintf(f,
        "usage: strata-driver compare DIR1 DIR2\n"
        "Prints a Markdown comparison of two results folders on stdout: setup differences and, for\n"
        "each arm in both, the summary statistics and the KL / fork by depth.\n"
        "example:\n"
        "  strata-driver compare results/2025-01-01-a results/2025-01-02-b > diff.md\n");
}

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

/* argv as one shell-quoted line (malloc'd, caller frees; NULL when out of memory). */
static char *shell_join(int argc, char **argv) {
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    if (!m) return NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int safe = a[0] != 0;
        for (const char *q = a; *q; q++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@%", *q)) safe = 0;
        if (i) fputc(' ', m);
        if (safe) { fputs(a, m); continue; }
        fputc('\'', m);
        for (const char *q = a; *q; q++) *q == '\'' ? fputs("'\\''", m) : fputc(*q, m);
        fputc('\'', m);
    }
    if (fclose(m)) { free(line); return NULL; }
    return line;
}

/* ============================================================================================
 * Signals: the handlers only raise a flag; the commands check it between (and during) requests.
 * A second signal exits at once (the workers die with the driver through PR_SET_PDEATHSIG).
 * ========================================================================================== */

static volatile sig_atomic_t g_stop;   /* written by the signal handler only */

static void on_signal(int sig) {
    if (g_stop) _exit(RUN_EXIT_INTERRUPTED);
    g_stop = sig;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ============================================================================================
 * report, compare
 * ========================================================================================== */

static int cmd_report(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage_report(stdout); return RUN_EXIT_OK; }
    if (argc < 2 || argv[1][0] == '-' || argc % 2 != 0) { usage_report(stderr); return RUN_EXIT_USAGE; }
    report_render_opts ro = {NAN, NAN};
    for (int i = 2; i + 1 < argc; i += 2) {
        char *end = NULL;
        double v = strtod(argv[i + 1], &end);
        int ppl = !strcmp(argv[i], "--margin-ppl"), top1 = !strcmp(argv[i], "--margin-top1");
        if ((!ppl && !top1) || end == argv[i + 1] || *end || !(v > 0 && v < 100)) {
            cli_errorf("report: %s '%s': expected --margin-ppl or --margin-top1 with a number in (0, 100)",
                       argv[i], argv[i + 1]);
            return RUN_EXIT_USAGE;
        }
        if (ppl) ro.margin_ppl = v;
        else ro.margin_top1 = v;
    }
    char err[2048];
    if (needle_is_results(argv[1]) ? needle_report_render(argv[1], err, sizeof err)
                                   : report_render_opts_run(argv[1], &ro, err, sizeof err)) {
        cli_errorf("%s", err);
        return RUN_EXIT_RUNTIME;
    }
    fprintf(stderr, "strata-driver: wrote %s/README.md, summary.json and plots/\n", argv[1]);
    return RUN_EXIT_OK;
}

static int cmd_compare(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage_compare(stdout); return RUN_EXIT_OK; }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') { usage_compare(stderr); return RUN_EXIT_USAGE; }
    char err[2048];
    if (needle_is_results(argv[1]) || needle_is_results(argv[2])
            ? needle_report_compare(argv[1], argv[2], stdout, err, sizeof err)
            : report_compare(argv[1], argv[2], stdout, err, sizeof err)) {
        cli_errorf("%s", err);
        return RUN_EXIT_RUNTIME;
    }
    return RUN_EXIT_OK;
}


/* The commands that run arms: the same arguments, the same signals. */
static int arms_command(int (*cmd)(int, char **, const char *, const char *, volatile sig_atomic_t *), int argc,
                       char **argv) {
    install_signals();
    char *line = shell_join(argc, argv);
    int rc = cmd(argc - 1, argv + 1, line ? line : "unknown", STRATA_GIT, &g_stop);
    free(line);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage_main(stderr); return RUN_EXIT_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage_main(stdout); return RUN_EXIT_OK; }
    if (!strcmp(cmd, "sweep")) return arms_command(sweep_main, argc, argv);
    if (!strcmp(cmd, "needle")) return arms_command(needle_main, argc, argv);
    if (!strcmp(cmd, "report")) return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 1, argv + 1);
    cli_errorf("unknown command '%s'", cmd);
    usage_main(stderr);
    return RUN_EXIT_USAGE;
}
