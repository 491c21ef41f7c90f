/* Racy: omp_task_ok without `taskwait`: the creator sums a[] while tasks run
 * by the other thread may still be writing it. */
#include <omp.h>
#include <stdio.h>
static int a[4];
int main(void) {
    int sum = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        {
            for (int i = 0; i < 4; i++) {
#pragma omp task firstprivate(i)
                a[i] = i * i;
            }
            for (int i = 0; i < 4; i++)
                sum += a[i];
        }
    }
    printf("%d\n", sum);
    return 0;
}
