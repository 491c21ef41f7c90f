/* Race-free: `single` (its implicit barrier publishes shared_v), a barrier,
 * then `master` updates it and a last barrier orders the update before the
 * second reads. */
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
#pragma omp barrier
#pragma omp master
        shared_v++;
#pragma omp barrier
        seen[omp_get_thread_num()] += shared_v;
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
