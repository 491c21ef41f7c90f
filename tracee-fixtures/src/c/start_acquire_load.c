/* start_acquire_load — verdict: assertion.  An atomic load at a new thread's start.
 *
 * main creates a writer, whose first act is an atomic store of 1 to `flag` (a locked
 * `xchg`, a scheduling point), then a reader, whose first act is an acquire load of `flag`
 * (a plain `mov`, not an instruction mcheck stops at by itself), and which aborts if it sees
 * 1.  There is no data race.  The reader's start runs within main's creating step, before
 * the writer's store; the load must therefore become a scheduling point of its own (the
 * binary says `flag` is atomic), or the order store-then-load is never tried.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_int flag;

static void *writer(void *arg)
{
    (void)arg;
    atomic_store(&flag, 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    if (atomic_load_explicit(&flag, memory_order_acquire))
        abort();
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    if (pthread_create(&t[0], NULL, writer, NULL) != 0
        || pthread_create(&t[1], NULL, reader, NULL) != 0)
        return 2;
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    return 0;
}
