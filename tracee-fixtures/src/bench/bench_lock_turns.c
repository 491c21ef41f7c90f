/* bench_lock_turns — verdict: none.  Benchmark fixture (bench/bench.py, bpor section).
 *
 * Long executions for the cost of the search's bookkeeping per scheduling decision: two
 * threads each take a shared mutex N times (argv[1], default 5) to bump a counter; main
 * joins them and checks the total.  About 4 N scheduling decisions per execution, nearly
 * every one touching the mutex, so bounded partial-order reduction releases most of the
 * preemptions it holds back: what it costs shows, what it saves does not. */
#include <pthread.h>
#include "bench_common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int turns = 5;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < turns; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t a, b;
    if (argc > 1)
        turns = atoi(argv[1]);
    bench_mark('S');
    if (pthread_create(&a, NULL, worker, NULL) != 0 || pthread_create(&b, NULL, worker, NULL) != 0)
        abort();
    if (pthread_join(a, NULL) != 0 || pthread_join(b, NULL) != 0)
        abort();
    if (counter != 2L * turns) {
        fprintf(stderr, "counter %ld\n", counter);
        abort();
    }
    bench_mark('E');
    return 0;
}
