/* Race-free (DataRaceBench DRB200-style synchronisation through a lock): thread
 * 0 takes an OpenMP lock before the team's barrier and releases it only after
 * its write; thread 1 takes and releases the same lock after the barrier, then
 * writes. Thread 1's lock waits for thread 0's unlock, whose hand-over orders
 * the two writes, and each thread then reads what the other published. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t lock;
static int x = 1;
static int first_seen;

int main(void) {
    omp_init_lock(&lock);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        if (me == 0)
            omp_set_lock(&lock);
#pragma omp barrier
        if (me == 0) {
            x = 0;
            omp_unset_lock(&lock);
        } else {
            omp_set_lock(&lock);
            omp_unset_lock(&lock);
            first_seen = x;
            x = 2;
        }
#pragma omp barrier
    }
    omp_destroy_lock(&lock);
    printf("%d %d\n", first_seen, x);
    return first_seen == 0 && x == 2 ? 0 : 1;
}
