/* atomic_pair K — verdict: none.  Counting fixture for exhaustive search.
 *
 * main creates two threads; each performs K atomic increments (`lock xadd`, one scheduling
 * point each) on one shared counter; main joins both and checks the total.  Nothing else in
 * the program is a scheduling point, so `mcheck --strategy dfs` must explore exactly the
 * number of interleavings derived in tests/it/strategies.rs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The counter's type: `long` here, 4 bytes in the twin atomic_pair_int.c. */
#ifndef COUNTER_T
#define COUNTER_T long
#endif

static COUNTER_T counter;
static int k = 2;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < k; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        k = atoi(argv[1]);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 2L * k) {
        fprintf(stderr, "lost update: %ld\n", (long)counter);
        return 1;
    }
    return 0;
}
