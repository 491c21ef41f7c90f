/* Race-free: each of 2 OpenMP threads writes its own slot, an explicit
 * `omp barrier` orders the writes before the reads of the other's slot. */
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
#pragma omp barrier
        seen[me] = slot[other];
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
