/* start_exit_race — verdict: assertion.  Process exit against a new thread's start.
 *
 * main creates a thread and returns at once; the thread aborts as soon as it runs.  The
 * bug needs the thread to run before main's exit_group ends the process.  Creating a thread
 * is not a scheduling point of its own (the new thread starts within the creating step),
 * so this checks that exit_group is one while another thread lives and that the thread's
 * start is not lost behind it.
 */
#include <pthread.h>
#include <stdlib.h>

static void *child(void *arg)
{
    (void)arg;
    abort();
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, child, NULL) != 0)
        return 2;
    return 0;
}
