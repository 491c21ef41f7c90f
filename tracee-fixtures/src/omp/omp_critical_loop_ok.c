/* Race-free: each thread runs a long loop whose every iteration enters an
 * uncontended `omp critical` (issue 29: reported as a `timeout` while
 * libgomp's critical section was only library code to mcheck). The number of
 * iterations per thread is argv[1], 1000 by default. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static long counter;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
#pragma omp parallel num_threads(2)
    {
        for (long i = 0; i < n; i++) {
#pragma omp critical
            counter += 1;
        }
    }
    printf("%ld\n", counter);
    return counter == 2 * n ? 0 : 1;
}
