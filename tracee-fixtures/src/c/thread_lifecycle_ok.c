/* thread_lifecycle_ok — verdict: none.
 *
 * Correct thread lifecycle: pthread_create / pthread_join (collecting a
 * return value), a thread that ends with pthread_exit(value), a thread
 * created detached through pthread_attr_setdetachstate, and a thread
 * detached afterwards with pthread_detach.  Detached threads cannot be
 * joined, so they report completion through a mutex-protected counter and a
 * condvar; main waits for the counter with a predicate loop.  Nothing is
 * joined twice and nothing joins a detached thread. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int detached_done;

static void *returns_value(void *arg)
{
    return (void *)((long)arg * 2);
}

static void helper_that_exits(long v)
{
    pthread_exit((void *)(v + 1));
}

static void *calls_pthread_exit(void *arg)
{
    helper_that_exits((long)arg);
    return NULL; /* not reached */
}

static void *detached(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    detached_done++;
    CHECK(pthread_cond_signal(&c));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    pthread_t a, b, d1, d2;
    void *ret;

    CHECK(pthread_create(&a, NULL, returns_value, (void *)21L));
    CHECK(pthread_create(&b, NULL, calls_pthread_exit, (void *)41L));

    pthread_attr_t attr;
    CHECK(pthread_attr_init(&attr));
    CHECK(pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
    CHECK(pthread_create(&d1, &attr, detached, NULL));
    CHECK(pthread_attr_destroy(&attr));

    CHECK(pthread_create(&d2, NULL, detached, NULL));
    CHECK(pthread_detach(d2));

    CHECK(pthread_join(a, &ret));
    assert((long)ret == 42);
    CHECK(pthread_join(b, &ret));
    assert((long)ret == 42);

    CHECK(pthread_mutex_lock(&m));
    while (detached_done < 2)
        CHECK(pthread_cond_wait(&c, &m));
    CHECK(pthread_mutex_unlock(&m));
    return 0;
}
