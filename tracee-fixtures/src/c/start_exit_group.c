/* start_exit_group — verdict: assertion.  A new thread ending the process at its start.
 *
 * The created thread calls _exit(0) at once; main then takes a lock and aborts.  The abort
 * happens only when main's lock comes before the thread's exit_group, which the thread
 * reaches in its very first stretch of code: exit_group must be a scheduling point there
 * (the thread's start belongs to the creating step), or that order is never tried.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *child(void *arg)
{
    (void)arg;
    _exit(0);
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, child, NULL) != 0)
        return 2;
    pthread_mutex_lock(&m);
    abort();
}
