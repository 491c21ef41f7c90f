/* race_c11_atomics_ok — verdict: none.
 *
 * C11 <stdatomic.h> on GLOBAL atomic objects only.  Two workers each do
 * three relaxed atomic_fetch_add on `hits` (atomic_int) and three seq_cst
 * atomic_fetch_add on `total` (_Atomic long); the first worker then does a
 * relaxed atomic_store and a seq_cst atomic_store (XCHG) of `stage`.  A
 * third thread polls `stage` with relaxed, then seq_cst atomic_loads
 * (sched_yield in between, at most 8 polls so that no schedule spins for
 * long) and, if it saw 2, checks `total` with an atomic_load.  main joins
 * everyone and reads the counters atomically.
 *
 * Every cross-thread access is to an atomic object: the fetch_adds are LOCK
 * XADD, the seq_cst store is XCHG, the relaxed store and all loads are plain
 * MOVs to addresses that are both _Atomic-typed in DWARF and touched by
 * LOCK/XCHG elsewhere.  No plain data is published through a relaxed
 * operation, so nothing here is a data race under any ordering model. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

static atomic_int hits;
static _Atomic long total;
static atomic_int stage;

static void *adder(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 3; i++) {
        atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
        atomic_fetch_add(&total, id);
        sched_yield();
    }
    if (id == 1) {
        atomic_store_explicit(&stage, 1, memory_order_relaxed);
        sched_yield();
        atomic_store(&stage, 2);
    }
    return NULL;
}

static void *watcher(void *arg)
{
    (void)arg;
    int seen = 0, polls = 0;
    while (atomic_load_explicit(&stage, memory_order_relaxed) < 1 && polls++ < 4)
        sched_yield();
    while ((seen = atomic_load(&stage)) < 2 && polls++ < 8)
        sched_yield();
    if (seen < 2)
        return NULL; /* gave up: nothing to check */
    long t = atomic_load(&total);
    if (t < 3) { /* adder 1 finished its three adds before stage = 2 */
        fprintf(stderr, "watcher: total %ld < 3 after stage %d\n", t, seen);
        abort();
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b, w;
    CHECK(pthread_create(&w, NULL, watcher, NULL));
    CHECK(pthread_create(&a, NULL, adder, (void *)1L));
    CHECK(pthread_create(&b, NULL, adder, (void *)10L));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    CHECK(pthread_join(w, NULL));
    int h = atomic_load_explicit(&hits, memory_order_relaxed);
    long t = atomic_load(&total);
    if (h != 6 || t != 33) {
        fprintf(stderr, "lost update: hits %d total %ld\n", h, t);
        return 1;
    }
    printf("hits = %d, total = %ld\n", h, t);
    return 0;
}
