/* bench_access N — verdict: none.  Benchmark fixture (bench/races.py).
 *
 * main first creates and joins one thread that does nothing (mcheck records memory
 * accesses only once the program has created a thread: before that nothing can race),
 * then does N iterations of `g = g + 1` on a global `volatile long` (default 100): each
 * iteration is exactly one plain load and one plain store of the program's own code,
 * i.e. two memory accesses that mcheck's data race detector traces (unless --no-races).
 * volatile keeps both accesses in every iteration at -O1; no LOCK prefix, so neither is
 * a scheduling point.  bench/races.py checks the disassembly of the loop. */
#include <pthread.h>
#include "bench_common.h"

volatile long bench_access_g;

static void *idle(void *arg)
{
    return arg;
}

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv, 100);
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    bench_mark('S');
    for (long i = 0; i < n; i++)
        bench_access_g = bench_access_g + 1;
    bench_mark('E');
    return bench_access_g == n ? 0 : 1;
}
