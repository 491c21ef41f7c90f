/* A bug visible only in the program's output: two workers add their share to a total
 * in two critical sections (read, then write back), so an update can be lost. No access
 * is unprotected (no data race), nothing is asserted, the program always exits 0: only
 * the printed total ("total 30" in most schedules, "total 10" or "total 20" when one
 * worker's update is overwritten) shows the bug. Verdict: nondeterminism. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int total;

static void *add(void *arg) {
    int share = *(int *)arg;
    pthread_mutex_lock(&lock);
    int seen = total;
    pthread_mutex_unlock(&lock);
    /* The update is computed outside the lock from a value that may be stale. */
    int updated = seen + share;
    pthread_mutex_lock(&lock);
    total = updated;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void) {
    int shares[2] = {10, 20};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, add, &shares[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("workers done\n");
    printf("total %d\n", total);
    return 0;
}
