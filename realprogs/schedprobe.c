/* schedprobe: small workloads for checking the simulator against the real
 * kernel's scheduler, event by event (hetsched linux validate-sim --suite).
 *
 *   schedprobe [-t START] [-s SLICE_US] spin SECONDS
 *   schedprobe [-t START] [-s SLICE_US] periodic RUN_US PERIOD_US SECONDS
 *   schedprobe [-t START] [-s SLICE_US] sleeper RUN_US SLEEP_US SECONDS
 *   schedprobe [-t START] [-s SLICE_US] churn CHILD_RUN_US SECONDS
 *
 * spin:     compute until SECONDS of wall time have passed.
 * periodic: every PERIOD_US (absolute release times, from START with -t,
 *           else from when it first runs), compute RUN_US of CPU time, then
 *           sleep until the next release. Copies given one START are
 *           released together: had each counted from when it first ran, a
 *           copy that waited for another's first slice would be released
 *           that much later in every period.
 * sleeper:  compute RUN_US of CPU time, sleep SLEEP_US, again, for SECONDS.
 * churn:    fork a child that computes CHILD_RUN_US of CPU time and exits,
 *           wait for it, again, for SECONDS (fork/exit churn).
 *
 * RUN_US is CPU time (CLOCK_THREAD_CPUTIME_ID), so time spent preempted does
 * not count as work, as a job's work in the simulator.
 *
 * -t START waits until CLOCK_MONOTONIC reaches START (seconds) before it
 * begins, so that a harness can launch several programs and have them all
 * start at one moment.
 *
 * -s SLICE_US asks for a custom slice: sched_setattr(2) with SCHED_OTHER and
 * sched_runtime = SLICE_US * 1000 ns (EEVDF's per-task slice, Linux 6.6+).
 * The syscall is called directly; the struct is the kernel's layout
 * (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER0 = 48 bytes).
 *
 * Prints one JSON line at the end, as the other real programs do. */
#define _GNU_SOURCE
#include "common.h"

#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct hs_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

static int set_slice(uint64_t slice_us) {
#ifdef SYS_sched_setattr
    struct hs_sched_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.sched_policy = 0; /* SCHED_OTHER */
    errno = 0;
    a.sched_nice = getpriority(PRIO_PROCESS, 0);
    a.sched_runtime = slice_us * 1000u;
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
        fprintf(stderr, "schedprobe: sched_setattr(sched_runtime=%llu ns): %s\n",
                (unsigned long long)a.sched_runtime, strerror(errno));
        return -1;
    }
    return 0;
#else
    (void)slice_us;
    fprintf(stderr, "schedprobe: this system has no sched_setattr syscall\n");
    return -1;
#endif
}

static double cpu_now(void) { return hs_now(CLOCK_THREAD_CPUTIME_ID); }

/* Compute for `us` microseconds of this thread's CPU time. */
static void compute_cpu_us(uint64_t us) {
    double end = cpu_now() + (double)us * 1e-6;
    uint64_t x = 88172645463325252ull;
    while (cpu_now() < end) {
        for (int i = 0; i < 2000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    hs_sink = x;
}

static void sleep_until(struct timespec *t) {
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) == EINTR) {
    }
}

static void add_us(struct timespec *t, uint64_t us) {
    t->tv_nsec += (long)((us % 1000000u) * 1000u);
    t->tv_sec += (time_t)(us / 1000000u);
    if (t->tv_nsec >= 1000000000L) {
        t->tv_nsec -= 1000000000L;
        t->tv_sec += 1;
    }
}

static void usage(void) {
    fprintf(stderr,
            "usage: schedprobe [-t START] [-s SLICE_US] spin SECONDS\n"
            "       schedprobe [-t START] [-s SLICE_US] periodic RUN_US PERIOD_US SECONDS\n"
            "       schedprobe [-t START] [-s SLICE_US] sleeper RUN_US SLEEP_US SECONDS\n"
            "       schedprobe [-t START] [-s SLICE_US] churn CHILD_RUN_US SECONDS\n");
    exit(2);
}

