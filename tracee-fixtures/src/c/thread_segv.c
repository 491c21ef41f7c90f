/* thread_segv — verdict: crash.  Process-hygiene fixture.
 *
 * A worker thread writes through a NULL pointer unconditionally while main
 * is (usually) blocked in pthread_join: the whole process dies by SIGSEGV
 * on every schedule.  Checks that mcheck reports the crash and leaves no
 * stopped or zombie tracee behind when a non-main thread kills the
 * process. */
#include <pthread.h>
#include <stdio.h>

static int *volatile nowhere;

static void *crasher(void *arg)
{
    (void)arg;
    *nowhere = 1; /* SIGSEGV */
    return NULL;
}

static void *idle(void *arg)
{
    (void)arg;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&b, NULL, idle, NULL);
    pthread_create(&a, NULL, crasher, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("not reached\n");
    return 0;
}
