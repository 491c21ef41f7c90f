/* Racy (DataRaceBench's getthreadnum-orig-yes): the non-master thread stores
 * numThreads as the last thing before the region's end while the master
 * reads it. */
#include <omp.h>
#include <stdio.h>

static int numThreads;

int main(void) {
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() != 0)
            numThreads = omp_get_num_threads();
        else
            printf("numThreads=%d\n", numThreads);
    }
    return 0;
}
