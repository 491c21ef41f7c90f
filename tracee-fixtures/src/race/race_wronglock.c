/* race_wronglock — verdict: data_race, then the assertion it causes (reported by default).
 *
 * The `wronglock` shape: two threads update `data`, each under a lock of its own, so the
 * locks exclude nothing. The incrementer adds one; the checker reads `data`, increments
 * it and asserts it sees exactly its own increment. That fails only when the incrementer's
 * update lands between the checker's load and its check, a switch between plain accesses
 * inside the two critical sections: the lock operations alone never separate them.
 * Refinement makes the racy accesses scheduling points and the search reaches it.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>

static volatile int data;
static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;

static void *increment(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock_a);
    data = data + 1;
    pthread_mutex_unlock(&lock_a);
    return NULL;
}

static void *check(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock_b);
    int before = data;
    data = before + 1;
    int after = data;
    assert(after == before + 1 && "another thread changed data under the wrong lock");
    pthread_mutex_unlock(&lock_b);
    return NULL;
}

int main(void)
{
    pthread_t t1, t2;
    pthread_create(&t1, NULL, check, NULL);
    pthread_create(&t2, NULL, increment, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    return 0;
}
