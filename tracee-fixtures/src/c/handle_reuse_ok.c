/* handle_reuse_ok — verdict: none.
 *
 * glibc caches the stacks of finished threads and hands the same stack, and so the same
 * pthread_t value, to the next thread it creates.  This program creates and joins threads one
 * after another, then creates and detaches more, so every pthread_t after the first is a
 * reused one.  A checker that maps pthread_t to the first thread that ever had that value
 * would report "joined twice"/"detached twice" here: correct code, no finding.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>

static sem_t finished;
static int counter;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *detached_work(void *arg)
{
    work(arg);
    sem_post(&finished);
    return NULL;
}

int main(void)
{
    sem_init(&finished, 0, 0);
    for (int i = 0; i < 4; i++) {
        pthread_t t;
        pthread_create(&t, NULL, work, NULL);
        pthread_join(t, NULL);
    }
    for (int i = 0; i < 4; i++) {
        pthread_t t;
        pthread_create(&t, NULL, detached_work, NULL);
        pthread_detach(t);
        sem_wait(&finished);
    }
    printf("counter=%d\n", counter);
    return counter == 8 ? 0 : 1;
}
