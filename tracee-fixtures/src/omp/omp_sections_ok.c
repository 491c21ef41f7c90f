/* Race-free: two `section`s write different variables; the implicit barrier at
 * the end of `sections` orders them before main reads both. */
#include <omp.h>
#include <stdio.h>
static int x, y;
int main(void) {
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        x = 1;
#pragma omp section
        y = 2;
    }
    printf("%d\n", x + y);
    return 0;
}
