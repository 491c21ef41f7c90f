/* bench_sync_prefix — verdict: none.  Benchmark fixture for fork snapshots (bench/run.sh).
 *
 * argv[1] (default 500) lock/unlock pairs of a mutex in main, about 1000 synchronisation
 * operations, each a scheduling point, before two threads do a short racy-looking part
 * (three atomic increments each).  A fork snapshot at the first thread creation skips the
 * thousand points in every execution but the first. */
#include <pthread.h>
#include "bench_common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long setup, counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    long pairs = bench_count(argc, argv, 500);
    for (long i = 0; i < pairs; i++) {
        pthread_mutex_lock(&m);
        setup++;
        pthread_mutex_unlock(&m);
    }
    bench_mark('S');
    pthread_t a, b;
    if (pthread_create(&a, NULL, worker, NULL) || pthread_create(&b, NULL, worker, NULL))
        abort();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 6 || setup != pairs) {
        fprintf(stderr, "counter %ld setup %ld\n", counter, setup);
        return 1;
    }
    bench_mark('E');
    return 0;
}
