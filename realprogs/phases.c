/* phases UNITS SLEEP_MS LOOPS: LOOPS times, compute UNITS work units and
 * then sleep SLEEP_MS milliseconds (an interactive or I/O-like program). */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: phases UNITS SLEEP_MS LOOPS\n");
        return 2;
    }
    uint64_t units = hs_arg_u64("phases", "UNITS", argv[1], 0, 1000000000ull);
    uint64_t sleep_ms = hs_arg_u64("phases", "SLEEP_MS", argv[2], 0, 3600000ull);
    uint64_t loops = hs_arg_u64("phases", "LOOPS", argv[3], 1, 100000000ull);
    double w0 = hs_now(CLOCK_MONOTONIC), c0 = hs_now(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t l = 0; l < loops; l++) {
        hs_work(units, l + 1);
        if (sleep_ms) {
            struct timespec ts = {(time_t)(sleep_ms / 1000), (long)(sleep_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
    char extra[96];
    snprintf(extra, sizeof extra, "\"units\":%llu,\"loops\":%llu",
             (unsigned long long)units, (unsigned long long)loops);
    hs_report("phases", w0, c0, extra);
    return 0;
}
