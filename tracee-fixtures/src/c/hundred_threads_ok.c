/* hundred_threads_ok — verdict: none.
 *
 * Scale test: main starts 100 threads; each locks one shared mutex once,
 * increments a counter and unlocks.  main joins all of them and checks the
 * sum is 100.  Correct under every schedule; about 500 scheduling points
 * per execution (create, lock, unlock, exit, join per thread). */
#include <pthread.h>
#include <assert.h>
#include "common.h"

#define N 100

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    counter++;
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

int main(void)
{
    static pthread_t t[N];
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < N; i++)
        CHECK(pthread_join(t[i], NULL));
    assert(counter == N);
    return 0;
}
