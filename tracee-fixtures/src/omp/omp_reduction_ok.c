/* Race-free: a `reduction(+:sum)` loop (each thread adds its partial sum to
 * the shared one with an atomic) and main reads the sum after the region. */
#include <omp.h>
#include <stdio.h>
#define N 16
int main(void) {
    int sum = 0;
#pragma omp parallel for num_threads(2) reduction(+:sum)
    for (int i = 0; i < N; i++)
        sum += i;
    printf("%d\n", sum);
    return sum == 120 ? 0 : 1;
}
