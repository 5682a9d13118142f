/* hotplug_bench K REPEATS: CPU hotplug latencies, run as root inside the
 * throwaway VM of `hetsched linux hotplug-bench` (or on a host, by the same
 * tool's host mode, which passes the CPUs to use).
 *
 *   hotplug_bench K REPEATS [SPINNER_CPU [CPU...]]
 *
 * CPUs 1..K (or the CPUs listed) are taken offline and brought online:
 *   serial:     one after another, from one thread; the time for all k CPUs;
 *   concurrent: k threads write their CPU's `online` file at the same moment;
 *               the time until the last write returns (the kernel serialises
 *               hotplug with one lock, so this shows whether it overlaps);
 * for k = 1..K, REPEATS times. A spinner pinned to SPINNER_CPU (default K+1,
 * never taken offline) reads the clock in a tight loop; the longest gap it
 * sees during an operation is the disturbance it suffered (stop-machine
 * halts every online CPU while a CPU leaves the online mask).
 *
 * Output: one JSON object per line, each prefixed with "HSBENCH ". CPU 0 is
 * never touched. Every CPU is left online at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXCPU 64

static int cpus[MAXCPU], ncpus_used;
static atomic_int spin_run = 1, spin_measure = 0;
static _Atomic double spin_gap_max = 0.0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int set_online(int cpu, int on) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", cpu);
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -errno;
    int rc = write(fd, on ? "1" : "0", 1) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

static int is_online(int cpu) {
    char path[96], c = '1';
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", cpu);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 1;
    if (read(fd, &c, 1) != 1) c = '1';
    close(fd);
    return c == '1';
}

static void *spinner(void *arg) {
    int cpu = *(int *)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    double last = now();
    while (atomic_load(&spin_run)) {
        double t = now();
        if (atomic_load(&spin_measure)) {
            double gap = t - last;
            if (gap > atomic_load(&spin_gap_max)) atomic_store(&spin_gap_max, gap);
        }
        last = t;
    }
    return NULL;
}

struct job {
    int cpu, on, rc;
    double done;
    pthread_barrier_t *start;
};

static void *writer(void *arg) {
    struct job *j = arg;
    pthread_barrier_wait(j->start);
    j->rc = set_online(j->cpu, j->on);
    j->done = now();
    return NULL;
}

static void report(const char *op, int k, const char *mode, double ms, int rep, int rc) {
    printf("HSBENCH {\"op\":\"%s\",\"cpus\":%d,\"mode\":\"%s\",\"latency_ms\":%.4f,"
           "\"repeat\":%d,\"disturbance_ms\":%.4f,\"rc\":%d}\n",
           op, k, mode, ms, rep, atomic_load(&spin_gap_max) * 1e3, rc);
    fflush(stdout);
}

static int run_serial(int k, int on, int rep) {
    atomic_store(&spin_gap_max, 0.0);
    atomic_store(&spin_measure, 1);
    double t0 = now();
    int rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        double s = now();
        rc = set_online(cpus[i], on);
        printf("HSBENCH {\"op\":\"%s\",\"cpu\":%d,\"mode\":\"single\",\"latency_ms\":%.4f,"
               "\"repeat\":%d,\"rc\":%d}\n",
               on ? "online" : "offline", cpus[i], (now() - s) * 1e3, rep, rc);
    }
    double ms = (now() - t0) * 1e3;
    atomic_store(&spin_measure, 0);
    report(on ? "online" : "offline", k, "serial", ms, rep, rc);
    return rc;
}

static int run_concurrent(int k, int on, int rep) {
    pthread_t th[MAXCPU];
    struct job jobs[MAXCPU];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)k + 1);
    for (int i = 0; i < k; i++) {
        jobs[i] = (struct job){cpus[i], on, 0, 0.0, &start};
        pthread_create(&th[i], NULL, writer, &jobs[i]);
    }
    atomic_store(&spin_gap_max, 0.0);
    atomic_store(&spin_measure, 1);
    double t0 = now();
    pthread_barrier_wait(&start);
    double last = t0;
    int rc = 0;
    for (int i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].done > last) last = jobs[i].done;
        if (jobs[i].rc) rc = jobs[i].rc;
    }
    atomic_store(&spin_measure, 0);
    pthread_barrier_destroy(&start);
    report(on ? "online" : "offline", k, "concurrent", (last - t0) * 1e3, rep, rc);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: hotplug_bench K REPEATS [SPINNER_CPU [CPU...]]\n");
        return 2;
    }
    int k = atoi(argv[1]), reps = atoi(argv[2]);
    int spin_cpu = argc > 3 ? atoi(argv[3]) : k + 1;
    if (k < 1 || k > MAXCPU - 2 || reps < 1 || spin_cpu < 0) {
        fprintf(stderr, "hotplug_bench: K must be 1 to %d and REPEATS at least 1\n", MAXCPU - 2);
        return 2;
    }
    if (argc > 4) {
        if (argc - 4 < k) {
            fprintf(stderr, "hotplug_bench: %d CPUs listed, K is %d\n", argc - 4, k);
            return 2;
        }
        for (int i = 0; i < k; i++) cpus[i] = atoi(argv[4 + i]);
    } else {
        for (int i = 0; i < k; i++) cpus[i] = i + 1;
    }
    for (int i = 0; i < k; i++) {
        if (cpus[i] == 0 || cpus[i] == spin_cpu) {
            fprintf(stderr, "hotplug_bench: cpu%d may not be used (cpu0 and the spinner's stay online)\n", cpus[i]);
            return 2;
        }
    }
    ncpus_used = k;
    /* The benchmark thread itself stays on CPU 0. */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof set, &set);
    pthread_t sp;
    pthread_create(&sp, NULL, spinner, &spin_cpu);
    usleep(20000);
    int failed = 0;
    for (int rep = 0; rep < reps && !failed; rep++) {
        for (int n = 1; n <= k && !failed; n++) {
            failed |= run_serial(n, 0, rep) != 0;
            failed |= run_serial(n, 1, rep) != 0;
            if (n > 1) {
                failed |= run_concurrent(n, 0, rep) != 0;
                failed |= run_concurrent(n, 1, rep) != 0;
            }
        }
    }
    for (int i = 0; i < k; i++)
        if (!is_online(cpus[i])) set_online(cpus[i], 1);
    atomic_store(&spin_run, 0);
    pthread_join(sp, NULL);
    printf("HSBENCH-END %d\n", failed);
    fflush(stdout);
    return failed;
}
