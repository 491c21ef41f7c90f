/* condvar_ok — verdict: none.
 *
 * Correct condition-variable use: a bounded buffer (capacity 2) with one
 * producer and two consumers.  Every wait is in a `while (!predicate)` loop,
 * so spurious wakeups and signals sent before the wait are harmless.
 *   - producer: pthread_cond_wait on not_full, pthread_cond_signal(not_empty)
 *   - consumers: pthread_cond_timedwait on not_empty (timeouts just re-check
 *     the predicate), pthread_cond_signal(not_full)
 *   - end of stream: the producer sets `done` and pthread_cond_broadcast()s
 *     so that every consumer wakes up and leaves.
 * main checks that each item was consumed exactly once (sum matches). */
#include <pthread.h>
#include <assert.h>
#include "common.h"

#define CAP 2
#define NITEMS 4

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int buf[CAP];
static int count, head, done;
static int consumed_sum;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= NITEMS; i++) {
        CHECK(pthread_mutex_lock(&m));
        while (count == CAP)
            CHECK(pthread_cond_wait(&not_full, &m));
        buf[(head + count) % CAP] = i;
        count++;
        CHECK(pthread_cond_signal(&not_empty));
        CHECK(pthread_mutex_unlock(&m));
    }
    CHECK(pthread_mutex_lock(&m));
    done = 1;
    CHECK(pthread_cond_broadcast(&not_empty));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        CHECK(pthread_mutex_lock(&m));
        while (count == 0 && !done) {
            struct timespec dl = deadline_in_ms(1000);
            int rc = pthread_cond_timedwait(&not_empty, &m, &dl);
            if (rc != 0 && rc != ETIMEDOUT)
                CHECK(rc);
        }
        if (count == 0 && done) {
            CHECK(pthread_mutex_unlock(&m));
            return NULL;
        }
        int item = buf[head];
        head = (head + 1) % CAP;
        count--;
        consumed_sum += item;
        CHECK(pthread_cond_signal(&not_full));
        CHECK(pthread_mutex_unlock(&m));
    }
}

int main(void)
{
    pthread_t p, c1, c2;
    CHECK(pthread_create(&c1, NULL, consumer, NULL));
    CHECK(pthread_create(&p, NULL, producer, NULL));
    CHECK(pthread_create(&c2, NULL, consumer, NULL));
    CHECK(pthread_join(p, NULL));
    CHECK(pthread_join(c1, NULL));
    CHECK(pthread_join(c2, NULL));
    CHECK(pthread_cond_destroy(&not_full));
    CHECK(pthread_cond_destroy(&not_empty));
    CHECK(pthread_mutex_destroy(&m));
    assert(consumed_sum == NITEMS * (NITEMS + 1) / 2);
    return 0;
}
