/* sigwait_pthread_kill_ok — verdict: none.
 *
 * A signal-handling thread says it is ready (a semaphore), then waits in
 * sigwait() for SIGUSR1 (blocked in every thread); the main thread, once the
 * waiter is ready, wakes it with pthread_kill(), then joins it: the shape of
 * pbzip2's terminator thread.  The waiting thread must be blocked, not
 * running: the main thread has to run for the signal to be sent at all. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include "common.h"

static sigset_t set;
static sem_t ready;
static int got;

static void *waiter(void *arg)
{
    (void)arg;
    int sig = 0;
    CHECK(sem_post(&ready));
    CHECK(sigwait(&set, &sig));
    got = sig;
    return NULL;
}

int main(void)
{
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL));
    CHECK(sem_init(&ready, 0, 0));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, waiter, NULL));
    CHECK(sem_wait(&ready));
    CHECK(pthread_kill(t, SIGUSR1));
    CHECK(pthread_join(t, NULL));
    if (got != SIGUSR1)
        abort();
    return 0;
}
