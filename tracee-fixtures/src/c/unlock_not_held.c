/* unlock_not_held — verdict: api_misuse.
 *
 * Unlock of a mutex the caller does not hold, on a cleanup path.  The worker
 * tries to take `m` with pthread_mutex_trylock; when main holds `m` at that
 * moment the trylock fails with EBUSY and the worker jumps to its cleanup
 * label, which unconditionally unlocks `m` — a mutex owned by main.  This
 * happens when the worker's trylock runs inside main's critical section
 * (e.g. main is switched out at the entry of its pthread_mutex_unlock);
 * otherwise the trylock succeeds and the unlock is legitimate. */
#include <pthread.h>
#include <errno.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int stats;

static void *worker(void *arg)
{
    (void)arg;
    if (pthread_mutex_trylock(&m) == EBUSY)
        goto out; /* busy: skip the update */
    stats++;
out:
    pthread_mutex_unlock(&m); /* BUG: also reached when trylock failed */
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&m);
        stats += 10;
        pthread_mutex_unlock(&m);
    }
    pthread_join(t, NULL);
    printf("stats = %d\n", stats);
    return 0;
}
