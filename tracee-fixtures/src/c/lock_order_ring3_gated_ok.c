/* lock_order_ring3_gated_ok — verdict: none.
 *
 * lock_order_ring3 with a gate: every thread takes the common mutex gate
 * before its pair (a then b, b then c, c then a) and releases it after, so no
 * two threads are ever inside their first locks at once: the three orders form
 * a cycle that cannot deadlock (TSan and helgrind report a lock-order
 * inversion here).  mcheck drops the cycle (every edge is taken under gate)
 * and reports nothing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t locks[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                   PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;
static long counter; /* under work */
static long pairs[3]; /* pairs[i] under locks[i] and locks[i + 1] */
static int rounds = 20;

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    int at = (me + 1) * rounds / 4;
    for (int i = 0; i < rounds; i++) {
        if (i == at) {
            pthread_mutex_lock(&gate);
            pthread_mutex_lock(&locks[me]);
            pthread_mutex_lock(&locks[(me + 1) % 3]);
            pairs[me]++;
            pthread_mutex_unlock(&locks[(me + 1) % 3]);
            pthread_mutex_unlock(&locks[me]);
            pthread_mutex_unlock(&gate);
        }
        pthread_mutex_lock(&work);
        counter++;
        pthread_mutex_unlock(&work);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]);
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("counter = %ld, pairs = %ld %ld %ld\n", counter, pairs[0], pairs[1], pairs[2]);
    return 0;
}
