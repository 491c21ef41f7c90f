/* bench_slices — verdict: none; bench_slices_racy (built with -DRACY) — verdict:
 * data_race.  Benchmark fixtures (bench/races.py): memory-heavy threads.
 *
 * main fills a 16 MiB array, then 4 threads each sum their own 4 MiB slice (a million
 * loads each, no sharing) and add their sum to a shared total under a mutex.  In
 * bench_slices_racy the last thread adds without the mutex: a real race on `total`, which
 * must still be reported with both stacks however much memory traffic surrounds it. */
#include <pthread.h>
#include "bench_common.h"

#define THREADS 4
#define SLICE (1L << 20)

static long data[THREADS * SLICE / 2];
static long total;
#ifdef RACY
static const int racy = 1;
#else
static const int racy = 0;
#endif
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *sum(void *arg)
{
    long id = (long)arg;
    long s = 0;
    const long *p = data + id * (SLICE / 2);
    for (long i = 0; i < SLICE / 2; i++)
        s += p[i];
    if (racy && id == THREADS - 1) {
        total += s;
    } else {
        pthread_mutex_lock(&lock);
        total += s;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(void)
{
    for (long i = 0; i < THREADS * SLICE / 2; i++)
        data[i] = i & 7;
    bench_mark('S');
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, sum, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    bench_mark('E');
    return 0;
}
