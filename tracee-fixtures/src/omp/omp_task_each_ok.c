/* Race-free: each of the two threads creates a task (outside `single`) that
 * writes its own a[i]; a task may be run by the other thread. The region's
 * closing barrier completes every task of the region, so main's reads of a[]
 * after the region are ordered after both writes (DRB175's first pair). */
#include <omp.h>
#include <stdio.h>
static int a[2];
int main(void) {
#pragma omp parallel num_threads(2)
    {
        int i = omp_get_thread_num();
#pragma omp task firstprivate(i)
        a[i] = i + 1;
    }
    printf("%d\n", a[0] + a[1]);
    return 0;
}
