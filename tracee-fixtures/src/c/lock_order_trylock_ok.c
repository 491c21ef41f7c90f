/* lock_order_trylock_ok — verdict: none.
 *
 * Thread 1 takes a then b.  Thread 2 takes b, then only tries a: when a is
 * busy it backs off (releases b, yields) and starts over.  The trylock never
 * waits, so the opposite order cannot close a deadlock. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *ab(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    shared++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *ba_backoff(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&b);
        if (pthread_mutex_trylock(&a) == 0)
            break;
        pthread_mutex_unlock(&b);
        sched_yield();
    }
    shared++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, ab, NULL);
    pthread_create(&y, NULL, ba_backoff, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
