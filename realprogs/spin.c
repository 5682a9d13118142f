/* spin UNITS: CPU-bound, a fixed amount of work (UNITS work units). */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: spin UNITS\n");
        return 2;
    }
    uint64_t units = hs_arg_u64("spin", "UNITS", argv[1], 1, 1000000000ull);
    double w0 = hs_now(CLOCK_MONOTONIC), c0 = hs_now(CLOCK_PROCESS_CPUTIME_ID);
    hs_work(units, 0x9e3779b97f4a7c15ull);
    char extra[64];
    snprintf(extra, sizeof extra, "\"units\":%llu", (unsigned long long)units);
    hs_report("spin", w0, c0, extra);
    return 0;
}
