/* lock_order_joined_ok — verdict: none.
 *
 * Both lock orders, a then b and b then a, but never at the same time: main
 * joins the first thread before it creates the second.  Thread creation and
 * join order the two orders in every schedule, so none deadlocks (a checker
 * that reports every cycle of the lock-order graph reports a false one). */
#include <pthread.h>
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

static void *ba(void *arg)
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
    pthread_create(&x, NULL, ab, NULL);
    pthread_join(x, NULL);
    pthread_create(&y, NULL, ba, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
