/* race_mutex_handoff_ok — verdict: none.
 *
 * malloc'd buffers handed over under a mutex.  The producer mallocs three
 * buffers one after the other, fills each WITHOUT holding the lock, then
 * appends the pointer to the global queue `queue[]`/`queued` under `m`.
 * The consumer makes four attempts (sched_yield between them): under `m` it
 * pops the oldest queued pointer, if any; outside the lock it reads the
 * buffer, overwrites it and frees it.  main joins both and drains (reads and
 * frees) whatever the consumer did not get, then checks the grand total.
 * No thread ever waits for another, so every run is a few dozen scheduling
 * points whatever the schedule.
 *
 * Each buffer's fill happens before the producer's unlock that publishes
 * it, and the consumer's accesses after the lock that popped it: the
 * unlock→lock edge orders them (leftovers are ordered by the joins).
 * `queue` and `queued` are only touched under `m`.  No data race on any
 * schedule. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

#define ROUNDS 3
#define LEN 16

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int *queue[ROUNDS];
static int queued, popped;

static long sum_buffer(int *buf)
{
    long s = 0;
    for (int i = 0; i < LEN; i++)
        s += buf[i];
    return s;
}

static void *producer(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        int *buf = malloc(LEN * sizeof *buf);
        if (!buf)
            abort();
        for (int i = 0; i < LEN; i++)
            buf[i] = r * 100 + i;
        CHECK(pthread_mutex_lock(&m));
        queue[queued++] = buf;
        CHECK(pthread_mutex_unlock(&m));
    }
    return NULL;
}

static void *consumer(void *arg)
{
    long *sum = arg;
    for (int attempt = 0; attempt <= ROUNDS; attempt++) {
        int *buf = NULL;
        CHECK(pthread_mutex_lock(&m));
        if (popped < queued)
            buf = queue[popped++];
        CHECK(pthread_mutex_unlock(&m));
        if (buf) {
            *sum += sum_buffer(buf);
            for (int i = 0; i < LEN; i++)
                buf[i] = -1; /* the consumer owns it now */
            free(buf);
        }
        sched_yield();
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
    int by_consumer = popped;
    while (popped < queued) {
        sum += sum_buffer(queue[popped]);
        free(queue[popped++]);
    }
    long want = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < LEN; i++)
            want += r * 100 + i;
    if (sum != want) {
        fprintf(stderr, "sum %ld want %ld\n", sum, want);
        return 1;
    }
    printf("sum = %ld (%d of %d buffers taken by the consumer)\n", sum,
           by_consumer, ROUNDS);
    return 0;
}
