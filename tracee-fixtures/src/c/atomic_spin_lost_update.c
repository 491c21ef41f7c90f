/* atomic_spin_lost_update — verdict: data_race (also assertion).
 *
 * atomic_spin_ok's hand-over, then both threads increment a plain counter without a
 * lock: a real race and a lost update. The worker's busy wait on the C11 flag has no
 * scheduling point; mcheck learns its load as a yield point (the first execution is spent
 * on it), then finds the race and the failed assertion, and their schedule files carry the
 * busy wait (`busy_wait_sites`) so that they replay. */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

static _Atomic int flag;
static int counter;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&flag, memory_order_acquire))
        ;
    int c = counter;
    counter = c + 1;
    return NULL;
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, spinner, NULL));
    atomic_store_explicit(&flag, 1, memory_order_release);
    int c = counter;
    counter = c + 1;
    CHECK(pthread_join(t, NULL));
    assert(counter == 2);
    return 0;
}
