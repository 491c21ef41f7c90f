/* lock_order_sem_ok — verdict: none.
 *
 * Thread 1 takes a then b, then posts a semaphore (initially 0); thread 2
 * waits for it before it takes b then a.  The hand-over orders the two lock
 * orders in every schedule: no deadlock.  (mcheck counts semaphore, condvar,
 * barrier and futex hand-overs as orders of the lock-order graph.) */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static sem_t done;
static int shared;

static void *ab(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    shared++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    sem_post(&done);
    return NULL;
}

static void *ba(void *arg)
{
    (void)arg;
    sem_wait(&done);
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
    sem_init(&done, 0, 0);
    pthread_create(&x, NULL, ab, NULL);
    pthread_create(&y, NULL, ba, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    sem_destroy(&done);
    printf("shared = %d\n", shared);
    return 0;
}
