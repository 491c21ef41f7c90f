/* double_join — verdict: api_misuse.
 *
 * The same thread is joined twice.  main creates a worker, joins it, and a
 * "cleanup" helper joins the same pthread_t again.  Joining a thread that
 * has already been joined is undefined behaviour (glibc usually returns an
 * error, but the handle may already belong to a new thread).  Happens on
 * every schedule: the misuse does not depend on the interleaving. */
#include <pthread.h>
#include <stdio.h>

static int result;

static void *worker(void *arg)
{
    (void)arg;
    result = 42;
    return NULL;
}

static void cleanup(pthread_t t)
{
    int rc = pthread_join(t, NULL); /* BUG: already joined */
    printf("second join returned %d\n", rc);
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("result = %d\n", result);
    cleanup(t);
    return 0;
}
