/* bench_two_threads — verdict: none.  Benchmark fixture (bench/run.sh).
 *
 * The "small multithreaded program" of the whole-execution benchmark: main
 * starts two threads that each take a shared mutex 5 times to bump a
 * counter, joins them and checks the total.  About 30 scheduling points per
 * execution; natively it runs in well under a millisecond.  With
 * $BENCH_MARK_FD set it writes 'S' when main starts and 'E' before it returns
 * (see bench_common.h), once per execution. */
#include <pthread.h>
#include "bench_common.h"

#define NTHREADS 2
#define ROUNDS 5

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];
    bench_mark('S');
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            abort();
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_join(t[i], NULL) != 0)
            abort();
    if (counter != NTHREADS * ROUNDS) {
        fprintf(stderr, "counter %ld\n", counter);
        return 1;
    }
    bench_mark('E');
    return 0;
}
