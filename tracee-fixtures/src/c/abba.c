/* abba — verdict: deadlock.  Built four ways: abba_O0 (-O0), abba_O2 (-O2),
 * abba_static (-static) and abba_stripped (a stripped copy of abba_O2).
 *
 * Classic lock-order inversion.  Thread 1 takes a then b; thread 2 takes b
 * then a.  The deadlock needs a specific interleaving at scheduling points:
 * thread 1 acquires a, then (at the entry of its pthread_mutex_lock(&b))
 * thread 2 runs and acquires b; now each waits for the other's lock and
 * main waits in pthread_join.  If either thread gets both locks before the
 * other takes its first one, the program finishes normally. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *t1(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    shared++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *t2(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    shared++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, t1, NULL);
    pthread_create(&y, NULL, t2, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
