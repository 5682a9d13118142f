/* threads barrier THREADS UNITS ROUNDS: each of THREADS threads computes
 * UNITS work units split into ROUNDS rounds, all threads meeting at a
 * barrier after every round (a data-parallel program; the slowest thread
 * sets the pace).
 * threads queue THREADS UNITS CHUNKS: UNITS work units cut into CHUNKS
 * equal items on a shared queue; THREADS workers take items until none is
 * left (a work pool; faster threads take more items). */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

static pthread_barrier_t barrier;
static atomic_ullong next_item;
static uint64_t per_round, rounds, chunk_units, chunks;
static int queue_mode;

struct worker {
    pthread_t tid;
    uint64_t id, items;
};

static void *run(void *arg) {
    struct worker *w = arg;
    if (queue_mode) {
        for (;;) {
            unsigned long long k = atomic_fetch_add(&next_item, 1);
            if (k >= chunks) break;
            hs_work(chunk_units, k + 1);
            w->items++;
        }
    } else {
        for (uint64_t r = 0; r < rounds; r++) {
            hs_work(per_round, w->id * 7919 + r + 1);
            pthread_barrier_wait(&barrier);
        }
        w->items = rounds;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "barrier") != 0 && strcmp(argv[1], "queue") != 0)) {
        fprintf(stderr, "usage: threads barrier THREADS UNITS ROUNDS | threads queue THREADS UNITS CHUNKS\n");
        return 2;
    }
    queue_mode = strcmp(argv[1], "queue") == 0;
    uint64_t n = hs_arg_u64("threads", "THREADS", argv[2], 1, 1024);
    uint64_t units = hs_arg_u64("threads", "UNITS", argv[3], 1, 1000000000ull);
    uint64_t parts = hs_arg_u64("threads", queue_mode ? "CHUNKS" : "ROUNDS", argv[4], 1, units);
    if (queue_mode) {
        chunks = parts;
        chunk_units = units / parts;
    } else {
        rounds = parts;
        per_round = units / parts;
        pthread_barrier_init(&barrier, NULL, (unsigned)n);
    }
    struct worker *ws = calloc(n, sizeof *ws);
    if (!ws) return 1;
    double w0 = hs_now(CLOCK_MONOTONIC), c0 = hs_now(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t i = 0; i < n; i++) {
        ws[i].id = i;
        if (pthread_create(&ws[i].tid, NULL, run, &ws[i]) != 0) {
            fprintf(stderr, "threads: cannot create thread %llu\n", (unsigned long long)i);
            return 1;
        }
    }
    char extra[4096];
    int off = snprintf(extra, sizeof extra, "\"mode\":\"%s\",\"threads\":%llu,\"items\":[",
                       argv[1], (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        pthread_join(ws[i].tid, NULL);
        if (off < (int)sizeof extra - 32)
            off += snprintf(extra + off, sizeof extra - (size_t)off, "%s%llu", i ? "," : "",
                            (unsigned long long)ws[i].items);
    }
    snprintf(extra + off, sizeof extra - (size_t)off, "]");
    hs_report("threads", w0, c0, extra);
    free(ws);
    return 0;
}
