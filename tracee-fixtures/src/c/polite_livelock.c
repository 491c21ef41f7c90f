/* polite_livelock — verdict: livelock (run with a small --max-steps).
 *
 * Two over-polite threads.  Each raises its flag to say it wants the shared counter, and
 * while the other's flag is up it backs off: "after you", it hands the turn over and
 * yields, then looks again.  The bug: unlike Peterson's algorithm it defers whenever the
 * other *wants* in, whoever's turn it is, and keeps its own flag up while it waits.  Once
 * both flags are up (the barrier makes sure of it) each thread waits for the other
 * forever, both running, both yielding: a livelock.  Natively the program hangs, every
 * thread busy.  Under mcheck every schedule is fair to yielding threads, so the execution
 * reaches --max-steps while the two threads repeat the same few operations, and mcheck
 * reports a livelock with that cycle.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include "common.h"

static atomic_int want[2];
static atomic_int turn;
static atomic_long backoffs;
static pthread_barrier_t both_ready;
static long counter;

static void *polite(void *arg)
{
    int me = (int)(long)arg, other = 1 - me;
    atomic_store(&want[me], 1);
    pthread_barrier_wait(&both_ready);
    while (atomic_load(&want[other])) { /* BUG: should also check whose turn it is */
        atomic_store(&turn, other);     /* after you */
        atomic_fetch_add(&backoffs, 1);
        sched_yield();
    }
    counter++;
    atomic_store(&want[me], 0);
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    CHECK(pthread_barrier_init(&both_ready, NULL, 2));
    for (long i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, polite, (void *)i));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("counter = %ld after %ld back-offs\n", counter, atomic_load(&backoffs));
    return 0;
}
