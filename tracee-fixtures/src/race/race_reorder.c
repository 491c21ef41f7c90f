/* race_reorder — verdict: data_race, then the assertion it causes (reported by default).
 *
 * The `reorder` shape: one thread sets `a` then `b` without a lock; another reads `a` then
 * `b` and asserts that `b` set implies `a` set. Under sequential consistency that fails
 * only when the checker is preempted between its two reads while the setter runs both of
 * its writes: it read `a` unset and then `b` set. The accesses race, and no
 * synchronisation separates them, so a search that schedules at synchronisation only runs
 * each thread's accesses in one step and never sees the failure; it must not call the
 * space exhausted. Refinement makes the four racy sites scheduling points, and icb finds
 * the failing order with one preemption. Natively the window is a few instructions wide.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>

static volatile int a, b;

static void *set_both(void *arg)
{
    (void)arg;
    a = 1;
    b = 1;
    return NULL;
}

static void *check_order(void *arg)
{
    (void)arg;
    int seen_a = a;
    int seen_b = b;
    assert((!seen_b || seen_a) && "b was set before a");
    return NULL;
}

int main(void)
{
    pthread_t setter, checker;
    pthread_create(&checker, NULL, check_order, NULL);
    pthread_create(&setter, NULL, set_both, NULL);
    pthread_join(checker, NULL);
    pthread_join(setter, NULL);
    return 0;
}
