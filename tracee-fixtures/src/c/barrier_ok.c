/* barrier_ok — verdict: none.
 *
 * Correct use of a pthread barrier for 3 threads over two rounds.  In each
 * round every thread writes its own slot, waits at the barrier, then reads
 * all slots: the barrier guarantees every write of the round happened
 * before.  Exactly one thread per round gets PTHREAD_BARRIER_SERIAL_THREAD
 * (counted under a mutex).  A second barrier wait separates the reads of
 * round 1 from the writes of round 2.  The barrier is destroyed only after
 * every thread has been joined, so it never has waiters when destroyed. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

#define N 3

static pthread_barrier_t bar;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int slot[N];
static int serial_count;

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (int round = 1; round <= 2; round++) {
        slot[me] = round;
        int rc = pthread_barrier_wait(&bar);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD) {
            CHECK(pthread_mutex_lock(&m));
            serial_count++;
            CHECK(pthread_mutex_unlock(&m));
        } else {
            CHECK(rc);
        }
        for (int i = 0; i < N; i++)
            assert(slot[i] == round);
        rc = pthread_barrier_wait(&bar);
        if (rc != PTHREAD_BARRIER_SERIAL_THREAD)
            CHECK(rc);
    }
    return NULL;
}

int main(void)
{
    CHECK(pthread_barrier_init(&bar, NULL, N));
    pthread_t t[N];
    for (long i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i));
    for (int i = 0; i < N; i++)
        CHECK(pthread_join(t[i], NULL));
    CHECK(pthread_barrier_destroy(&bar));
    assert(serial_count == 2);
    return 0;
}
