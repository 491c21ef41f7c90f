/* race_volatile_flag — verdict: data_race.
 *
 * "Flag without atomics".  The writer stores `data = 42` and then sets
 * `volatile int ready = 1`; the reader spins `while (!ready) sched_yield();`
 * and then reads `data`.  It works on x86 in practice, but volatile is not
 * synchronisation: no lock, no atomic RMW, and `ready` is neither an atomic
 * type nor ever touched by a LOCK/XCHG instruction, so the accesses are
 * plain and nothing orders the writer's stores with the reader's loads.
 *
 * The reader's first load of `ready` and the writer's store to it race on
 * EVERY schedule (whichever runs first); the reader's load of `data` also
 * races with the writer's store of it.  The report should name `ready`
 * (and `data`). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "../c/common.h"

static int data;
static volatile int ready;

static void *writer(void *arg)
{
    (void)arg;
    data = 42;
    ready = 1;
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    while (!ready)
        sched_yield();
    return (void *)(long)data;
}

int main(void)
{
    pthread_t w, r;
    void *ret;
    CHECK(pthread_create(&r, NULL, reader, NULL));
    CHECK(pthread_create(&w, NULL, writer, NULL));
    CHECK(pthread_join(w, NULL));
    CHECK(pthread_join(r, &ret));
    printf("reader saw data = %ld\n", (long)ret);
    return 0;
}
