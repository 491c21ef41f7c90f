/* step_limit_cut — verdict: none (with the default --max-steps).
 *
 * Two threads take and release one mutex 20 times each: about 90 scheduling
 * decisions per execution.  Correct, and it ends; tests/it/step_limit.rs runs it
 * with --max-steps 10, where every execution is cut before the program ends,
 * and checks that the summary, the JSON report and the exit status say so
 * rather than "no bug found". */
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 20

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %d\n", counter);
    return counter == 2 * ROUNDS ? 0 : 1;
}
