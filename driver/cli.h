/* cli.h — what the driver's commands (main.c's sweep/report/compare, needle.c) share on the
 * command line: the one error line and integer option parsing. Nothing here allocates. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

/* Prints "strata-driver: error: <message>\n" on stderr. */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses s as a decimal integer in [lo, hi] into *out; on anything else prints one error line
 * naming the option opt and returns -1 (*out untouched). */
int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out);

#endif
