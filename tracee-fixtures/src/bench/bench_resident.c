/* bench_resident — verdict: none.  Benchmark fixture for fork snapshots (bench/run.sh).
 *
 * Touches argv[1] MiB of heap (default 1) before two threads do three atomic increments
 * each: the cost of a fork snapshot copy as a function of the resident memory. */
#include <pthread.h>
#include <string.h>
#include "bench_common.h"

static long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    long mib = bench_count(argc, argv, 1);
    char *block = malloc((size_t)mib << 20);
    if (!block)
        abort();
    memset(block, 1, (size_t)mib << 20);
    bench_mark('S');
    pthread_t a, b;
    if (pthread_create(&a, NULL, worker, NULL) || pthread_create(&b, NULL, worker, NULL))
        abort();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 6 || block[((size_t)mib << 20) - 1] != 1) {
        fprintf(stderr, "counter %ld\n", counter);
        return 1;
    }
    bench_mark('E');
    return 0;
}
