/* Racy: a worker pool sized like `nproc` does it (the CPUs sched_getaffinity allows),
 * each worker adding its partial sum to a shared total without a lock. With two CPUs or
 * more the workers' `total +=` race (a lost update); shown a single CPU, the program runs
 * one worker and is correct, so a checker that pins the program to one CPU and lets it
 * see that finds nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_WORKERS 4

static long total;

static void *worker(void *arg) {
    long me = (long)arg;
    long partial = 0;
    for (long i = 0; i < 100; i++)
        partial += i * (me + 1);
    total += partial; /* the race */
    return NULL;
}

int main(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        perror("sched_getaffinity");
        return 1;
    }
    int n = CPU_COUNT(&set);
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    pthread_t t[MAX_WORKERS];
    for (long i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("%d workers, total %ld\n", n, total);
    return 0;
}
