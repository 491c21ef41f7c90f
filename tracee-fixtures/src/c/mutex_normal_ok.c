/* mutex_normal_ok — verdict: none.
 *
 * Correct use of a default (PTHREAD_MUTEX_NORMAL) mutex with every locking
 * function: lock, trylock, timedlock, unlock.  Three threads each add to a
 * shared counter three times, once with each way of locking.  trylock that
 * finds the mutex busy falls back to lock; timedlock that times out (under
 * mcheck's virtual time that only happens when no other thread can run,
 * which cannot happen here, but the code handles it anyway) retries.  Every
 * path holds the mutex around the increment, so main always sees 9. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

#define NTHREADS 3

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg)
{
    (void)arg;

    CHECK(pthread_mutex_lock(&m));
    counter++;
    CHECK(pthread_mutex_unlock(&m));

    int rc = pthread_mutex_trylock(&m);
    if (rc == EBUSY)
        CHECK(pthread_mutex_lock(&m));
    else
        CHECK(rc);
    counter++;
    CHECK(pthread_mutex_unlock(&m));

    for (;;) {
        struct timespec dl = deadline_in_ms(1000);
        rc = pthread_mutex_timedlock(&m, &dl);
        if (rc == 0)
            break;
        if (rc != ETIMEDOUT)
            CHECK(rc);
    }
    counter++;
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    CHECK(pthread_mutex_destroy(&m));
    assert(counter == 3 * NTHREADS);
    return 0;
}
