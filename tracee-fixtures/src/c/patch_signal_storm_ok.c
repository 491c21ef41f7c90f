/* patch_signal_storm_ok — verdict: none.  Signals landing anywhere in patched code.
 *
 * main creates a thread (from then on mcheck records memory accesses through code it
 * patches into the program), then runs a loop of loads and stores over two arrays while
 * an interval timer sends it SIGALRM every 50 microseconds. The handler makes memory
 * accesses of its own (patched too) and checks a value the loop keeps consistent. A
 * signal delivered while the thread is inside mcheck's generated code must be delivered
 * as if at the original instruction, with every register as the program had it: if the
 * handler ran inside generated code, its own accesses would overwrite what that code had
 * saved, and the loop's sums would come out wrong.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define N 4096

static long a[N], b[N];
static volatile long ticks;
static volatile long guard_value;

static void on_alarm(int sig)
{
    (void)sig;
    long g = guard_value;
    if (g != guard_value)
        abort();
    ticks = ticks + 1;
}

static void *idle(void *arg)
{
    return arg;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int i = 0; i < N; i++)
        a[i] = i;
    long expect = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < N; i++) {
            b[i] = a[i] * 3 + round;
            guard_value = b[i];
        }
        long sum = 0;
        for (int i = 0; i < N; i++)
            sum += b[i];
        expect = (long)N * (N - 1) / 2 * 3 + (long)round * N;
        if (sum != expect)
            return 1;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    return ticks > 0 ? 0 : 3;
}
