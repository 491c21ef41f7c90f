/* Racy: two `section`s write one shared variable without synchronisation.
 * libgomp hands each section to whichever thread asks first, so the race
 * shows only when the two threads each take one (DRB023's form). */
#include <omp.h>
#include <stdio.h>
static int x;
int main(void) {
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        x = 1;
#pragma omp section
        x = 2;
    }
    printf("%d\n", x);
    return 0;
}
