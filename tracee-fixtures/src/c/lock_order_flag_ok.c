/* lock_order_flag_ok — verdict: none.
 *
 * Thread 1 takes a then b, then sets a flag under mutex m; thread 2 polls the
 * flag under m (yielding between polls) and only once it is set takes b then
 * a.  The flag hands the two lock orders over: no schedule deadlocks.  The
 * hand-over is a mutex, which the lock-order graph does not count as an order
 * (lock edges would hide every real inversion), so each execution shows an a/b
 * cycle that looks concurrent: mcheck confirms it by holding each thread just
 * before its second lock, finds no deadlock, and reports nothing (TSan and
 * helgrind report a lock-order inversion here). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int done;   /* under m */
static int shared; /* under a and b */

static void *ab(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    shared++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *ba(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&m);
        int d = done;
        pthread_mutex_unlock(&m);
        if (d)
            break;
        sched_yield();
    }
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    shared++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, ab, NULL);
    pthread_create(&y, NULL, ba, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
