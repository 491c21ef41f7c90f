/* Race-free: tasks created in `single` fill a[]; `taskwait` orders them
 * before the creator sums a[]. */
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
#pragma omp taskwait
            for (int i = 0; i < 4; i++)
                sum += a[i];
        }
    }
    printf("%d\n", sum);
    return 0;
}
