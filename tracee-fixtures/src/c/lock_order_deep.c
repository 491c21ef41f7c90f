/* lock_order_deep — verdict: lock_order.
 *
 * A lock-order inversion buried deep in an execution.  Thread "early" takes b
 * then a once, right away.  Thread "deep" first works through WORK rounds of a
 * mutex it shares with thread "busy" (thousands of scheduling points), and only
 * then takes a then b.  The deadlock needs "early" to be stopped between its
 * two locks until "deep" has finished all its work and taken a: one preemption
 * at one exact point among thousands, which the schedules of a small budget do
 * not reach.  Every execution takes both orders, concurrently (nothing but the
 * locks orders them), which is what the lock-order graph sees in the first. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;
static long counter; /* under work */
static long pairs;   /* under a and b */
static int rounds = 3000;

static void *deep(void *arg)
{
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&work);
        counter++;
        pthread_mutex_unlock(&work);
    }
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    pairs++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *busy(void *arg)
{
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&work);
        counter++;
        pthread_mutex_unlock(&work);
    }
    return NULL;
}

static void *early(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    pairs++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]);
    pthread_t x, y, z;
    pthread_create(&x, NULL, deep, NULL);
    pthread_create(&y, NULL, busy, NULL);
    pthread_create(&z, NULL, early, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    pthread_join(z, NULL);
    printf("counter = %ld, pairs = %ld\n", counter, pairs);
    return 0;
}
