/* atomic_spinlock_ok — verdict: none.
 *
 * A hand-written spinlock built on C11 atomics, used correctly.  Two locks:
 *   - a test-and-set lock: atomic_flag_test_and_set compiles to XCHG with
 *     memory (implicitly locked);
 *   - a compare-and-swap lock: atomic_compare_exchange_weak compiles to
 *     LOCK CMPXCHG.
 * Every spin iteration executes one of these instructions, so each
 * iteration is a scheduling point for mcheck: a spinning thread keeps
 * giving the lock holder a chance to run and no execution times out.
 * (Unlocking is a plain release store — not a scheduling point, and it does
 * not need to be.)  An atomic_fetch_add counter (LOCK ADD) adds one more
 * atomic RMW.  Three threads, two critical sections each; main checks the
 * totals. */
#include <pthread.h>
#include <stdatomic.h>
#include <assert.h>
#include "common.h"

#define N 3

static atomic_flag tas_lock = ATOMIC_FLAG_INIT;
static atomic_int cas_lock;
static atomic_int xadd_counter;
static int guarded_a, guarded_b;

static void tas_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&tas_lock, memory_order_acquire))
        ;
}

static void tas_release(void)
{
    atomic_flag_clear_explicit(&tas_lock, memory_order_release);
}

static void cas_acquire(void)
{
    int expected = 0;
    while (!atomic_compare_exchange_weak_explicit(&cas_lock, &expected, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
        expected = 0;
}

static void cas_release(void)
{
    atomic_store_explicit(&cas_lock, 0, memory_order_release);
}

static void *worker(void *arg)
{
    (void)arg;
    tas_acquire();
    int v = guarded_a;
    guarded_a = v + 1;
    tas_release();

    cas_acquire();
    v = guarded_b;
    guarded_b = v + 1;
    cas_release();

    atomic_fetch_add(&xadd_counter, 1);
    return NULL;
}

int main(void)
{
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < N; i++)
        CHECK(pthread_join(t[i], NULL));
    assert(guarded_a == N);
    assert(guarded_b == N);
    assert(atomic_load(&xadd_counter) == N);
    return 0;
}
