/* output_lost_update done right: each worker adds its share in one critical section, so
 * every schedule prints "total 30"; the workers also print nothing themselves. The output
 * oracle compares every execution's output with the first one's: it must find nothing.
 * Verdict: none. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int total;

static void *add(void *arg) {
    int share = *(int *)arg;
    pthread_mutex_lock(&lock);
    total += share;
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
