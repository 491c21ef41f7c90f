/* Racy: like omp_barrier_ok without the barrier: a thread reads the other's
 * slot while the other may still be writing it. */
#include <omp.h>
#include <stdio.h>

static int slot[2];
static int seen[2];

int main(void) {
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        int other = 1 - me;
        slot[me] = me + 10;
        seen[me] = slot[other];
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
