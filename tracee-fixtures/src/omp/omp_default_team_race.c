/* Racy: a parallel region without num_threads gets libgomp's default team, one thread
 * per CPU the process may use (sched_getaffinity). Each thread adds its share to `total`
 * without synchronisation: lost updates as soon as the team has two threads. A checker
 * that shows the program a single CPU runs a team of one and sees no race at all. */
#include <omp.h>
#include <stdio.h>

static long total;

int main(void) {
    int team = 0;
#pragma omp parallel
    {
#pragma omp single nowait
        team = omp_get_num_threads();
        total += omp_get_thread_num() + 1;
    }
    printf("team of %d, total %ld\n", team, total);
    return 0;
}
