/* sigusr1_handler — verdict: none.  Process-hygiene fixture.
 *
 * Installs a SIGUSR1 handler with sigaction and sends the signal to itself
 * twice: once with raise() from main, once with pthread_kill() to a worker
 * thread that is blocked waiting on a condvar.  The handlers only set a
 * volatile sig_atomic_t flag.  mcheck must deliver these signals to the
 * program (not swallow them or treat them as fatal); the program checks the
 * handler ran twice and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t handled;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int go;

static void on_usr1(int s)
{
    (void)s;
    handled++;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    while (!go)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        perror("sigaction");
        return 2;
    }

    raise(SIGUSR1);

    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_kill(t, SIGUSR1);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);

    if (handled != 2) {
        fprintf(stderr, "handler ran %d times, expected 2\n", (int)handled);
        return 1;
    }
    return 0;
}
