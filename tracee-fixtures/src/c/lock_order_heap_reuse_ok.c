/* lock_order_heap_reuse_ok — verdict: none.
 *
 * Lock identity is a lifetime, not an address.  Thread "owner" takes a then
 * its heap mutex m; then it destroys and frees m, allocates a new mutex (which
 * malloc places at the same address) and publishes it under a registry mutex.
 * Thread "user" polls the registry and, once the new mutex is there, takes it
 * then a.  The old m and the new mutex are different locks: a→m and m'→a form
 * no cycle, and no schedule deadlocks.  Only the registry mutex orders the two
 * threads, and lock hand-overs are not orders of the lock-order graph, so an
 * address-only lock identity would report a false inversion. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *published;
static int same_address;
static int shared;

static void *owner(void *arg)
{
    (void)arg;
    pthread_mutex_t *m = malloc(sizeof *m);
    pthread_mutex_init(m, NULL);
    pthread_mutex_lock(&a);
    pthread_mutex_lock(m);
    shared++;
    pthread_mutex_unlock(m);
    pthread_mutex_unlock(&a);
    pthread_mutex_destroy(m);
    free(m);
    pthread_mutex_t *fresh = malloc(sizeof *fresh);
    pthread_mutex_init(fresh, NULL);
    pthread_mutex_lock(&registry);
    same_address = fresh == m;
    published = fresh;
    pthread_mutex_unlock(&registry);
    return NULL;
}

static void *user(void *arg)
{
    (void)arg;
    pthread_mutex_t *m = NULL;
    while (m == NULL) {
        pthread_mutex_lock(&registry);
        m = published;
        pthread_mutex_unlock(&registry);
        if (m == NULL)
            sched_yield();
    }
    pthread_mutex_lock(m);
    pthread_mutex_lock(&a);
    shared++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(m);
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, owner, NULL);
    pthread_create(&y, NULL, user, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    pthread_mutex_destroy(published);
    free(published);
    printf("same address: %s, shared = %d\n", same_address ? "yes" : "no", shared);
    return 0;
}
