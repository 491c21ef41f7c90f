/* lock_order_gated_ok — verdict: none.
 *
 * Two threads take a and b in opposite orders, but always inside a common gate
 * mutex g, taken first and held around both: the two orders can never be in
 * progress at once, so no schedule deadlocks.  A lock-order checker that
 * ignores gate locks (TSan, helgrind) reports a false inversion here. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t g = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *ab(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&g);
        pthread_mutex_lock(&a);
        pthread_mutex_lock(&b);
        shared++;
        pthread_mutex_unlock(&b);
        pthread_mutex_unlock(&a);
        pthread_mutex_unlock(&g);
    }
    return NULL;
}

static void *ba(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&g);
        pthread_mutex_lock(&b);
        pthread_mutex_lock(&a);
        shared++;
        pthread_mutex_unlock(&a);
        pthread_mutex_unlock(&b);
        pthread_mutex_unlock(&g);
    }
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, ab, NULL);
    pthread_create(&y, NULL, ba, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
