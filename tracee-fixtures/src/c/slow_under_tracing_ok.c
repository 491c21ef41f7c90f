/* slow_under_tracing_ok N — verdict: none.  Long work between scheduling points.
 *
 * After creating a thread (so that mcheck records memory accesses), main runs N rounds of
 * loads and stores over an array without any scheduling point: about 0.1 s natively for
 * the default N. Recording the accesses makes it slower under mcheck (much slower when
 * every access stops at a breakpoint), but the program makes progress the whole time: the
 * runaway-thread watchdog must count the program's own CPU time, not mcheck's, and
 * report nothing even with a one-second --execution-timeout.
 */
#include <pthread.h>
#include <stdlib.h>

#define SIZE 4096

static long table[SIZE];

static void *idle(void *arg)
{
    return arg;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 6000;
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    long sum = 0;
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < SIZE; i++) {
            table[i] += i;
            sum += table[i] & 1;
        }
    return sum >= 0 ? 0 : 1;
}
