/* deep_safestack — verdict: assertion.
 *
 * A lock-free Treiber stack over an index-based free list (nodes 0..2, `next`
 * links, `head` swapped by compare-and-swap): the ABA problem of SCTBench's
 * safestack, written anew.  Three threads each pop two nodes, claiming each
 * (an atomic exchange on its `owned` flag, asserting nobody owned it), then
 * release and push them back.  The stack is correct except for ABA:
 *
 *   A: pop reads head=0, next[0]=1 ... preempted before its CAS      (1)
 *   B: pops 0 and is preempted                                       (2)
 *   C: pops 1 (claims it) and is preempted                           (3)
 *   B: pops 2, pushes 2 and 0 back: head=0 but next[0]=2; B ends
 *   A: its CAS head 0->1 succeeds (head is 0 again): the stack's head is
 *      node 1, which C owns; A's second pop takes node 1 and its claim
 *      asserts.
 *
 * B popping 0 and C popping 1 need a switch B->C and back C->B while both
 * can run, besides A's preemption: at least three preemptions, at the right
 * atomics out of ~30.  The loads are plain (not scheduling points); every
 * CAS and exchange is one. */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "common.h"

#define NODES 3
#define THREADS 3

static atomic_int head;
static atomic_int next_of[NODES];
static atomic_int owned[NODES];

static int pop(void)
{
    for (;;) {
        int h = atomic_load(&head);
        if (h < 0)
            return -1;
        int n = atomic_load_explicit(&next_of[h], memory_order_relaxed);
        if (atomic_compare_exchange_strong(&head, &h, n))
            return h;
    }
}

static void push(int e)
{
    int h = atomic_load(&head);
    do {
        atomic_store_explicit(&next_of[e], h, memory_order_relaxed);
    } while (!atomic_compare_exchange_strong(&head, &h, e));
}

static void claim(int e)
{
    if (e >= 0)
        assert(atomic_exchange(&owned[e], 1) == 0 && "node popped twice (ABA)");
}

static void give_back(int e)
{
    if (e >= 0) {
        atomic_store(&owned[e], 0);
        push(e);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    int a = pop();
    claim(a);
    int b = pop();
    claim(b);
    give_back(b);
    give_back(a);
    return NULL;
}

int main(void)
{
    for (int i = 0; i < NODES; i++)
        atomic_store(&next_of[i], i + 1 < NODES ? i + 1 : -1);
    atomic_store(&head, 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    puts("stack intact");
    return 0;
}
