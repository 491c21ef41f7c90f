/* bench_table_init — verdict: none.  The program of issue 11 (bench/run.sh, and a fixture).
 *
 * About 45 ms of single-threaded start that does real memory work: argv[1] passes
 * (default 120 here; the machine needed 400 for the same time) over a 512 KiB
 * global table, filling it byte by byte, before any thread exists; then
 * two threads each take a mutex three times to add to a counter, and main checks the sum.
 * Nothing can race before the first thread is created, so none of the start may cost
 * tracing: one whole execution should take about what a native run does, and a tree search
 * starting its executions from the fork snapshot at the first thread creation skips the
 * start altogether.  Under the old per-access breakpoints this start alone was reported as
 * a thread spinning for 10 s. */
#include <pthread.h>
#include "bench_common.h"

#define BYTES (512 * 1024)

static unsigned char table[BYTES];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long passes = bench_count(argc, argv, 120);
    bench_mark('s');
    for (long p = 0; p < passes; p++)
        for (size_t i = 0; i < BYTES; i++)
            table[i] = (unsigned char)(table[i] * 31 + p + i);
    bench_mark('e');
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (counter != 6 || table[1] == 0)
        abort();
    return 0;
}
