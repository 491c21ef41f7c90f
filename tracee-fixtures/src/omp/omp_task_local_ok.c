/* Race-free: a task created in `single` writes a local of main's frame
 * (shared(a)); no taskwait, but every task of a region is complete when its
 * closing barrier ends, so main's read of `a` after the region is ordered
 * after the task's write (DataRaceBench DRB175's read, without its race
 * between two tasks). main reads `a` through its own frame: traced since its
 * address is handed to the region. */
#include <omp.h>
#include <stdio.h>
int main(void) {
    int a = 0;
#pragma omp parallel num_threads(2) shared(a)
    {
#pragma omp single
        {
#pragma omp task shared(a)
            a += 1;
        }
    }
    printf("a=%d\n", a);
    return 0;
}
