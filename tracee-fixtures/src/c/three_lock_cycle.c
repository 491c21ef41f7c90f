/* three_lock_cycle — verdict: deadlock.
 *
 * A lock-order cycle through three mutexes and three threads:
 *   t0: a -> b,   t1: b -> c,   t2: c -> a.
 * No two threads alone form an ABBA pair; the deadlock needs all three to
 * take their first lock before any takes its second (each thread yields
 * between its two locks, an extra scheduling point that makes that
 * interleaving more likely).  Then t0 waits for b (held by t1), t1 for c
 * (held by t2), t2 for a (held by t0), and main waits in join. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static pthread_mutex_t locks[3] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER};
static int shared;

static void *worker(void *arg)
{
    int i = (int)(long)arg;
    pthread_mutex_t *first = &locks[i];
    pthread_mutex_t *second = &locks[(i + 1) % 3];
    pthread_mutex_lock(first);
    sched_yield();
    pthread_mutex_lock(second);
    shared++;
    pthread_mutex_unlock(second);
    pthread_mutex_unlock(first);
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("shared = %d\n", shared);
    return 0;
}
