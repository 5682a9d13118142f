/* Shared helpers of hetsched's real test programs.
 *
 * One "work unit" is WORK_UNIT_ITERS iterations of a dependent xorshift
 * chain: pure integer work that stays in registers, so its speed depends
 * only on the core's clock and how much of the core the program gets.
 * `hetsched linux calibrate` measures how many milliseconds a unit takes on
 * the machine and converts units to the simulator's reference work (ms).
 *
 * Every program prints one JSON line on stdout when it ends, with its wall
 * time and CPU time, so a harness can read what it did. */
#ifndef HETSCHED_REALPROGS_COMMON_H
#define HETSCHED_REALPROGS_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORK_UNIT_ITERS (1u << 20)

static volatile uint64_t hs_sink;

static inline uint64_t hs_work(uint64_t units, uint64_t seed) {
    uint64_t x = seed | 1u;
    for (uint64_t u = 0; u < units; u++) {
        for (uint32_t i = 0; i < WORK_UNIT_ITERS; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    hs_sink = x;
    return x;
}

static inline double hs_now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse a non-negative whole number argument or exit with a clear message. */
static inline uint64_t hs_arg_u64(const char *prog, const char *name, const char *text,
                                  uint64_t min, uint64_t max) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max) {
        fprintf(stderr, "%s: %s must be a whole number from %llu to %llu, got \"%s\"\n", prog,
                name, (unsigned long long)min, (unsigned long long)max, text);
        exit(2);
    }
    return (uint64_t)v;
}

static inline void hs_report(const char *prog, double wall0, double cpu0, const char *extra) {
    double wall = hs_now(CLOCK_MONOTONIC) - wall0;
    double cpu = hs_now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    /* start_mono: CLOCK_MONOTONIC at the start of the work, so a harness on
     * the same clock knows exactly when the work began. */
    printf("{\"program\":\"%s\",\"start_mono\":%.6f,\"wall_s\":%.6f,\"cpu_s\":%.6f%s%s}\n",
           prog, wall0, wall, cpu, extra && *extra ? "," : "", extra ? extra : "");
    fflush(stdout);
}

#endif