int main(int argc, char **argv) {
    int a = 1;
    uint64_t slice_us = 0;
    double start = 0.0;
    while (a + 1 < argc && argv[a][0] == '-' && argv[a][1] != '\0' && argv[a][2] == '\0') {
        if (argv[a][1] == 's') {
            slice_us = hs_arg_u64("schedprobe", "SLICE_US", argv[a + 1], 100, 100000);
        } else if (argv[a][1] == 't') {
            char *end = NULL;
            start = strtod(argv[a + 1], &end);
            if (end == argv[a + 1] || *end != '\0' || !(start >= 0.0)) {
                fprintf(stderr, "schedprobe: START must be seconds of CLOCK_MONOTONIC, got \"%s\"\n",
                        argv[a + 1]);
                return 2;
            }
        } else {
            usage();
        }
        a += 2;
    }
    if (a >= argc) usage();
    const char *mode = argv[a++];
    int nargs = argc - a;
    if (slice_us && set_slice(slice_us) != 0) return 1;
    struct timespec t0 = {(time_t)start, (long)((start - (double)(time_t)start) * 1e9)};
    if (start > 0.0) sleep_until(&t0);

    double wall0 = hs_now(CLOCK_MONOTONIC);
    double cpu0 = hs_now(CLOCK_PROCESS_CPUTIME_ID);
    char extra[160];
    extra[0] = '\0';
    if (strcmp(mode, "spin") == 0) {
        if (nargs != 1) usage();
        uint64_t secs = hs_arg_u64("schedprobe", "SECONDS", argv[a], 1, 3600);
        double end = wall0 + (double)secs;
        while (hs_now(CLOCK_MONOTONIC) < end) compute_cpu_us(50);
    } else if (strcmp(mode, "periodic") == 0 || strcmp(mode, "sleeper") == 0) {
        if (nargs != 3) usage();
        int periodic = mode[0] == 'p';
        uint64_t run_us = hs_arg_u64("schedprobe", "RUN_US", argv[a], 1, 10000000);
        uint64_t gap_us =
            hs_arg_u64("schedprobe", periodic ? "PERIOD_US" : "SLEEP_US", argv[a + 1], 1, 10000000);
        uint64_t secs = hs_arg_u64("schedprobe", "SECONDS", argv[a + 2], 1, 3600);
        if (periodic && run_us >= gap_us) {
            fprintf(stderr, "schedprobe: RUN_US must be smaller than PERIOD_US\n");
            return 2;
        }
        double end = wall0 + (double)secs;
        struct timespec next;
        if (periodic && start > 0.0)
            next = t0;
        else
            clock_gettime(CLOCK_MONOTONIC, &next);
        uint64_t jobs = 0;
        while (hs_now(CLOCK_MONOTONIC) < end) {
            compute_cpu_us(run_us);
            jobs++;
            if (periodic) {
                add_us(&next, gap_us);
            } else {
                clock_gettime(CLOCK_MONOTONIC, &next);
                add_us(&next, gap_us);
            }
            sleep_until(&next);
        }
        snprintf(extra, sizeof extra, "\"jobs\":%llu", (unsigned long long)jobs);
    } else if (strcmp(mode, "churn") == 0) {
        if (nargs != 2) usage();
        uint64_t run_us = hs_arg_u64("schedprobe", "CHILD_RUN_US", argv[a], 1, 10000000);
        uint64_t secs = hs_arg_u64("schedprobe", "SECONDS", argv[a + 1], 1, 3600);
        double end = wall0 + (double)secs;
        uint64_t children = 0;
        while (hs_now(CLOCK_MONOTONIC) < end) {
            pid_t pid = fork();
            if (pid < 0) {
                fprintf(stderr, "schedprobe: fork: %s\n", strerror(errno));
                return 1;
            }
            if (pid == 0) {
                compute_cpu_us(run_us);
                _exit(0);
            }
            int status;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            children++;
        }
        snprintf(extra, sizeof extra, "\"children\":%llu", (unsigned long long)children);
    } else {
        usage();
    }
    if (slice_us) {
        size_t n = strlen(extra);
        snprintf(extra + n, sizeof extra - n, "%s\"slice_us\":%llu", n ? "," : "",
                 (unsigned long long)slice_us);
    }
    hs_report("schedprobe", wall0, cpu0, extra);
    return 0;
}
