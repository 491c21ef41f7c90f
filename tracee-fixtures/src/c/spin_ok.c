/* spin_ok — verdict: none.
 *
 * Correct use of pthread_spin_init/lock/trylock/unlock/destroy: two threads
 * add to a counter under a pthread spinlock, once via pthread_spin_lock and
 * once via pthread_spin_trylock (falling back to pthread_spin_lock when
 * busy).  glibc's spin lock loops on an atomic exchange inside libc; mcheck
 * intercepts the pthread_spin_* entry points, so a waiting thread is never
 * left spinning forever. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_spinlock_t sl;
static int counter;

static void *worker(void *arg)
{
    (void)arg;
    CHECK(pthread_spin_lock(&sl));
    counter++;
    CHECK(pthread_spin_unlock(&sl));

    int rc = pthread_spin_trylock(&sl);
    if (rc == EBUSY)
        CHECK(pthread_spin_lock(&sl));
    else
        CHECK(rc);
    counter++;
    CHECK(pthread_spin_unlock(&sl));
    return NULL;
}

int main(void)
{
    CHECK(pthread_spin_init(&sl, PTHREAD_PROCESS_PRIVATE));
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, worker, NULL));
    CHECK(pthread_create(&t2, NULL, worker, NULL));
    CHECK(pthread_join(t1, NULL));
    CHECK(pthread_join(t2, NULL));
    CHECK(pthread_spin_destroy(&sl));
    assert(counter == 4);
    return 0;
}
