/* startup_state_abba — verdict: deadlock.
 *
 * The lock-order inversion of abba.c, in a program that, like CPython, takes another
 * path depending on what it inherited: when its stdout is a pipe, thread 1 flushes a
 * buffer under a lock of its own before it takes its locks, and when SIGINT is ignored
 * (a background job of a non-interactive shell) it takes that lock once more.  A
 * schedule found with stdout on /dev/null (--quiet-program) in the foreground has fewer
 * steps than an execution with stdout on a pipe or SIGINT ignored, so it replays only
 * if the program gets what it had in the search (src/run/program_stdio.rs,
 * src/tracee/signals.rs).  It also says whether SIGPIPE is ignored: natively it is not. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
static int shared, stdout_is_pipe, sigint_ignored, flushes;

static void *t1(void *arg)
{
    (void)arg;
    for (int i = 0; i < stdout_is_pipe + sigint_ignored; i++) {
        pthread_mutex_lock(&out);
        flushes++;
        pthread_mutex_unlock(&out);
    }
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    shared++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *t2(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    shared++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    struct stat st;
    struct sigaction sa;
    pthread_t x, y;
    stdout_is_pipe = fstat(1, &st) == 0 && S_ISFIFO(st.st_mode);
    sigint_ignored = sigaction(SIGINT, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
    printf("stdout is %s\n", stdout_is_pipe ? "a pipe" : "not a pipe");
    printf("SIGPIPE is %s\n",
           sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN ? "ignored" : "not ignored");
    fflush(stdout);
    pthread_create(&x, NULL, t1, NULL);
    pthread_create(&y, NULL, t2, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d, flushes = %d\n", shared, flushes);
    return 0;
}
