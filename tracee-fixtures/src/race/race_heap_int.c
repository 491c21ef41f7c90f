/* race_heap_int — verdict: data_race.
 *
 * Race on a heap block.  main mallocs one int, sets it to 0 and passes the
 * pointer to two threads; each thread stores its id into it and then
 * increments it, with no lock.  main joins both, prints and frees the block.
 *
 * main's initialising store is ordered before both threads by
 * pthread_create, and main's final read/free after both by pthread_join,
 * but the two threads' stores to the block are unordered with each other:
 * a write/write (and read/write) race on the malloc'd int on EVERY
 * schedule.  The report should point at the heap block allocated in main. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

struct arg {
    int *shared;
    int id;
};

static void *worker(void *p)
{
    struct arg *a = p;
    *a->shared = a->id;
    sched_yield();
    *a->shared += 1;
    return NULL;
}

int main(void)
{
    int *shared = malloc(sizeof *shared);
    if (!shared)
        abort();
    *shared = 0;
    pthread_t t[2];
    struct arg args[2];
    for (int i = 0; i < 2; i++) {
        args[i].shared = shared;
        args[i].id = 10 * (i + 1);
        CHECK(pthread_create(&t[i], NULL, worker, &args[i]));
    }
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("*shared = %d\n", *shared);
    free(shared);
    return 0;
}
