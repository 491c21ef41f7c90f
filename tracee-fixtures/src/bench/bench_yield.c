/* bench_yield N — verdict: none.  Benchmark fixture (bench/run.sh).
 *
 * One thread calls sched_yield() N times (default 100): under mcheck each
 * call is one syscall-type scheduling point (a seccomp stop, emulated by the
 * tracer).  Running it for N = 0 and a large N gives the cost per point by
 * difference.  sched_yield is a real libc call, so the compiler cannot drop
 * or merge the calls. */
#include <sched.h>
#include "bench_common.h"

int main(int argc, char **argv)
{
    long n = bench_count(argc, argv, 100);
    bench_mark('S');
    for (long i = 0; i < n; i++)
        sched_yield();
    bench_mark('E');
    return 0;
}
