/* exit_holding_lock — verdict: deadlock.
 *
 * A thread returns while still holding a mutex, and main later locks it.
 * The worker locks `m` and, on its early-return path taken when main has not
 * yet published `config` (config == 0), returns without unlocking.  main
 * locks `m` to publish config: if the worker ran first and left with `m`
 * held, main blocks forever on a mutex whose owner no longer exists.  If
 * main publishes first, the worker takes the normal path and unlocks. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int config;
static int result;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    if (config == 0)
        return NULL; /* BUG: early return leaks the lock */
    result = config * 2;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&m);
    config = 21;
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("result = %d\n", result);
    return 0;
}
