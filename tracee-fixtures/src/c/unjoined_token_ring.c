/* unjoined_token_ring — verdict: assertion.  In the spirit of SCTBench's
 * token_ring_bad.
 *
 * Three threads pass a value round a ring under one lock (x1 from x3, x2 from
 * x1, x3 from x2); a fourth asserts, once all three have passed it on, that the
 * three are equal, which holds only for some orders.  main returns without
 * joining, so the process ends under them: the failure needs main to be
 * preempted before it returns and all four threads to run first.  A reduction
 * that forgets that the exit ends the other threads calls it correct. */
#include <assert.h>
#include <pthread.h>

static pthread_mutex_t ring = PTHREAD_MUTEX_INITIALIZER;
static int x1 = 1, x2 = 2, x3 = 1;
static int passed1, passed2, passed3;

static void *first(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring);
    x1 = (x3 + 1) % 4;
    passed1 = 1;
    pthread_mutex_unlock(&ring);
    return NULL;
}

static void *second(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring);
    x2 = x1;
    passed2 = 1;
    pthread_mutex_unlock(&ring);
    return NULL;
}

static void *third(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring);
    x3 = x2;
    passed3 = 1;
    pthread_mutex_unlock(&ring);
    return NULL;
}

static void *checker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring);
    if (passed1 && passed2 && passed3)
        assert(x1 == x2 && x2 == x3);
    pthread_mutex_unlock(&ring);
    return NULL;
}

int main(void)
{
    pthread_t a, b, c, d;
    pthread_create(&a, NULL, first, NULL);
    pthread_create(&b, NULL, second, NULL);
    pthread_create(&c, NULL, third, NULL);
    pthread_create(&d, NULL, checker, NULL);
    return 0;
}
