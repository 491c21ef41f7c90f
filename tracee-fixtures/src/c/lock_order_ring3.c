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
 * c.  A second argument of 4 makes it a ring of four threads (a, b, c, d,
 * pairs at fifths of the run): three held at once (lock_order_ring4). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t locks[4] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                   PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int stage;     /* under m */
static long counter;  /* under work */
static long pairs[4]; /* pairs[i] under locks[i] and locks[(i + 1) % n] */
static int rounds = 1200;
static int n = 3; /* threads in the ring */

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
    int at = (me + 1) * rounds / (n + 1);
    for (int i = 0; i < rounds; i++) {
        if (i == at) {
            wait_for(me);
            pthread_mutex_lock(&locks[me]);
            set_stage(me + 1);
            pthread_mutex_lock(&locks[(me + 1) % n]);
            pairs[me]++;
            pthread_mutex_unlock(&locks[(me + 1) % n]);
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
    if (argc > 2 && atoi(argv[2]) == 4)
        n = 4;
    pthread_t t[4];
    for (long i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("counter = %ld, pairs = %ld %ld %ld %ld\n", counter, pairs[0], pairs[1], pairs[2],
           pairs[3]);
    return 0;
}
