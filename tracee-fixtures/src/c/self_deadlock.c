/* self_deadlock — verdict: deadlock.
 *
 * A thread locks a default (non-recursive) mutex it already holds, but only
 * on some schedules.  The worker takes `m` and, if main has already set
 * `mode = 1`, calls a helper that locks `m` again: a normal mutex relocked
 * by its owner blocks forever (and main then blocks in join).  The bug
 * appears when main's locked `mode = 1` update runs before the worker's
 * critical section; if the worker goes first it sees mode 0 and finishes. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int mode;
static int total;

static void add_locked(int v)
{
    pthread_mutex_lock(&m); /* BUG: called with m already held */
    total += v;
    pthread_mutex_unlock(&m);
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    if (mode == 1)
        add_locked(10);
    else
        total += 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&m);
    mode = 1;
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("total = %d\n", total);
    return 0;
}
