/* mutex_recursive_ok — verdict: none.
 *
 * Correct use of a PTHREAD_MUTEX_RECURSIVE mutex: each of two threads takes
 * it with lock, then again (nested) with trylock and timedlock, and releases
 * it the same number of times.  Nested acquisition by the owner must succeed
 * immediately; the count goes back to zero before the other thread can get
 * it.  main checks the counter. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_mutex_t m;
static int counter;

static void add_nested(int depth)
{
    CHECK(pthread_mutex_lock(&m)); /* recursive: fine even when held */
    counter++;
    if (depth > 0)
        add_nested(depth - 1);
    CHECK(pthread_mutex_unlock(&m));
}

static void *worker(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    add_nested(1);
    /* Already owned by us: trylock and timedlock succeed at once. */
    CHECK(pthread_mutex_trylock(&m));
    struct timespec dl = deadline_in_ms(1000);
    CHECK(pthread_mutex_timedlock(&m, &dl));
    counter++;
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t a;
    CHECK(pthread_mutexattr_init(&a));
    CHECK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE));
    CHECK(pthread_mutex_init(&m, &a));
    CHECK(pthread_mutexattr_destroy(&a));

    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, worker, NULL));
    CHECK(pthread_create(&t2, NULL, worker, NULL));
    CHECK(pthread_join(t1, NULL));
    CHECK(pthread_join(t2, NULL));
    CHECK(pthread_mutex_destroy(&m));
    assert(counter == 2 * 3);
    return 0;
}
