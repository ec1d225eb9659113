/* test_launch.c — the driver's --launch templates (driver/arm.c): {worker} expands to the worker's
 * command line with every word single-quoted for sh (a quote inside survives), {arm} and {i} are
 * replaced, other text is kept, a template without {worker} is refused, and an expansion that does
 * not fit is an error rather than a cut command. The expanded command is run through /bin/sh to
 * show the words arrive unchanged. */
#include "driver/arm.h"
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char out[4096], err[256];
    const char *argv[] = { "/opt/strata/strata-worker", "--model", "/data/it's a model.gguf", "--kv-k", "int8", NULL };
    int rc = arm_launch_command("srun -N1 -n1 --gpus=1 {worker}", argv, "int8", 3, out, sizeof out, err, sizeof err);
    CHECK(rc == 0 && !strcmp(out, "srun -N1 -n1 --gpus=1 '/opt/strata/strata-worker' '--model' "
                                  "'/data/it'\\''s a model.gguf' '--kv-k' 'int8'"), "srun template: %s", out);
    rc = arm_launch_command("ssh gpu{i} {worker} --tls-ca ca{i}.pem # {arm}", argv, "k:q4_0#2", 7, out, sizeof out,
                            err, sizeof err);
    CHECK(rc == 0 && !strncmp(out, "ssh gpu7 '/opt/", 15) && strstr(out, "--tls-ca ca7.pem # 'k:q4_0#2'"),
          "ssh template with {i} and {arm}: %s", out);
    rc = arm_launch_command("{nothing} {worker}", argv, "f16", 0, out, sizeof out, err, sizeof err);
    CHECK(rc == 0 && !strncmp(out, "{nothing} '/opt", 15), "unknown braces are kept: %s", out);
    rc = arm_launch_command("srun {worker}", argv, "f16", 0, out, 40, err, sizeof err);
    CHECK(rc == ARM_E_SPEC && strstr(err, "too long"), "a command that does not fit: %s", err);
    CHECK(arm_launch_check("srun -N1 {worker}", err, sizeof err) == 0, "a template with {worker} is accepted");
    CHECK(arm_launch_check("srun -N1 strata-worker", err, sizeof err) == ARM_E_SPEC && strstr(err, "{worker}"),
          "a template without {worker} is refused: %s", err);

    /* through sh: printf prints each word on its own line, exactly as given */
    const char *words[] = { "printf", "%s\\n", "a b", "it's", "$HOME", "`x`", "\"q\"", NULL };
    rc = arm_launch_command("{worker}", words, "f16", 0, out, sizeof out, err, sizeof err);
    char cmd[4400], got[512] = "";
    FILE *p = NULL;
    if (!rc) {
        char quoted[4200];   /* the command itself as one sh word for popen's shell */
        const char *w[] = { out, NULL };
        if (!arm_launch_command("{worker}", w, "x", 0, quoted, sizeof quoted, err, sizeof err)) {
            snprintf(cmd, sizeof cmd, "/bin/sh -c %s", quoted);
            p = popen(cmd, "r");
        }
    }
    size_t n = p ? fread(got, 1, sizeof got - 1, p) : 0;
    got[n] = 0;
    if (p) pclose(p);
    CHECK(!strcmp(got, "a b\nit's\n$HOME\n`x`\n\"q\"\n"), "words reach the command unchanged through sh: '%s'", got);
    return check_done();
}
