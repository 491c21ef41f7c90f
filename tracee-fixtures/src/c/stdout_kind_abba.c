/* stdout_kind_abba — verdict: deadlock.
 *
 * The lock-order inversion of abba.c, in a program that, like CPython or any stdio
 * user, takes another path depending on what its stdout is: when stdout is a pipe,
 * thread 1 flushes a buffer under a lock of its own before it takes its locks.  A
 * schedule found with stdout on /dev/null (--quiet-program) then has fewer steps than
 * an execution with stdout on a pipe, so it replays only if the program gets the kind
 * of stdout it had in the search (src/run/program_stdio.rs). */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
static int shared, stdout_is_pipe, flushes;

static void *t1(void *arg)
{
    (void)arg;
    if (stdout_is_pipe) {
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
    pthread_t x, y;
    stdout_is_pipe = fstat(1, &st) == 0 && S_ISFIFO(st.st_mode);
    printf("stdout is %s\n", stdout_is_pipe ? "a pipe" : "not a pipe");
    fflush(stdout);
    pthread_create(&x, NULL, t1, NULL);
    pthread_create(&y, NULL, t2, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d, flushes = %d\n", shared, flushes);
    return 0;
}
