/* race_tls_ok — verdict: none.
 *
 * Thread-local storage.  `tls_count` (__thread int, initialised, so its
 * initial image is copied into every new thread's TLS block) and `tls_log`
 * (_Thread_local array, zero-initialised) are written and read by every
 * thread, with sched_yield between the updates so the threads interleave.
 * Each thread only ever touches its own copy; results reach main only
 * through the joined return value (no shared memory at all).
 *
 * Two batches of two threads: the second batch is created after the first
 * is joined, so glibc reuses the first batch's stacks (and with them the
 * static TLS blocks): the same addresses are then written by new threads,
 * but join→create orders those accesses.  main also uses its own copy.
 * No data race on any schedule. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include "../c/common.h"

static __thread int tls_count = 100;
static _Thread_local int tls_log[4];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 4; i++) {
        tls_count += id;
        tls_log[i] = tls_count;
        sched_yield();
    }
    int sum = 0;
    for (int i = 0; i < 4; i++)
        sum += tls_log[i];
    return (void *)(intptr_t)(sum + tls_count);
}

static int run_batch(int base)
{
    pthread_t t[2];
    int got = 0;
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(base + i)));
    for (int i = 0; i < 2; i++) {
        void *ret;
        CHECK(pthread_join(t[i], &ret));
        int id = base + i;
        /* count goes 100+id, +2id, +3id, +4id: sum 400+10id, plus 100+4id */
        int want = 500 + 14 * id;
        if ((int)(intptr_t)ret != want) {
            fprintf(stderr, "thread %d: got %d want %d\n", id,
                    (int)(intptr_t)ret, want);
            abort();
        }
        got += (int)(intptr_t)ret;
    }
    return got;
}

int main(void)
{
    tls_count = 7;
    tls_log[0] = -1;
    int a = run_batch(1);
    int b = run_batch(3);
    if (tls_count != 7 || tls_log[0] != -1) {
        fprintf(stderr, "main's TLS copy changed\n");
        return 1;
    }
    printf("batches: %d %d\n", a, b);
    return 0;
}
