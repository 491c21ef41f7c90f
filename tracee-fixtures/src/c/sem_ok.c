/* sem_ok — verdict: none.
 *
 * Correct use of an unnamed POSIX semaphore with sem_init, sem_wait,
 * sem_trywait, sem_timedwait, sem_post and sem_destroy.  `items` counts
 * produced items: the producer posts 3 times; the consumer takes one with
 * sem_wait, one with sem_trywait (falling back to sem_wait on EAGAIN) and one
 * with sem_timedwait (retrying on ETIMEDOUT).  A second semaphore used as a
 * mutex (initial value 1) protects the shared sum.  Nothing can block
 * forever: every wait is matched by a post. */
#include <pthread.h>
#include <semaphore.h>
#include <assert.h>
#include "common.h"

static sem_t items;
static sem_t lock;
static int sum;

#define SEM_CHECK(expr)                                                       \
    do {                                                                      \
        if ((expr) != 0) {                                                    \
            perror(#expr);                                                    \
            abort();                                                          \
        }                                                                     \
    } while (0)

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= 3; i++) {
        SEM_CHECK(sem_wait(&lock));
        sum += i;
        SEM_CHECK(sem_post(&lock));
        SEM_CHECK(sem_post(&items));
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    SEM_CHECK(sem_wait(&items));

    if (sem_trywait(&items) != 0) {
        assert(errno == EAGAIN);
        SEM_CHECK(sem_wait(&items));
    }

    for (;;) {
        struct timespec dl = deadline_in_ms(500);
        if (sem_timedwait(&items, &dl) == 0)
            break;
        assert(errno == ETIMEDOUT || errno == EINTR);
    }
    return NULL;
}

int main(void)
{
    SEM_CHECK(sem_init(&items, 0, 0));
    SEM_CHECK(sem_init(&lock, 0, 1));
    pthread_t p, c;
    CHECK(pthread_create(&c, NULL, consumer, NULL));
    CHECK(pthread_create(&p, NULL, producer, NULL));
    CHECK(pthread_join(c, NULL));
    CHECK(pthread_join(p, NULL));
    int v = -1;
    SEM_CHECK(sem_getvalue(&items, &v));
    assert(v == 0);
    assert(sum == 6);
    SEM_CHECK(sem_destroy(&items));
    SEM_CHECK(sem_destroy(&lock));
    return 0;
}
