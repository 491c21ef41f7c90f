/* Racy: a `schedule(dynamic)` loop of two iterations, each writing the shared
 * `last`; libgomp hands each chunk to whichever thread asks first, so the race
 * shows only when the two threads each take one. */
#include <omp.h>
#include <stdio.h>
static int last;
int main(void) {
#pragma omp parallel for schedule(dynamic) num_threads(2)
    for (int i = 0; i < 2; i++)
        last = i;
    printf("%d\n", last);
    return 0;
}
