/* state_hash_heap_ok — verdict: none.  Incremental state hashing (--state-cache).
 *
 * main fills 2 MiB of heap (enough for mcheck to track writes instead of reading all memory
 * at every point), then two threads each take a mutex 30 times and, inside it, bump a
 * counter and write one byte into a page of their own: every step dirties one page of the
 * heap and leaves the others as they were.  With 120 and more decisions per execution, dfs
 * starts executions from branch snapshots, whose copies are write-tracked from their start.
 * tests/it/state_cache.rs runs it with MCHECK_VERIFY_STATE_HASH=1, which checks every
 * incremental hash against a full one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HEAP (2 << 20)
#define ROUNDS 30

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static char *block;

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m);
        counter++;
        block[(id * ROUNDS + i) * 4096] = (char)i;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    block = malloc(HEAP);
    if (!block)
        return 2;
    memset(block, 1, HEAP);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return counter == 2 * ROUNDS ? 0 : 1;
}
