/* exit_status_3 — verdict: exit_status by default, none with
 * --expect-exit 3.
 *
 * Two threads add to a counter under a mutex; main joins them and returns 3
 * on every schedule.  The status is a plain program result, not a
 * concurrency bug: mcheck reports it as exit_status only because it differs
 * from the expected exit status (0 unless --expect-exit says otherwise). */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %d, exiting with 3\n", counter);
    return counter + 1;
}
