/* bench_atomic N — verdict: none.  Benchmark fixture (bench/run.sh).
 *
 * One thread does N __atomic_fetch_add on a global (default 100): each is a
 * single LOCK-prefixed instruction in the program's own code, i.e. one
 * breakpoint-type scheduling point that mcheck steps over.  Atomic
 * read-modify-writes on a global with external linkage are never merged or
 * folded by GCC, so the loop body keeps its `lock add` (bench/run.sh checks
 * the disassembly). */
#include "bench_common.h"

long bench_counter;

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv, 100);
    bench_mark('S');
    for (long i = 0; i < n; i++)
        __atomic_fetch_add(&bench_counter, 1, __ATOMIC_SEQ_CST);
    bench_mark('E');
    return __atomic_load_n(&bench_counter, __ATOMIC_SEQ_CST) == n ? 0 : 1;
}
