/* race_once_init_ok — verdict: none.
 *
 * pthread_once lazy initialisation.  Three threads each call
 * pthread_once(&once, init_table) and then read the global `table` and
 * `table_size` that init_table (run by exactly one of them, whichever comes
 * first) writes with plain stores.  main calls pthread_once too, after
 * creating the threads, and checks the init ran once.
 *
 * pthread_once orders the init routine's writes before the return of every
 * pthread_once call on the same control, so every reader is ordered after
 * the writer: no data race on any schedule. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include "../c/common.h"

#define N 3

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int table[8];
static int table_size;
static int init_calls;

static void init_table(void)
{
    init_calls++;
    for (int i = 0; i < 8; i++)
        table[i] = i * i;
    table_size = 8;
}

static void *reader(void *arg)
{
    (void)arg;
    sched_yield();
    CHECK(pthread_once(&once, init_table));
    long sum = 0;
    for (int i = 0; i < table_size; i++)
        sum += table[i];
    return (void *)(intptr_t)sum;
}

int main(void)
{
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, reader, NULL));
    CHECK(pthread_once(&once, init_table));
    int first = table[1] + table_size;
    for (int i = 0; i < N; i++) {
        void *ret;
        CHECK(pthread_join(t[i], &ret));
        if ((intptr_t)ret != 140) {
            fprintf(stderr, "reader %d saw sum %ld\n", i, (long)(intptr_t)ret);
            return 1;
        }
    }
    if (init_calls != 1 || first != 9) {
        fprintf(stderr, "init_calls %d first %d\n", init_calls, first);
        return 1;
    }
    printf("table initialised once\n");
    return 0;
}
