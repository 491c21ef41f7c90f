/* yield_spin_ok — verdict: none.
 *
 * A correct spin wait with sched_yield: the waiter polls an atomic flag and yields until
 * the setter, after some work of its own, raises it.  Every schedule ends, but without
 * fairness a systematic search does not: at every yield it may pick the waiter again, so
 * the tree of schedules is infinite.  With the fair scheduler (the default), a waiter that
 * yields again in the same state must let the setter run first, and `--strategy dfs`
 * exhausts the space (tests/it/strategies.rs).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "common.h"

static atomic_int flag;
static atomic_int work;

static void *waiter(void *arg)
{
    (void)arg;
    while (!atomic_load(&flag))
        sched_yield();
    return NULL;
}

static void *setter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&work, 1);
    atomic_fetch_add(&work, 1);
    atomic_store(&flag, 1);
    return NULL;
}

int main(void)
{
    pthread_t w, s;
    CHECK(pthread_create(&w, NULL, waiter, NULL));
    CHECK(pthread_create(&s, NULL, setter, NULL));
    CHECK(pthread_join(w, NULL));
    CHECK(pthread_join(s, NULL));
    return atomic_load(&work) == 2 ? 0 : 1;
}
