/* Racy: a shared counter incremented without a critical section. */
#include <omp.h>
#include <stdio.h>

#define N 20
static int counter;

int main(void) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < N; i++)
        counter += 1;
    printf("%d\n", counter);
    return 0;
}
