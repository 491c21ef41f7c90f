/* Race-free: a `taskloop` inside `single` (its implicit taskgroup waits for
 * the tasks, the single's barrier publishes them), then `master` sums. */
#include <omp.h>
#include <stdio.h>
#define N 8
static int a[N];
static int total;
int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        {
#pragma omp taskloop
            for (int i = 0; i < N; i++)
                a[i] = i;
        }
#pragma omp master
        for (int i = 0; i < N; i++)
            total += a[i];
    }
    printf("%d\n", total);
    return 0;
}
