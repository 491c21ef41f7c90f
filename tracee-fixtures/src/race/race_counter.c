/* race_counter — verdict: data_race.
 *
 * The classic lost update.  Two threads each do `counter++` three times on
 * the global `long counter` with no lock and no atomics (sched_yield between
 * increments, so each increment stays a separate access and the threads
 * interleave).  At -O1 gcc emits each `counter++` as one non-LOCK
 * `addq $1, counter(%rip)`: a read and a write of `counter` by the same
 * instruction.  main joins both and prints the total, 6 unless an update
 * was lost.
 *
 * Nothing orders the two threads' accesses to `counter` (only create and
 * join, which order them with main, not with each other), so the
 * increments in one thread race with those in the other on EVERY schedule.
 * An actual lost update (total < 6) needs two cores executing the
 * non-atomic add at the same moment, so it is rare natively and impossible
 * under mcheck, which never switches inside an instruction: only the race
 * detector catches this bug. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "../c/common.h"

long counter;

static void *bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        counter++;
        sched_yield();
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, bump, NULL));
    CHECK(pthread_create(&b, NULL, bump, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("counter = %ld\n", counter);
    return 0;
}
