/* snapshot_saved_pid_ok — verdict: none.  A pid saved by the program, used in a fork copy.
 *
 * Main saves getpid() before its first thread (so before the startup snapshot), as lbzip2
 * does, and waits in sigwait; a worker saves getpid() again once running, takes a mutex
 * 20 times, sends SIGUSR1 to the first saved pid with kill, takes the mutex 20 times more
 * and sends SIGUSR2 to the second.  Fork copies run under pids of their own: the saved
 * pids then name the template or a process already gone, kill fails with ESRCH (or
 * signals another process) and the program exits with status 2 or 3, unless the tracer
 * points such a kill at the copy's own pid.  dfs takes branch snapshots after the
 * second getpid, so both the startup pid and a copy's pid are exercised.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long shared;
static pid_t before;
static pid_t during;

static void bump(int n)
{
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        shared++;
        pthread_mutex_unlock(&m);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    during = getpid();
    bump(20);
    if (kill(before, SIGUSR1) != 0) {
        perror("kill of the pid saved before the first thread");
        _exit(2);
    }
    bump(20);
    if (kill(during, SIGUSR2) != 0) {
        perror("kill of the pid saved by the worker");
        _exit(3);
    }
    return NULL;
}

int main(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    before = getpid();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 4;
    bump(8);
    int got = 0;
    for (int i = 0; i < 2; i++) {
        int sig;
        if (sigwait(&set, &sig) != 0)
            return 5;
        got |= sig == SIGUSR1 ? 1 : sig == SIGUSR2 ? 2 : 0;
    }
    pthread_join(t, NULL);
    return got == 3 ? 0 : 6;
}
