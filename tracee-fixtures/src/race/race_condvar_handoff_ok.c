/* race_condvar_handoff_ok — verdict: none.
 *
 * Producer/consumer over a one-slot queue with a condition variable.  The
 * producer mallocs and fills each buffer OUTSIDE the lock, then under `m`
 * waits (predicate loop) until `slot` is empty, stores the pointer and
 * signals `changed`.  The consumer, under `m`, waits (predicate loop) until
 * `slot` is non-empty, takes the pointer, signals, unlocks, and only then
 * reads, modifies and frees the buffer.  Four buffers; the last one carries
 * `last = 1`.
 *
 * The fill is before the producer's unlock (or cond_wait release) that
 * follows publishing; the consumer's reads are after its lock/cond_wait
 * reacquisition that observed the pointer: mutex edges order them (the
 * condvar only decides who waits).  No data race on any schedule. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

#define ITEMS 4

struct msg {
    int seq;
    int last;
    long data[8];
};

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct msg *slot;

static void *producer(void *arg)
{
    (void)arg;
    for (int s = 0; s < ITEMS; s++) {
        struct msg *msg = malloc(sizeof *msg);
        if (!msg)
            abort();
        msg->seq = s;
        msg->last = s == ITEMS - 1;
        for (int i = 0; i < 8; i++)
            msg->data[i] = s + i;
        CHECK(pthread_mutex_lock(&m));
        while (slot != NULL)
            CHECK(pthread_cond_wait(&changed, &m));
        slot = msg;
        CHECK(pthread_cond_signal(&changed));
        CHECK(pthread_mutex_unlock(&m));
    }
    return NULL;
}

static void *consumer(void *arg)
{
    long *sum = arg;
    for (int expect = 0;; expect++) {
        CHECK(pthread_mutex_lock(&m));
        while (slot == NULL)
            CHECK(pthread_cond_wait(&changed, &m));
        struct msg *msg = slot;
        slot = NULL;
        CHECK(pthread_cond_signal(&changed));
        CHECK(pthread_mutex_unlock(&m));

        if (msg->seq != expect) {
            fprintf(stderr, "got seq %d want %d\n", msg->seq, expect);
            abort();
        }
        for (int i = 0; i < 8; i++) {
            *sum += msg->data[i];
            msg->data[i] = -1; /* the consumer owns the buffer now */
        }
        int last = msg->last;
        free(msg);
        if (last)
            break;
    }
    return NULL;
}

int main(void)
{
    pthread_t p, c;
    long sum = 0;
    CHECK(pthread_create(&c, NULL, consumer, &sum));
    CHECK(pthread_create(&p, NULL, producer, NULL));
    CHECK(pthread_join(p, NULL));
    CHECK(pthread_join(c, NULL));
    /* sum over s<4, i<8 of s+i = 8*6 + 4*28 = 160 */
    if (sum != 160) {
        fprintf(stderr, "sum %ld\n", sum);
        return 1;
    }
    printf("sum = %ld\n", sum);
    return 0;
}
