/* Racy (DataRaceBench DRB183's form): one section writes the flag `s` with a plain store,
 * the other spins on it with `omp atomic read`. An atomic access races with a plain one:
 * the `#pragma omp atomic read` makes the read atomic (binary/source_atomics.rs), not the
 * variable, so the plain write stays plain and the pair is a data race. */
#include <omp.h>
#include <stdio.h>
int main(void) {
    int x = 0, s = 0;
#pragma omp parallel sections shared(x, s) num_threads(2)
    {
#pragma omp section
        {
            x = 1;
            s = 1;
        }
#pragma omp section
        {
            int done = 0;
            while (!done) {
#pragma omp atomic read seq_cst
                done = s;
            }
            x = 2;
        }
    }
    printf("%d\n", x);
    return 0;
}
