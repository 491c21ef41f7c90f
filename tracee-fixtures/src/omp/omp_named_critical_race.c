/* Racy: two DIFFERENT named critical sections around the SAME counter; they
 * exclude nothing from each other. */
#include <omp.h>
#include <stdio.h>

static int counter;

int main(void) {
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
#pragma omp critical(first)
            counter += 1;
        } else {
#pragma omp critical(second)
            counter += 2;
        }
    }
    printf("%d\n", counter);
    return 0;
}
