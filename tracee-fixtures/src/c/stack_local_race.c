/* stack_local_race — verdict: data_race.
 *
 * main passes the address of its own local `local` to a thread, then writes
 * the local through its frame (an RBP- or RSP-relative store) while the
 * thread writes it through the pointer it was given.  Nothing orders the two
 * writes: a data race on stack memory, on every schedule (TSan and helgrind
 * report it).  The parent's store is an access to its own stack slot, which
 * mcheck once left out as "private to its frame": the address escaped. */
#include <pthread.h>
#include <stdio.h>
#include "common.h"

static void *worker(void *arg)
{
    int *shared = arg;
    *shared = 2; /* the thread's write, through the pointer */
    return NULL;
}

int main(void)
{
    int local = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, &local));
    local = 1; /* the parent's write, through its frame */
    CHECK(pthread_join(t, NULL));
    printf("done\n");
    return 0;
}
