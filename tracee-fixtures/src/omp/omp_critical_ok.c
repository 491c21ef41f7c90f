/* Race-free: a loop whose every iteration updates a shared counter inside an
 * `omp critical` section (often uncontended: each thread may run its whole
 * chunk while the other sleeps). */
#include <omp.h>
#include <stdio.h>

#define N 20
static int counter;

int main(void) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < N; i++) {
#pragma omp critical
        counter += 1;
    }
    printf("%d\n", counter);
    return counter == N ? 0 : 1;
}
