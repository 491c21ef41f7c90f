/* builtin_flag_ok — verdict: none.
 *
 * Message passing through a plain `int` flag with gcc's `__atomic_store_n` (release) and
 * `__atomic_load_n` (acquire), and nothing else touching the flag: no LOCKed instruction,
 * no `_Atomic` type. Both compile to plain MOVs, so only the source line says they are
 * atomics; the payload written before the release and read after the acquire is ordered
 * by them. The waiter yields while it waits, as a polite spinner does. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "common.h"

static int ready;
static int payload;

static void *publisher(void *arg)
{
    (void)arg;
    payload = 42;
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, publisher, NULL));
    while (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
        sched_yield();
    printf("payload %d\n", payload);
    CHECK(pthread_join(t, NULL));
    return payload == 42 ? 0 : 1;
}
