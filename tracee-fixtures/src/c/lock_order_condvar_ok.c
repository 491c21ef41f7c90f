/* lock_order_condvar_ok — verdict: none.
 *
 * lock_order_flag_ok with a condition variable: thread 1 takes a then b, then
 * sets the flag under m and signals; thread 2 waits on the condvar while the
 * flag is clear, then takes b then a.  No schedule deadlocks.  When thread 2
 * finds the flag already set it never waits, no signal wakes it, and nothing
 * but the mutex m orders the two lock orders in that execution: the a/b cycle
 * looks concurrent.  mcheck confirms it by holding each thread just before its
 * second lock, finds no deadlock, and reports nothing. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t set = PTHREAD_COND_INITIALIZER;
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
    pthread_cond_signal(&set);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *ba(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    while (!done)
        pthread_cond_wait(&set, &m);
    pthread_mutex_unlock(&m);
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
