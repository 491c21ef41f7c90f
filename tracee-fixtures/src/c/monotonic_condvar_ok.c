/* monotonic_condvar_ok — verdict: none.
 *
 * A ticker waits on a condvar whose clock is CLOCK_MONOTONIC
 * (pthread_condattr_setclock, as HotSpot's monitors are), 100 ms at a time,
 * until main, after sleeping one second, tells it to stop.  The absolute
 * deadline is on the monotonic clock: read as CLOCK_REALTIME it lies decades
 * in the past, every wait times out at once, virtual time never reaches
 * main's wake-up, and the ticker looked like a livelock (java -version did). */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c;
static int done;
static int ticks;

static void *ticker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    while (!done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000 * 1000 * 1000) {
            ts.tv_sec += 1;
            ts.tv_nsec -= 1000 * 1000 * 1000;
        }
        if (pthread_cond_timedwait(&c, &m, &ts) != 0)
            ticks++;
    }
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c, &attr);
    pthread_condattr_destroy(&attr);

    pthread_t t;
    pthread_create(&t, NULL, ticker, NULL);
    struct timespec one_second = {1, 0};
    nanosleep(&one_second, NULL);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("stopped after %d tick(s)\n", ticks);
    return 0;
}
