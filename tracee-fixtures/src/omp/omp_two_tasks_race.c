/* Racy (DRB123's form): `single` creates two tasks that both increment the
 * shared `count`, with no dependence between them; the two threads may run
 * them at once. libgomp serves its task queue under its own lock, so the race
 * shows only when a task's body can be preempted by the other thread taking
 * the next task. */
#include <omp.h>
#include <stdio.h>
static int count;
int main(void) {
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        {
#pragma omp task
            count++;
#pragma omp task
            count++;
        }
    }
    printf("%d\n", count);
    return 0;
}
