/* bench_mutex N — verdict: none.  Benchmark fixture (bench/run.sh).
 *
 * One thread locks and unlocks a global mutex N times (default 100): 2N
 * breakpoint-type scheduling points at the entries of pthread_mutex_lock and
 * pthread_mutex_unlock, which mcheck emulates (the functions do not run).
 * The mutex has external linkage and the calls are opaque to the compiler,
 * so every iteration really makes both calls (see bench/run.sh, which checks
 * the disassembly). */
#include <pthread.h>
#include "bench_common.h"

pthread_mutex_t bench_lock = PTHREAD_MUTEX_INITIALIZER;
long bench_counter;

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv, 100);
    bench_mark('S');
    for (long i = 0; i < n; i++) {
        if (pthread_mutex_lock(&bench_lock) != 0)
            return 1;
        bench_counter++;
        if (pthread_mutex_unlock(&bench_lock) != 0)
            return 1;
    }
    bench_mark('E');
    return bench_counter == n ? 0 : 1;
}
