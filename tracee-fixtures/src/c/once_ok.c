/* once_ok — verdict: none.
 *
 * Correct use of pthread_once: three threads race to run the same
 * initialiser through one pthread_once_t; main also calls it.  Whatever the
 * order, init() runs exactly once and every caller returns only after it
 * completed, so each caller sees `ready == 1` and `init_calls == 1`. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_calls;
static int ready;

static void init(void)
{
    init_calls++;
    ready = 1;
}

static void *worker(void *arg)
{
    (void)arg;
    CHECK(pthread_once(&once, init));
    assert(ready == 1);
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL));
    CHECK(pthread_once(&once, init));
    assert(ready == 1);
    for (int i = 0; i < 3; i++)
        CHECK(pthread_join(t[i], NULL));
    assert(init_calls == 1);
    return 0;
}
