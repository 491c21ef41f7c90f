/* Race-free: a one-shot barrier built from an omp lock: each thread writes
 * its slot, counts itself in under the lock, and waits (re-taking the lock
 * to read the count) until both have arrived; then it reads the other's slot. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t lock;
static int arrived;
static int slot[2];
static int seen[2];

int main(void) {
    omp_init_lock(&lock);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        slot[me] = me + 10;
        omp_set_lock(&lock);
        arrived++;
        omp_unset_lock(&lock);
        for (;;) {
            omp_set_lock(&lock);
            int all = arrived == 2;
            omp_unset_lock(&lock);
            if (all)
                break;
        }
        seen[me] = slot[1 - me];
    }
    omp_destroy_lock(&lock);
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
