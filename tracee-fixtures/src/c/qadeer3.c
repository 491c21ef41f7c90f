/* qadeer3 — verdict: none.  Counting fixture for partial-order reduction: Qadeer's example
 * with three threads.
 *
 * Main creates two threads, then joins both. The first runs x++ g++ x++ g++, the second
 * y++ g++ y++ g++, every increment an atomic `lock add` (one scheduling point each); x and y
 * are private to their thread and g is shared. Main itself touches none of them. Executions
 * that differ only in the order of independent steps are equivalent: there are C(4,2) = 6
 * classes (the orders of the four g++). Derivation and counts in tests/it/strategies.rs.
 */
#include <pthread.h>
#include <stdio.h>

/* The counters' type: `long` here, 4 bytes in the twin qadeer3_int.c. */
#ifndef COUNTER_T
#define COUNTER_T long
#endif

static COUNTER_T x, y, g;

static void *first(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&g, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

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
    pthread_t a, b;
    pthread_create(&a, NULL, first, NULL);
    pthread_create(&b, NULL, second, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (x != 2 || y != 2 || g != 4) {
        fprintf(stderr, "lost update: x=%ld y=%ld g=%ld\n", (long)x, (long)y, (long)g);
        return 1;
    }
    return 0;
}
