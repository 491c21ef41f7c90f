/* lock_order_chain3_ok — verdict: none.
 *
 * Three threads take a then b, b then c and c then a, one after the other:
 * each of the last two polls a flag under mutex m (yielding between polls)
 * that the one before sets, under m, once it released its pair.  The flags
 * hand the three orders over: no schedule deadlocks.  A mutex hand-over is no
 * order of the lock-order graph (lock edges would hide every real inversion),
 * so each execution shows an a/b/c cycle that looks concurrent: mcheck tries
 * to confirm it by holding its threads just before their second locks, finds
 * no deadlock, and reports nothing (TSan and helgrind report a lock-order
 * inversion here). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static pthread_mutex_t locks[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                   PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int done;     /* under m: how many threads took their pair */
static long pairs[3]; /* pairs[i] under locks[i] and locks[i + 1] */

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (;;) {
        pthread_mutex_lock(&m);
        int d = done;
        pthread_mutex_unlock(&m);
        if (d == me)
            break;
        sched_yield();
    }
    pthread_mutex_lock(&locks[me]);
    pthread_mutex_lock(&locks[(me + 1) % 3]);
    pairs[me]++;
    pthread_mutex_unlock(&locks[(me + 1) % 3]);
    pthread_mutex_unlock(&locks[me]);
    pthread_mutex_lock(&m);
    done = me + 1;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("pairs = %ld %ld %ld\n", pairs[0], pairs[1], pairs[2]);
    return 0;
}
