/* stack_reuse_ok — verdict: none.
 *
 * Many short threads, one after another, each with locals whose address
 * escapes (passed to a helper that writes through the pointer) and that it
 * then reads and writes through its own frame, so mcheck traces those frame
 * accesses.  glibc caches the stacks of exited threads and gives them to the
 * next threads it creates: a new thread uses the very addresses the previous
 * one used.  Half the threads are detached: nothing the program does orders
 * a detached thread's last accesses (after its sem_post) with the next
 * thread's, yet they cannot race, because the stack is only handed over
 * after the first thread has exited.  A checker that keeps the dead thread's
 * accesses to its stack reports a false race here. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include "common.h"

#define ROUNDS 6

static sem_t finished;

static __attribute__((noinline)) void fill(int *slots, int n, int seed)
{
    for (int i = 0; i < n; i++)
        slots[i] = seed + i;
}

static int use_locals(int seed)
{
    int slots[8];
    int total = 0;
    fill(slots, 8, seed);
    for (int i = 0; i < 8; i++)
        total += slots[i]; /* frame reads of an escaped array */
    slots[0] = total;      /* a frame write */
    return slots[0];
}

static void *joined(void *arg)
{
    return (void *)(long)use_locals((int)(long)arg);
}

static void *detached(void *arg)
{
    int local = use_locals((int)(long)arg);
    int after[2];
    fill(after, 2, local);
    CHECK(sem_post(&finished));
    /* After the post: unordered with what main does next, on this stack. */
    after[0] += after[1];
    return (void *)(long)after[0];
}

int main(void)
{
    CHECK(sem_init(&finished, 0, 0));
    long sum = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t t;
        void *ret;
        CHECK(pthread_create(&t, NULL, joined, (void *)(long)round));
        CHECK(pthread_join(t, &ret));
        sum += (long)ret;

        pthread_attr_t attr;
        CHECK(pthread_attr_init(&attr));
        CHECK(pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
        CHECK(pthread_create(&t, &attr, detached, (void *)(long)round));
        CHECK(pthread_attr_destroy(&attr));
        while (sem_wait(&finished) != 0)
            ;
    }
    printf("sum = %ld\n", sum);
    return 0;
}
