/* Racy: omp_lock_ok where thread 1 forgets the lock around its update. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t lock;
static int total;

int main(void) {
    omp_init_lock(&lock);
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
            omp_set_lock(&lock);
            total += 1;
            omp_unset_lock(&lock);
        } else {
            total += 2;
        }
    }
    omp_destroy_lock(&lock);
    printf("%d\n", total);
    return 0;
}
