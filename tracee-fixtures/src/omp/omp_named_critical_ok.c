/* Race-free: two named critical sections, each around its own counter; each
 * thread updates both. */
#include <omp.h>
#include <stdio.h>

#define N 10
static int hits;
static int misses;

int main(void) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < N; i++) {
        if (i % 2 == 0) {
#pragma omp critical(hits_lock)
            hits += 1;
        } else {
#pragma omp critical(misses_lock)
            misses += 1;
        }
    }
    printf("%d %d\n", hits, misses);
    return hits + misses == N ? 0 : 1;
}
