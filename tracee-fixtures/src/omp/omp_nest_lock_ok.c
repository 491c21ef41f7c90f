/* Race-free: a recursive update under a nestable OpenMP lock, taken again by
 * its owner (omp_set_nest_lock) and tried once more (omp_test_nest_lock
 * returns the new nesting count to its owner). */
#include <assert.h>
#include <omp.h>
#include <stdio.h>

static omp_nest_lock_t lock;
static int total;

static void add(int depth) {
    omp_set_nest_lock(&lock);
    total += 1;
    if (depth > 0)
        add(depth - 1);
    omp_unset_nest_lock(&lock);
}

int main(void) {
    omp_init_nest_lock(&lock);
#pragma omp parallel num_threads(2)
    {
        add(2);
        omp_set_nest_lock(&lock);
        int nested = omp_test_nest_lock(&lock);
        assert(nested == 2);
        total += 10;
        omp_unset_nest_lock(&lock);
        omp_unset_nest_lock(&lock);
    }
    omp_destroy_nest_lock(&lock);
    printf("%d\n", total);
    return total == 26 ? 0 : 1;
}
