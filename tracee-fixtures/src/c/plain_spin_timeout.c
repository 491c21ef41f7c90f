/* plain_spin_timeout — verdict: timeout (run with --execution-timeout 1).
 *
 * A thread busy-waits on a plain `volatile int` flag that main sets after
 * creating it.  Natively this terminates (main runs in parallel and sets the
 * flag).  Under mcheck only one thread runs at a time and a plain load is
 * not a scheduling point: when the spinner is scheduled before main has set
 * the flag, it spins forever without reaching a scheduling point, and mcheck
 * reports a timeout.  main passes through another scheduling point (a mutex
 * lock) before setting the flag, to give the spinner a second chance to be
 * scheduled first. */
#include <pthread.h>
#include <stdio.h>

static volatile int flag;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int other;

static void *spinner(void *arg)
{
    (void)arg;
    while (!flag)
        ; /* BUG: plain load, never yields */
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    pthread_mutex_lock(&m);
    other++;
    pthread_mutex_unlock(&m);
    flag = 1;
    pthread_join(t, NULL);
    printf("done\n");
    return 0;
}
