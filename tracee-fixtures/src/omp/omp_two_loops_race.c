/* Racy: omp_two_loops_ok with `nowait` on the first loop: without its
 * implicit barrier the second loop reads a[N - i], which the other thread
 * may still be writing. */
#include <omp.h>
#include <stdio.h>

#define N 8
static int a[N + 1];
static int b[N];

int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(static) nowait
        for (int i = 0; i <= N; i++)
            a[i] = i;
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++)
            b[i] = a[N - i];
    }
    printf("%d %d\n", b[0], b[N - 1]);
    return 0;
}
