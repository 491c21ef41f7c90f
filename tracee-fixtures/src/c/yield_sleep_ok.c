/* yield_sleep_ok — verdict: none.
 *
 * Correct use of sched_yield, nanosleep, clock_nanosleep (relative and
 * absolute) and usleep by two threads that take turns through a mutex.
 * Sleeps are 1 ms (real when run natively, virtual under mcheck).  The
 * sleeps and yields are scheduling points only; correctness never depends
 * on them, the shared counter is protected by the mutex. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <assert.h>
#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void bump(void)
{
    CHECK(pthread_mutex_lock(&m));
    counter++;
    CHECK(pthread_mutex_unlock(&m));
}

static void *worker(void *arg)
{
    (void)arg;
    struct timespec ms1 = {0, 1000000L};

    sched_yield();
    bump();

    while (nanosleep(&ms1, NULL) != 0 && errno == EINTR)
        ;
    bump();

    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &ms1, NULL));
    bump();

    struct timespec abs;
    clock_gettime(CLOCK_MONOTONIC, &abs);
    abs.tv_nsec += 1000000L;
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL));
    bump();

    usleep(1000);
    sched_yield();
    bump();
    return NULL;
}

int main(void)
{
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, worker, NULL));
    CHECK(pthread_create(&t2, NULL, worker, NULL));
    CHECK(pthread_join(t1, NULL));
    CHECK(pthread_join(t2, NULL));
    assert(counter == 10);
    return 0;
}
