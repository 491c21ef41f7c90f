/* Everything a fork copy must carry over faithfully from the single-threaded start:
 * thread-local storage, errno, a recursive mutex held across the first thread creation,
 * a signal handler reached through raise(), pthread_kill() of itself and pthread_kill() of
 * the main thread from another thread (which uses glibc's cached thread id of main), the
 * main thread's id, and a joined thread. Correct: exits 0. */
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static __thread int tls_value = 7;
static pthread_mutex_t rec;
static volatile sig_atomic_t handled;
static int shared;
static pthread_t main_thread;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static void *worker(void *arg)
{
    (void)arg;
    if (tls_value != 7) { /* a new thread gets the initial image, not main's value */
        fprintf(stderr, "worker sees tls_value %d\n", tls_value);
        abort();
    }
    tls_value = 100;
    CHECK(pthread_mutex_lock(&rec));
    shared += 1;
    CHECK(pthread_mutex_unlock(&rec));
    /* pthread_kill of another thread uses the target's cached id: main's must be right. */
    CHECK(pthread_kill(main_thread, SIGUSR1));
    errno = ENOENT;
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
    CHECK(pthread_mutex_init(&rec, &attr));
    signal(SIGUSR1, on_usr1);
    tls_value = 42;
    errno = EAGAIN;
    int saved_errno = errno;
    CHECK(pthread_mutex_lock(&rec));
    CHECK(pthread_mutex_lock(&rec)); /* held twice across the thread creation */

    main_thread = pthread_self();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));

    if (saved_errno != EAGAIN || tls_value != 42) {
        fprintf(stderr, "main lost its state: errno %d tls %d\n", saved_errno, tls_value);
        abort();
    }
    if (syscall(SYS_gettid) != getpid()) {
        fprintf(stderr, "main thread id %ld is not the pid %d\n", syscall(SYS_gettid), getpid());
        abort();
    }
    CHECK(raise(SIGUSR1));
    CHECK(pthread_kill(pthread_self(), SIGUSR1));
    if (handled < 2) {
        fprintf(stderr, "the handler ran %d times instead of at least 2\n", (int)handled);
        abort();
    }
    CHECK(pthread_mutex_unlock(&rec));
    CHECK(pthread_mutex_unlock(&rec));
    CHECK(pthread_join(t, NULL));
    if (shared != 1 || tls_value != 42 || handled != 3) {
        fprintf(stderr, "after join: shared %d tls %d handled %d\n", shared, tls_value,
                (int)handled);
        abort();
    }
    return 0;
}
