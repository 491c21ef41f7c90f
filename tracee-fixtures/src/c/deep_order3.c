/* deep_order3 — verdict: assertion.
 *
 * A bug of depth 3 (PCT's measure: three ordering constraints) hidden in long
 * runs of independent steps.  A sets `a1`, works, then sets `a2` only if B
 * has seen `a1`; B checks `a1` first thing; C asserts first thing that `a2`
 * is not set.  The assertion fails only in the order
 *
 *   A1 (a1 = 1)  <  B1 (B sees a1)  <  A2 (A sees b1, sets a2)  <  C1 (C checks)
 *
 * while B and C want to run their checks at once and A has WORK independent
 * steps (atomic adds to its own counter, each a scheduling point) before A1
 * and between A1 and A2.  Uniform random choice almost never holds B back
 * for WORK steps of A; PCT needs two change points at the right places; a
 * scheduler that re-draws the priority of B's check when A1 (which it races
 * with) runs finds it quickly. */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "common.h"

#define WORK 12

static atomic_int a1, b1, a2;
/* Each thread's own counter, a cache line apart: independent steps. */
static struct {
    _Alignas(64) atomic_long n;
} work[3];

static void busy(int who)
{
    for (int i = 0; i < WORK; i++)
        atomic_fetch_add(&work[who].n, 1);
}

static void *thread_a(void *arg)
{
    (void)arg;
    busy(0);
    atomic_exchange(&a1, 1);
    busy(0);
    if (atomic_fetch_add(&b1, 0))
        atomic_exchange(&a2, 1);
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&a1, 0))
        atomic_exchange(&b1, 1);
    busy(1);
    return NULL;
}

static void *thread_c(void *arg)
{
    (void)arg;
    assert(atomic_fetch_add(&a2, 0) == 0 && "A1 < B1 < A2 < C1");
    busy(2);
    return NULL;
}

int main(void)
{
    pthread_t a, b, c;
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    CHECK(pthread_create(&c, NULL, thread_c, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    CHECK(pthread_join(c, NULL));
    puts("no bad order");
    return 0;
}
