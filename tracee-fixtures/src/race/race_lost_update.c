/* race_lost_update — verdict: data_race, and with --keep-going also the assertion it causes.
 *
 * Two threads each increment a plain global once with a separate load and store
 * (`counter = counter + 1` through a volatile read), then main asserts the total is 2.
 * The increments race: the detector reports it in the first execution. Under
 * --preempt-on-races (the portfolio's default) the racy load and store become scheduling
 * points in later executions, so the search can switch threads between one thread's load
 * and its store: the lost update makes the assertion fail, reported as its own finding
 * with its own schedule. Natively the window is a few instructions wide.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

static volatile long counter;

static void *bump(void *arg)
{
    (void)arg;
    long seen = counter;
    counter = seen + 1;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %ld\n", counter);
    assert(counter == 2 && "lost update");
    return 0;
}
