/* qadeer — verdict: none.  Counting fixture for partial-order reduction (Qadeer's example).
 *
 * Two threads, main (thread 1) and one created thread (thread 2), each make four atomic
 * increments (`lock add`, one scheduling point each): thread 1 runs x++ g++ x++ g++, thread 2
 * y++ g++ y++ g++, where x and y are private to their thread and g is shared.  Nothing else
 * in the threads is a scheduling point.  Executions that differ only in the order of
 * independent increments are equivalent: there are C(4,2) = 6 classes (the orders of the
 * four g++), while plain dfs explores every interleaving (derivation in tests/it/strategies.rs).
 */
#include <pthread.h>
#include <stdio.h>

/* The counters' type: `long` here, 4 bytes in the twin qadeer_int.c (byte-exact dependency:
 * three 4-byte counters side by side share 8-byte words, and must count the same). */
#ifndef COUNTER_T
#define COUNTER_T long
#endif

static COUNTER_T x, y, g;

static void *second(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&y, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&y, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, second, NULL);
    __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
    if (x != 2 || y != 2 || g != 4) {
        fprintf(stderr, "lost update: x=%ld y=%ld g=%ld\n", (long)x, (long)y, (long)g);
        return 1;
    }
    return 0;
}
