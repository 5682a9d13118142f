/* chase WS_KB ACCESSES_K: memory-bound pointer chase over a working set of
 * WS_KB KiB, one node per 64-byte cache line, linked in one random cycle
 * (Sattolo's shuffle) so that every load depends on the previous one and
 * hardware prefetchers cannot guess the next line. ACCESSES_K thousand
 * loads are made. */
#include "common.h"

#define LINE 64

struct node {
    struct node *next;
    char pad[LINE - sizeof(struct node *)];
};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: chase WS_KB ACCESSES_K\n");
        return 2;
    }
    uint64_t ws_kb = hs_arg_u64("chase", "WS_KB", argv[1], 1, 64ull * 1024 * 1024);
    uint64_t acc_k = hs_arg_u64("chase", "ACCESSES_K", argv[2], 1, 1000000000ull);
    size_t n = (size_t)(ws_kb * 1024 / LINE);
    if (n < 2) n = 2;
    struct node *nodes = aligned_alloc(LINE, n * sizeof(struct node));
    size_t *order = malloc(n * sizeof(size_t));
    if (!nodes || !order) {
        fprintf(stderr, "chase: cannot allocate %llu KiB\n", (unsigned long long)ws_kb);
        return 1;
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    uint64_t r = 0x2545f4914f6cdd1dull;
    for (size_t i = n - 1; i > 0; i--) { /* Sattolo: one cycle through all nodes */
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        size_t j = (size_t)(r % i);
        size_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (size_t i = 0; i < n; i++) nodes[order[i]].next = &nodes[order[(i + 1) % n]];
    free(order);
    double w0 = hs_now(CLOCK_MONOTONIC), c0 = hs_now(CLOCK_PROCESS_CPUTIME_ID);
    struct node *p = &nodes[0];
    uint64_t total = acc_k * 1000;
    for (uint64_t i = 0; i < total; i++) p = p->next;
    hs_sink = (uint64_t)(uintptr_t)p;
    double wall = hs_now(CLOCK_MONOTONIC) - w0;
    char extra[160];
    snprintf(extra, sizeof extra, "\"ws_kb\":%llu,\"accesses\":%llu,\"ns_per_access\":%.4f",
             (unsigned long long)ws_kb, (unsigned long long)total, wall * 1e9 / (double)total);
    hs_report("chase", w0, c0, extra);
    free(nodes);
    return 0;
}
