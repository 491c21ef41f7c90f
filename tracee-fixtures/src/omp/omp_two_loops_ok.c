/* Race-free: two worksharing loops in one parallel region (the implicit
 * barrier at the end of the first `omp for` orders its writes before the
 * second loop's reads of elements the other thread wrote), then a second parallel
 * region reading what the first wrote (ordered by the region's end and the
 * next one's start, which libgomp does with its team barriers). */
#include <omp.h>
#include <stdio.h>

#define N 8
static int a[N + 1];
static int b[N];
static int c[N];

int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(static)
        for (int i = 0; i <= N; i++)
            a[i] = i;
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++)
            b[i] = a[N - i];
    }
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < N; i++)
        c[i] = b[N - 1 - i];
    printf("%d %d\n", c[0], c[N - 1]);
    return 0;
}
