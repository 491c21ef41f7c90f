/* sem_deadlock — verdict: deadlock.
 *
 * ABBA with binary semaphores instead of mutexes.  s1 and s2 start at 1.
 * Thread 1 waits s1 then s2; thread 2 waits s2 then s1.  Deadlock when
 * thread 1 takes s1 and thread 2 takes s2 before either takes its second:
 * both block in sem_wait and main blocks in join.  Any other order of the
 * two critical sections completes. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>

static sem_t s1, s2;
static int shared;

static void *t1(void *arg)
{
    (void)arg;
    sem_wait(&s1);
    sem_wait(&s2);
    shared++;
    sem_post(&s2);
    sem_post(&s1);
    return NULL;
}

static void *t2(void *arg)
{
    (void)arg;
    sem_wait(&s2);
    sem_wait(&s1);
    shared++;
    sem_post(&s1);
    sem_post(&s2);
    return NULL;
}

int main(void)
{
    sem_init(&s1, 0, 1);
    sem_init(&s2, 0, 1);
    pthread_t x, y;
    pthread_create(&x, NULL, t1, NULL);
    pthread_create(&y, NULL, t2, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    printf("shared = %d\n", shared);
    return 0;
}
