/* race_barrier_phases_ok — verdict: none.
 *
 * Phased computation with a barrier.  Three threads share the global arrays
 * `slot` and `seen`.  Phase 1: each writes its own slot[id].  Barrier.
 * Phase 2: each reads every slot (including the others') and writes
 * seen[id].  Barrier.  Phase 3: each overwrites its own slot[id] again (the
 * others' phase-2 reads of it are before the second barrier).  main reads
 * everything after joining.
 *
 * pthread_barrier_wait orders every thread's accesses before the barrier
 * with every thread's accesses after it, so no data race on any schedule. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include "../c/common.h"

#define N 3

static pthread_barrier_t barrier;
static long slot[N];
static long seen[N];

static void barrier_wait(void)
{
    int rc = pthread_barrier_wait(&barrier);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
        fprintf(stderr, "barrier_wait: %d\n", rc);
        abort();
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    slot[id] = 10 * (id + 1);
    sched_yield();
    barrier_wait();
    long sum = 0;
    for (int i = 0; i < N; i++)
        sum += slot[i];
    seen[id] = sum;
    barrier_wait();
    slot[id] = -1;
    return NULL;
}

int main(void)
{
    pthread_t t[N];
    CHECK(pthread_barrier_init(&barrier, NULL, N));
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i));
    for (int i = 0; i < N; i++)
        CHECK(pthread_join(t[i], NULL));
    CHECK(pthread_barrier_destroy(&barrier));
    for (int i = 0; i < N; i++) {
        if (seen[i] != 60 || slot[i] != -1) {
            fprintf(stderr, "thread %d: seen %ld slot %ld\n", i, seen[i], slot[i]);
            return 1;
        }
    }
    printf("all threads saw 60\n");
    return 0;
}
