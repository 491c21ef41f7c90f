/* snapshot_pending_signal_ok — verdict: none.  A signal pending across a fork snapshot.
 *
 * A thread sends SIGUSR1 to main (pthread_kill) while main is stopped at a scheduling
 * point, then takes a mutex 60 times; main takes it 8 times, joins, and checks that its
 * handler ran.  The signal stays pending in the kernel until main runs again, and dfs
 * takes branch snapshots meanwhile (the executions are long).  fork() does not copy
 * pending signals, so a snapshot that does not send them again in its copies loses the
 * signal, and the program exits with status 2 in the executions started from it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long shared;
static volatile sig_atomic_t got;
static pthread_t main_thread;

static void handler(int sig)
{
    (void)sig;
    got = 1;
}

static void *kicker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    shared++;
    pthread_mutex_unlock(&m);
    pthread_kill(main_thread, SIGUSR1);
    for (int i = 0; i < 60; i++) {
        pthread_mutex_lock(&m);
        shared++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    signal(SIGUSR1, handler);
    main_thread = pthread_self();
    pthread_t t;
    if (pthread_create(&t, NULL, kicker, NULL) != 0)
        return 3;
    for (int i = 0; i < 8; i++) {
        pthread_mutex_lock(&m);
        shared++;
        pthread_mutex_unlock(&m);
    }
    pthread_join(t, NULL);
    if (!got) {
        fprintf(stderr, "signal lost\n");
        return 2;
    }
    return 0;
}
