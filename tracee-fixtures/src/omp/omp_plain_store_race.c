/* Racy (DRB140's form): `master` stores `a = 0` with a plain MOV while the
 * other thread, which skips `master` and meets no barrier before the loop,
 * adds its partial sum into `a` at the end of the reduction loop (a LOCKed
 * add). The plain store is not an atomic one, whatever else touches `a`. */
#include <omp.h>
#include <stdio.h>
static int a;
int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        a = 0;
#pragma omp for reduction(+ : a)
        for (int i = 0; i < 10; i++)
            a = a + i;
#pragma omp single
        printf("%d\n", a);
    }
    return 0;
}
