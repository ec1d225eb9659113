/* arm_internal.h — what driver/arm.c (connections, handshake, restart), driver/arm_proc.c
 * (processes, stopping, the temp directory) and driver/arm_spec.c (specs and names) share; no
 * other file includes it. Nothing here allocates.
 */
#ifndef STRATA_ARM_INTERNAL_H
#define STRATA_ARM_INTERNAL_H

#include <stddef.h>
#include <time.h>

#include "driver/arm.h"

/* The line arm_restart writes into a worker's log before starting its successor (arm_log_tail_lines
 * reads only the lines after the last one). */
#define ARM_RESTART_MARK "strata-driver: ==== "

/* Sleeps ms milliseconds. */
static inline void arm_sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Reaps a local worker if it has exited. Returns 1 when it is (now or before) known dead. */
int arm_poll_exit(arm *a);

/* "arm X: the worker exited (exit status 1) <when>: <last log line>" into err; returns the error
 * code the caller passes on (driver/arm_proc.c). */
int arm_died_error(arm *a, const char *when, char *err, size_t errlen);

#endif
