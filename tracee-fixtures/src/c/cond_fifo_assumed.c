/* cond_fifo_assumed — verdict: assertion.
 *
 * Two workers wait on one condition variable, the second only after the first
 * is waiting; main then signals once and expects the worker that waited first
 * to be the one served.  POSIX says a signal unblocks at least one waiter, not
 * which; glibc may wake either (any waiter of its oldest group takes the
 * signal), so the assertion can fail, though a native run nearly always wakes
 * the first.  A model of condition variables that wakes waiters in arrival
 * order never fails it. */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static int waiting, tickets, served;
static long order[2];

static void *worker(void *arg)
{
    CHECK(pthread_mutex_lock(&m));
    waiting++;
    CHECK(pthread_cond_broadcast(&arrived));
    while (tickets == 0)
        CHECK(pthread_cond_wait(&go, &m));
    tickets--;
    order[served++] = (long)arg;
    CHECK(pthread_cond_broadcast(&arrived));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++) {
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1)));
        CHECK(pthread_mutex_lock(&m));
        while (waiting < i + 1)
            CHECK(pthread_cond_wait(&arrived, &m));
        CHECK(pthread_mutex_unlock(&m));
    }
    CHECK(pthread_mutex_lock(&m));
    tickets = 1;
    CHECK(pthread_cond_signal(&go));
    while (served < 1)
        CHECK(pthread_cond_wait(&arrived, &m));
    long first = order[0];
    tickets = 1;
    CHECK(pthread_cond_signal(&go));
    CHECK(pthread_mutex_unlock(&m));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL));
    assert(first == 1); /* bug: assumes the first waiter is woken first */
    return 0;
}
