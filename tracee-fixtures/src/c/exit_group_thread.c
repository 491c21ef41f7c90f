/* exit_group_thread — verdict: none.  Process-hygiene fixture.
 *
 * A non-main thread ends the whole process with status 0 while main is
 * blocked.  Argument selects the variant:
 *   "join": main blocks in pthread_join on the exiting thread, which calls
 *           _exit(0) (exit_group);
 *   "cond": main blocks in pthread_cond_wait on a predicate that is never
 *           set, and the thread calls syscall(SYS_exit_group, 0) directly.
 * Every schedule ends with exit status 0 (main can never return first), so
 * nothing is wrong; mcheck must cope with threads vanishing while blocked
 * in its model and leave no tracee behind. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int never;
static int use_cond;

static void *exiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    if (use_cond)
        syscall(SYS_exit_group, 0);
    _exit(0);
}

int main(int argc, char **argv)
{
    use_cond = argc > 1 && strcmp(argv[1], "cond") == 0;
    pthread_t t;
    pthread_create(&t, NULL, exiter, NULL);
    if (use_cond) {
        pthread_mutex_lock(&m);
        while (!never)
            pthread_cond_wait(&c, &m);
        pthread_mutex_unlock(&m);
    } else {
        pthread_join(t, NULL);
    }
    printf("not reached\n");
    return 1;
}
