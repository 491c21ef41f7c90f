/* join_cycle — verdict: deadlock.
 *
 * Two threads may join each other.  main creates t0 and t1, stores both
 * pthread_t handles, then posts a semaphore twice so that each thread reads
 * the handles only after they are published.  Each thread registers its
 * arrival under a mutex and yields; then, under the mutex, it checks whether
 * both threads have arrived.  A thread that sees both arrived joins the
 * other one (meaning to "wait for the partner").  If both arrive before
 * either checks, both join each other: neither can ever finish.  If one
 * thread checks before the other arrives it simply exits, and the other
 * joins it successfully.  main waits for both threads via a `finished`
 * semaphore (it never joins them itself, so nothing is joined twice).
 *
 * glibc notices some join cycles and returns EDEADLK to the second joiner
 * instead of blocking.  This program then falls back to waiting (condvar,
 * predicate loop) until the partner says it is done — but the partner only
 * gets there once its own join of this thread returns, so the cycle is a
 * deadlock whether or not the checker models glibc's EDEADLK check. */
#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <stdio.h>
#include <errno.h>

static pthread_t handles[2];
static sem_t start, finished;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int arrived;
static int done[2];

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    sem_wait(&start);

    pthread_mutex_lock(&m);
    arrived++;
    pthread_mutex_unlock(&m);

    sched_yield();

    pthread_mutex_lock(&m);
    int both = (arrived == 2);
    pthread_t other = handles[1 - me];
    pthread_mutex_unlock(&m);

    if (both && pthread_join(other, NULL) == EDEADLK) {
        /* The partner is joining us: wait for it to finish instead. */
        pthread_mutex_lock(&m);
        while (!done[1 - me])
            pthread_cond_wait(&c, &m);
        pthread_mutex_unlock(&m);
    }
    pthread_mutex_lock(&m);
    done[me] = 1;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    sem_post(&finished);
    return NULL;
}

int main(void)
{
    sem_init(&start, 0, 0);
    sem_init(&finished, 0, 0);
    pthread_t t0, t1;
    pthread_create(&t0, NULL, worker, (void *)0L);
    pthread_create(&t1, NULL, worker, (void *)1L);
    pthread_mutex_lock(&m);
    handles[0] = t0;
    handles[1] = t1;
    pthread_mutex_unlock(&m);
    sem_post(&start);
    sem_post(&start);
    sem_wait(&finished);
    sem_wait(&finished);
    printf("done\n");
    return 0;
}
