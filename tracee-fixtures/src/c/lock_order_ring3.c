/* lock_order_ring3 — verdict: deadlock.
 *
 * A lock-order cycle of three threads in the middle of long executions: every
 * thread works through ROUNDS rounds of a mutex they all share (every round a
 * scheduling point that depends on the others'), and takes a pair of locks
 * once on the way: the first a then b at round ROUNDS/4, the second b then c
 * at round ROUNDS/2, the third c then a at round 3*ROUNDS/4.  A stage counter
 * under mutex m chains the pairs: the first sets it to 1 once it holds a, the
 * second waits for 1 before it takes b and sets 2 once it holds b, the third
 * waits for 2 before it takes c.  So the second and third take their first
 * locks only after the one before took its own, and the deadlock needs the
 * first AND the second thread stopped between their two locks while the third
 * reaches its pair: holding one thread back while the others run is not
 * enough (the second goes on from setting the stage to c before the third can
 * take it); the confirmation must hold the second thread too, when it reaches
 * c. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t locks[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                   PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int stage;     /* under m */
static long counter;  /* under work */
static long pairs[3]; /* pairs[i] under locks[i] and locks[i + 1] */
static int rounds = 1200;

static void wait_for(int s)
{
    for (;;) {
        pthread_mutex_lock(&m);
        int now = stage;
        pthread_mutex_unlock(&m);
        if (now >= s)
            return;
        sched_yield();
    }
}

static void set_stage(int s)
{
    pthread_mutex_lock(&m);
    stage = s;
    pthread_mutex_unlock(&m);
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    int at = (me + 1) * rounds / 4;
    for (int i = 0; i < rounds; i++) {
        if (i == at) {
            wait_for(me);
            pthread_mutex_lock(&locks[me]);
            set_stage(me + 1);
            pthread_mutex_lock(&locks[(me + 1) % 3]);
            pairs[me]++;
            pthread_mutex_unlock(&locks[(me + 1) % 3]);
            pthread_mutex_unlock(&locks[me]);
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
