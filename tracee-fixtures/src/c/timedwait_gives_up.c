/* timedwait_gives_up — verdict: assertion.
 *
 * The main thread waits for a worker's result with pthread_cond_timedwait and
 * a generous one-second deadline, and treats a timeout as "the result must be
 * there by now": it stops waiting and uses the result.  Nothing guarantees the
 * worker got to run within the second (a loaded machine, a debugger...): when
 * the wait times out while the worker could still run, the assertion fails.
 * A checker whose timeouts fire only when no thread can run never sees it. */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int ready;
static int result;

static void *worker(void *arg)
{
    (void)arg;
    int partial = 0;
    for (int i = 1; i <= 3; i++) {
        CHECK(pthread_mutex_lock(&m));
        partial += i;
        CHECK(pthread_mutex_unlock(&m));
    }
    CHECK(pthread_mutex_lock(&m));
    result = partial * 7;
    ready = 1;
    CHECK(pthread_cond_signal(&c));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_mutex_lock(&m));
    struct timespec deadline = deadline_in_ms(1000);
    while (!ready) {
        int rc = pthread_cond_timedwait(&c, &m, &deadline);
        if (rc == ETIMEDOUT)
            break; /* bug: a timeout does not mean the worker is done */
        CHECK(rc);
    }
    int r = result;
    CHECK(pthread_mutex_unlock(&m));
    assert(r == 42);
    CHECK(pthread_join(t, NULL));
    return 0;
}
