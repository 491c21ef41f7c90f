/* pause_spin_ok — verdict: none.
 *
 * A correct spin wait with the x86 PAUSE hint (`__builtin_ia32_pause`, what `_mm_pause` and
 * Rust's `std::hint::spin_loop` compile to) on an atomic flag, and no system call at all in
 * the loop.  mcheck makes every PAUSE of the program's own code a yield point, so the loop
 * is visible to the scheduler (without it the spinner would run until --execution-timeout)
 * and, with the fair scheduler, `--strategy dfs` exhausts the space (tests/it/strategies.rs).
 */
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

static atomic_int flag;
static atomic_int work;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&flag, memory_order_acquire))
        __builtin_ia32_pause();
    return NULL;
}

static void *setter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&work, 1);
    atomic_fetch_add(&work, 1);
    atomic_store_explicit(&flag, 1, memory_order_release);
    return NULL;
}

int main(void)
{
    pthread_t w, s;
    CHECK(pthread_create(&w, NULL, spinner, NULL));
    CHECK(pthread_create(&s, NULL, setter, NULL));
    CHECK(pthread_join(w, NULL));
    CHECK(pthread_join(s, NULL));
    return atomic_load(&work) == 2 ? 0 : 1;
}
