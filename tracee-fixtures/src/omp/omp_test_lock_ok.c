/* Race-free: each thread spins on omp_test_lock (nonzero once it holds the
 * lock) before its update, then releases the lock. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t lock;
static int total;

int main(void) {
    omp_init_lock(&lock);
#pragma omp parallel num_threads(2)
    {
        for (int i = 0; i < 3; i++) {
            while (!omp_test_lock(&lock)) {
            }
            total += 1;
            omp_unset_lock(&lock);
        }
    }
    omp_destroy_lock(&lock);
    printf("%d\n", total);
    return total == 6 ? 0 : 1;
}
