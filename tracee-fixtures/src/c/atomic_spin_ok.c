/* atomic_spin_ok — verdict: none.
 *
 * The textbook release/acquire hand-over: a worker spins on a C11 atomic flag with no
 * PAUSE and no system call in its loop, then reads what main wrote before setting it.
 * Natively main sets the flag on another CPU; under mcheck only one thread runs at a time,
 * so a spinner scheduled first used to spin until the watchdog called it a `timeout`: a
 * false finding. mcheck now learns the loop's atomic load as a yield point (one execution
 * spent) and explores the program to the end. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include "common.h"

static _Atomic int flag;
static int payload;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&flag, memory_order_acquire))
        ;
    printf("payload %d\n", payload);
    return NULL;
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, spinner, NULL));
    payload = 42;
    atomic_store_explicit(&flag, 1, memory_order_release);
    CHECK(pthread_join(t, NULL));
    return 0;
}
