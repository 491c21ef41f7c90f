/* mutex_errorcheck_ok — verdict: none.
 *
 * Correct use of a PTHREAD_MUTEX_ERRORCHECK mutex with lock, trylock,
 * timedlock and unlock by two threads.  The only "error" path exercised is
 * the documented, harmless one: trylock on a mutex owned by the caller or by
 * the other thread returns EBUSY, and the code handles it.  (Relocking by the
 * owner, which returns EDEADLK, is deliberately not exercised: a checker may
 * legitimately flag it as misuse.) */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_mutex_t m;
static int counter;

static void *worker(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    /* Owned by us: trylock reports EBUSY, it does not block. */
    assert(pthread_mutex_trylock(&m) == EBUSY);
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
        struct timespec dl = deadline_in_ms(500);
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
    pthread_mutexattr_t a;
    CHECK(pthread_mutexattr_init(&a));
    CHECK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK));
    CHECK(pthread_mutex_init(&m, &a));
    CHECK(pthread_mutexattr_destroy(&a));

    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, worker, NULL));
    CHECK(pthread_create(&t2, NULL, worker, NULL));
    CHECK(pthread_join(t1, NULL));
    CHECK(pthread_join(t2, NULL));
    CHECK(pthread_mutex_destroy(&m));
    assert(counter == 6);
    return 0;
}
