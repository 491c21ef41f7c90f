/* Race-free (DataRaceBench DRB143's form): thread 0 writes `x` in a critical section,
 * then publishes with `omp atomic write`; thread 1 spins on `omp atomic read acquire`
 * until it sees the flag, then reads `x` in a critical section. gcc compiles both atomics
 * on the plain int `y` to plain MOVs: only the source's `#pragma omp atomic` says they are
 * atomic, so they are no data race (and the flag orders `x`). */
#include <omp.h>
#include <stdio.h>
int main(void) {
    int x = 0, y = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
#pragma omp critical
            { x = 10; }
#pragma omp flush(x)
#pragma omp atomic write
            y = 1;
        } else {
            int tmp = 0;
            while (tmp == 0) {
#pragma omp atomic read acquire
                tmp = y;
            }
#pragma omp critical
            {
                if (x != 10)
                    printf("x = %d\n", x);
            }
        }
    }
    printf("done\n");
    return 0;
}
