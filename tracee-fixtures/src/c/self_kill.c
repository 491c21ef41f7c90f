/* self_kill — verdict: exit_status.  Process-hygiene fixture.
 *
 * The process kills itself with a signal that is not a crash signal, from a
 * worker thread, while main is blocked in pthread_join.  Argument "kill"
 * (default) raises SIGKILL, "term" raises SIGTERM (default action:
 * terminate).  Death by such a signal is reported as exit_status on every
 * schedule; mcheck must not mistake it for its own failure and must not
 * leave anything behind. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int sig = SIGKILL;

static void *killer(void *arg)
{
    (void)arg;
    raise(sig);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "term") == 0)
        sig = SIGTERM;
    pthread_t t;
    pthread_create(&t, NULL, killer, NULL);
    pthread_join(t, NULL);
    /* raise() targets the calling thread, but SIGKILL/SIGTERM with the
     * default action terminate the whole process. */
    printf("not reached\n");
    return 0;
}
