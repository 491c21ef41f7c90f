/* order_assert — verdict: assertion.
 *
 * Initialisation-order bug.  The checker thread reads the config under a
 * mutex and asserts it has been initialised; the initialiser thread sets it
 * under the same mutex.  The checker is created first.  The assert() fails
 * (SIGABRT) exactly when the checker's critical section runs before the
 * initialiser's — a plain ordering bug, not a data race. */
#include <pthread.h>
#include <assert.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int config_ready;
static int config_value;

static void *checker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    assert(config_ready && "config used before initialisation");
    int v = config_value;
    pthread_mutex_unlock(&m);
    printf("config = %d\n", v);
    return NULL;
}

static void *initialiser(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    config_value = 42;
    config_ready = 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t c, i;
    pthread_create(&c, NULL, checker, NULL);
    pthread_create(&i, NULL, initialiser, NULL);
    pthread_join(c, NULL);
    pthread_join(i, NULL);
    return 0;
}
