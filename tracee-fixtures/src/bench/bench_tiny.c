/* bench_tiny — verdict: none.  Benchmark fixture for fork snapshots (bench/run.sh).
 *
 * The smallest multithreaded program: main starts two threads that each make one atomic
 * increment of a shared counter, joins them and checks the total.  About ten scheduling
 * points per execution and a single plain shared access (main's final read), so an
 * execution under mcheck costs little more than starting it. */
#include <pthread.h>
#include "bench_common.h"

static long counter;

static void *worker(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void)
{
    (void)bench_count; /* shared helper, not needed here */
    bench_mark('S');
    pthread_t a, b;
    if (pthread_create(&a, NULL, worker, NULL) || pthread_create(&b, NULL, worker, NULL))
        abort();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 2) {
        fprintf(stderr, "counter %ld\n", counter);
        return 1;
    }
    bench_mark('E');
    return 0;
}
