/* cli.h — what the driver's commands (main.c's sweep/report/compare, needle.c) share on the
 * command line and around a run: the one error line, integer option parsing, the engine options of
 * sweep and needle (--worker --chunk --threads --prefill --max-context), tags, the results folder,
 * rendering at the end. Nothing here allocates; buffers are the caller's. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <stddef.h>

#include "driver/workers.h"

/* Prints "strata-driver: error: <message>\n" on stderr. */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses s as a decimal integer in [lo, hi] into *out; on anything else prints one error line
 * naming the option opt and returns -1 (*out untouched). */
int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out);

/* The options that set up a command's local workers, the same in sweep and needle (same names, ranges
 * and messages): each command embeds one, puts CLI_ENGINE_LONGOPTS in its option table (its own
 * options use other codes) and offers every code to cli_engine_opt before its own switch. Defaults
 * are the command's (--chunk: sweep 512, needle 1024; the rest 0 / NULL). Borrows worker (argv or
 * a recorded argument vector). */
typedef struct {
    const char *worker;      /* --worker PATH: the strata-worker binary (NULL: next to the driver) */
    int chunk;               /* --chunk N: tokens per prefill request, [1, 2^20] */
    int threads;             /* --threads N: threads per local worker, [1, 1024] (0: the command's) */
    int prefill;             /* --prefill N: the worker's prefill chunk, [1, 2^16] (0: the worker's) */
    int max_context;         /* --max-context N: context reserved by local workers, [1, 2^22] (0: the model's) */
} cli_engine_opts;

/* The getopt_long entries of cli_engine_opts (codes 'c', 't', 'p', 'X', 'w'). */
#define CLI_ENGINE_LONGOPTS                                                                          \
    {"chunk", 1, 0, 'c'}, {"threads", 1, 0, 't'}, {"prefill", 1, 0, 'p'}, {"max-context", 1, 0, 'X'}, \
    {"worker", 1, 0, 'w'}

/* Takes getopt's code c and its argument: 1 when c is one of the options above (stored in *e), 0 when
 * it is not, -1 when its value is out of range (one error line printed, *e untouched). */
int cli_engine_opt(cli_engine_opts *e, int c, const char *arg);

/* One option of a command that --resume can continue (sweep, needle), before the command's own
 * switch: counted in *n_run_opts unless it may be given beside --resume (its letter is in beside, or
 * it is --tls-cert/--tls-key/--tls-ca/--launch/--launch-listen, 1001..1005), then offered to
 * workers_arm_opt. Returns 1 when that took it, 0 when it is the command's own, -1 (said) when out
 * of memory. */
int cli_resumable_opt(workers_arm_opts *ao, int c, const char *arg, const char *beside, int *n_run_opts);

/* 0 when tag (a --tag value: it becomes part of a folder name) is non-empty and made of
 * [A-Za-z0-9._+-]; otherwise prints one error line and returns -1. */
int cli_check_tag(const char *tag);

/* Replaces every character of s outside [A-Za-z0-9._+-] with '_' (in place). */
void cli_sanitize(char *s);

/* The directory of this executable (from /proc/self/exe) into dir [PATH_MAX]. 0 or -1. */
int cli_exe_dir(char *dir);

/* mkdir -p path (mode 0755). 0, or -1 with a message in err. */
int cli_mkdir_p(const char *path, char *err, size_t errlen);

/* The default results folder into out [outlen]: results/<YYYY-MM-DD-HHMM>-<tag>, with -2, -3, ...
 * appended when that name exists already, so a run never lands in (or overwrites) an earlier one.
 * 0, or -1 when the name does not fit. */
int cli_default_out_dir(const char *tag, char *out, size_t outlen);

/* The end of a run: render(out_dir) writes the folder's README.md; says so on stderr unless quiet,
 * or prints one error line naming the raw results. 0 or -1. */
int cli_render(int (*render)(const char *dir, char *err, size_t errlen), const char *out_dir, int quiet);

/* --resume (sweep and needle; docs/DESIGN.md §4.10): the options that start processes or choose
 * where code runs are never taken from the folder resumed, whose journal or meta.json anyone may
 * have edited: --launch, --launch-listen, --worker, --tls-cert/--tls-key/--tls-ca and each remote
 * arm's --arm NAME=URL come from the command line only. rec: the options the run recorded
 * (rec_worker its --worker, or NULL); given: those beside --resume. Writes the recorded ones that
 * were not given again into missing [len] (option names, space-separated; an --arm with its arm's
 * name, escaped) and returns how many. */
int cli_resume_missing(const workers_arm_opts *rec, const char *rec_worker, const workers_arm_opts *given,
                       const char *given_worker, char *missing, size_t len);

/* --resume: where and how the workers run are the command line's only (cli_resume_missing): moves
 * given's remote arms (--arm) into rec, freeing rec's array, and copies given's --launch,
 * --launch-listen and --tls-* strings into rec (borrowed, as before). */
void cli_resume_take_workers(workers_arm_opts *rec, workers_arm_opts *given);

/* path made absolute against the current directory (not resolved: it need not exist) into out
 * [outlen]. 0, or -1 when it does not fit or the current directory is unknown. */
int cli_abs_path(const char *path, char *out, size_t outlen);

#endif
