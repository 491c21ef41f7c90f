/* timedwait_hour_ok — verdict: none.
 *
 * timedwait_gives_up with a one-hour deadline: the main thread treats a
 * timeout as "the result must be there by now", and for a timeout to fire
 * before the worker (which can run all along) sets the result, the machine
 * would have to stall the worker for an hour.  A report of that schedule is
 * not one anyone should believe: a wait whose deadline is further away than
 * --early-timeout-horizon (1 s) fires only when no thread can run.  With
 * --early-timeout-horizon inf the assertion is found, as parking_lot's test
 * `wait_until` (a 49-day wait_until) was. */
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
    struct timespec deadline = deadline_in_ms(3600 * 1000);
    while (!ready) {
        int rc = pthread_cond_timedwait(&c, &m, &deadline);
        if (rc == ETIMEDOUT)
            break;
        CHECK(rc);
    }
    int r = result;
    CHECK(pthread_mutex_unlock(&m));
    assert(r == 42);
    CHECK(pthread_join(t, NULL));
    return 0;
}
