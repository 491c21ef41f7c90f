/* Race-free: a shared total updated under an OpenMP lock (omp_set_lock /
 * omp_unset_lock) by every iteration of a parallel loop. */
#include <omp.h>
#include <stdio.h>

#define N 10
static omp_lock_t lock;
static int total;

int main(void) {
    omp_init_lock(&lock);
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < N; i++) {
        omp_set_lock(&lock);
        total += i;
        omp_unset_lock(&lock);
    }
    omp_destroy_lock(&lock);
    printf("%d\n", total);
    return total == N * (N - 1) / 2 ? 0 : 1;
}
