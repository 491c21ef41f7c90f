/* race_create_arg_ok — verdict: none.
 *
 * Data passed through pthread_create's argument and pthread_join's result.
 * main mallocs a `struct job` per thread and fills it completely BEFORE
 * pthread_create; the thread reads it, mallocs a `struct result`, fills it
 * and returns it; main reads the result only AFTER pthread_join and frees
 * both blocks.  main also rewrites each job block after the join.
 *
 * create orders main's writes before the thread's reads, and the thread's
 * exit/join orders its writes (and its reads of the job) before main's
 * accesses: no data race on any schedule. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

struct job {
    int id;
    int n;
    long values[4];
};

struct result {
    int id;
    long sum;
    long max;
};

static void *worker(void *arg)
{
    struct job *job = arg;
    struct result *r = malloc(sizeof *r);
    if (!r)
        abort();
    r->id = job->id;
    r->sum = 0;
    r->max = 0;
    for (int i = 0; i < job->n; i++) {
        r->sum += job->values[i];
        if (job->values[i] > r->max)
            r->max = job->values[i];
        sched_yield();
    }
    return r;
}

int main(void)
{
    pthread_t t[2];
    struct job *jobs[2];
    for (int k = 0; k < 2; k++) {
        jobs[k] = malloc(sizeof *jobs[k]);
        if (!jobs[k])
            abort();
        jobs[k]->id = k;
        jobs[k]->n = 4;
        for (int i = 0; i < 4; i++)
            jobs[k]->values[i] = 10 * k + i;
        CHECK(pthread_create(&t[k], NULL, worker, jobs[k]));
    }
    long total = 0;
    for (int k = 0; k < 2; k++) {
        void *ret;
        CHECK(pthread_join(t[k], &ret));
        struct result *r = ret;
        if (r->id != k || r->max != 10 * k + 3) {
            fprintf(stderr, "bad result from %d\n", k);
            return 1;
        }
        total += r->sum;
        jobs[k]->n = 0; /* after join: ordered after the thread's reads */
        free(r);
        free(jobs[k]);
    }
    if (total != 6 + 46) {
        fprintf(stderr, "total %ld\n", total);
        return 1;
    }
    printf("total = %ld\n", total);
    return 0;
}
