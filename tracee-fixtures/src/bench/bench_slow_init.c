/* bench_slow_init — verdict: none.  Benchmark fixture for fork snapshots (bench/run.sh).
 *
 * A program with a long single-threaded start: argv[1] rounds (default 25 million, about
 * 50 ms natively on the bench machines) of register-only arithmetic, then two threads that
 * each do three atomic increments of a shared counter, joined and checked.  A fork snapshot
 * taken at the first thread creation skips the start in every execution but the first. */
#include <pthread.h>
#include "bench_common.h"

static long counter;
static unsigned long seed_result;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    long rounds = bench_count(argc, argv, 25000000);
    unsigned long x = 88172645463325252UL;
    for (long i = 0; i < rounds; i++) { /* xorshift in registers: no memory traffic */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    seed_result = x;
    bench_mark('S');
    pthread_t a, b;
    if (pthread_create(&a, NULL, worker, NULL) || pthread_create(&b, NULL, worker, NULL))
        abort();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 6) {
        fprintf(stderr, "counter %ld (%lu)\n", counter, seed_result);
        return 1;
    }
    bench_mark('E');
    return 0;
}
