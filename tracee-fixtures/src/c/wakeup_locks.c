/* wakeup_locks — verdict: none.  Counting fixture for optimal partial-order reduction
 * (wakeup trees): a program on which source sets alone run one execution twice.
 *
 * Main creates three threads, then joins them. The first stores x under the mutex, the
 * second stores y under the same mutex, the third loads x (atomics, no lock). The orders
 * that matter: which critical section comes first (2), and whether the load sees the store
 * of x or not (2): 4 classes. Source-set DPOR explores 5 executions (one is sleep-set
 * blocked: every enabled thread there was explored already); following each race's whole
 * reversing sequence (wakeup trees) explores exactly 4. Counts in tests/it/strategies.rs.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
/* The stored words' type: `long` here, 4 bytes in the twin wakeup_locks_int.c. */
#ifndef WORD_T
#define WORD_T long
#endif

static WORD_T x, y;

static void *store_x(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    __atomic_store_n(&x, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *store_y(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    __atomic_store_n(&y, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *load_x(void *arg)
{
    *(long *)arg = __atomic_load_n(&x, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void)
{
    pthread_t a, b, c;
    long seen = 0;
    pthread_create(&a, NULL, store_x, NULL);
    pthread_create(&b, NULL, store_y, NULL);
    pthread_create(&c, NULL, load_x, &seen);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    if (x != 1 || y != 1 || (seen != 0 && seen != 1)) {
        fprintf(stderr, "impossible: x=%ld y=%ld seen=%ld\n", (long)x, (long)y, seen);
        return 1;
    }
    return 0;
}
