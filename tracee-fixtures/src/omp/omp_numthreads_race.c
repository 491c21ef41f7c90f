/* Racy (DataRaceBench's getthreadnum-orig-yes): the master stores numThreads,
 * a local of main shared with the team, as the last thing before the region's
 * end, while the other thread reads it. At -O0 the outlined function is the
 * last of the text and the store sits within 16 bytes of the end of the
 * code segment: the site was dropped (an instruction's bytes were read as a
 * fixed 16). */
#include <omp.h>
#include <stdio.h>

int main(void) {
    int numThreads = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
            numThreads = omp_get_num_threads();
        } else {
            printf("numThreads=%d\n", numThreads);
        }
    }
    return 0;
}
