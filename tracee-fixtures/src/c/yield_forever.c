/* yield_forever — verdict: livelock.
 *
 * The worker politely waits for a flag with sched_yield(), but main forgot to set it and
 * joins the worker: the program never ends although every thread that can run does run.
 * Under mcheck every yield is a scheduling point, the schedule stays fair (the worker is the
 * only thread that can run), and the execution reaches --max-steps: a possible livelock,
 * with the repeating operations named.  Natively the program hangs.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static volatile int flag;

static void *waiter(void *arg)
{
    (void)arg;
    while (!flag)
        sched_yield();
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    /* Bug: flag = 1 is missing here. */
    pthread_join(t, NULL);
    puts("done");
    return 0;
}
