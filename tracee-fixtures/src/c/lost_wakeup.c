/* lost_wakeup — verdict: deadlock.
 *
 * Condition variable used without a predicate.  The waiter locks `m` and
 * calls pthread_cond_wait once, unconditionally.  main locks `m`, signals
 * and unlocks, then joins the waiter.  If main's signal comes before the
 * waiter has started waiting, the signal is lost (condvars have no memory):
 * the waiter sleeps forever and main blocks in join — a deadlock.  If the
 * waiter is already waiting when main signals, it wakes and both finish.
 * (The fix is a `ready` flag checked in a while loop.) */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    pthread_cond_wait(&c, &m); /* BUG: no predicate */
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    pthread_mutex_lock(&m);
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("woken\n");
    return 0;
}
