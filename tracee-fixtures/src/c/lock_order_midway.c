/* lock_order_midway — verdict: lock_order.
 *
 * A lock-order inversion in the middle of two long executions of threads.
 * Both threads work through ROUNDS rounds of a mutex they share (every round a
 * scheduling point that depends on the other thread's), and each takes a pair
 * of locks once on the way: "first" takes a then b at round ROUNDS/3, "second"
 * takes b then a at round 2*ROUNDS/3.  The deadlock needs "second" to be
 * stopped between its two locks exactly while "first" reaches its pair, and
 * the two pairs lie a third of the run apart: one preemption at one exact point
 * of thousands, after thousands of dependent steps that the search orders
 * first.  The default command reports the cycle from the first execution
 * (nothing but locks orders the two pairs) and does not reach the deadlock in
 * its follow-up.  (lock_order_deep takes its early pair at the very start,
 * where a search's first preemptions go.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;
static long counter; /* under work */
static long pairs;   /* under a and b */
static int rounds = 3000;

static void take(pthread_mutex_t *x, pthread_mutex_t *y)
{
    pthread_mutex_lock(x);
    pthread_mutex_lock(y);
    pairs++;
    pthread_mutex_unlock(y);
    pthread_mutex_unlock(x);
}

static void *worker(void *arg)
{
    int second = arg != NULL;
    int at = second ? 2 * rounds / 3 : rounds / 3;
    for (int i = 0; i < rounds; i++) {
        if (i == at) {
            if (second)
                take(&b, &a);
            else
                take(&a, &b);
        }
        pthread_mutex_lock(&work);
        counter++;
        pthread_mutex_unlock(&work);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]);
    pthread_t x, y;
    pthread_create(&x, NULL, worker, NULL);
    pthread_create(&y, NULL, worker, (void *)1);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("counter = %ld, pairs = %ld\n", counter, pairs);
    return 0;
}
