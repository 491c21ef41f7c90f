/* Race-free: each thread creates a task that writes its own b[i] (run by
 * either thread), then waits for it (`taskwait`) and reads it; then both
 * threads create tasks in a `taskgroup` and read what they wrote after its
 * end. The task's completion is ordered before the creator's wait returns. */
#include <omp.h>
#include <stdio.h>
static int b[2], c[2];
int main(void) {
    int sum = 0;
#pragma omp parallel num_threads(2) reduction(+ : sum)
    {
        int i = omp_get_thread_num();
#pragma omp task firstprivate(i)
        b[i] = i + 1;
#pragma omp taskwait
        sum += b[i];
#pragma omp taskgroup
        {
#pragma omp task firstprivate(i)
            c[i] = i + 2;
        }
        sum += c[i];
    }
    printf("%d\n", sum);
    return 0;
}
