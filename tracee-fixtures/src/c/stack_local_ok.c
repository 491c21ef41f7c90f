/* stack_local_ok — verdict: none.
 *
 * stack_local_race without the race: main passes the address of its local
 * `local` to a thread and touches the local through its frame only after
 * joining the thread (the join orders the thread's write before main's read
 * and write).  The local's address escaped, so mcheck traces main's frame
 * accesses; the join must keep them from being called a race. */
#include <pthread.h>
#include <stdio.h>
#include "common.h"

static void *worker(void *arg)
{
    int *shared = arg;
    *shared += 2;
    return NULL;
}

int main(void)
{
    int local = 40;
    int before[4] = {1, 2, 3, 4};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, &local));
    before[1] += before[2]; /* a frame access of another object: never shared */
    CHECK(pthread_join(t, NULL));
    local += before[0] - 1; /* after the join: ordered */
    printf("local = %d, before[1] = %d\n", local, before[1]);
    return 0;
}
