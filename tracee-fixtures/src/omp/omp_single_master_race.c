/* Racy: omp_single_master_ok without the barrier before `master`: the master
 * updates shared_v while the other thread may still be reading it. */
#include <omp.h>
#include <stdio.h>
static int shared_v;
static int seen[2];
int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        shared_v = 42;
        seen[omp_get_thread_num()] = shared_v;
#pragma omp master
        shared_v++;
#pragma omp barrier
        seen[omp_get_thread_num()] += shared_v;
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
