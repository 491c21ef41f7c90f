/* turns_last_assert — verdict: assertion.
 *
 * A long history before the failure, for going back under `mcheck replay --gdb`.
 * Two workers take 60 turns each on a mutex, recording who took each turn.
 * main then asserts that worker 1 took the last turn, which holds only when
 * worker 2 finishes first: an ordering bug that fails after about 250
 * scheduling decisions. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

#define TURNS 60

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int turns[2 * TURNS];
static int taken;

/* One turn of worker `id`: kept out of line so that gdb can break on it. */
__attribute__((noinline)) static void record(int id)
{
    turns[taken] = id;
    taken++;
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&m);
        record(id);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, worker, (void *)1L);
    pthread_create(&b, NULL, worker, (void *)2L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d turns\n", taken);
    assert(turns[taken - 1] == 1 && "worker 1 took the last turn");
    return 0;
}
