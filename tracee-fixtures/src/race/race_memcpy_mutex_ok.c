/* race_memcpy_mutex_ok — verdict: none.
 *
 * Two threads take turns (strictly alternating, enforced with a `turn`
 * variable and a condvar) writing the shared global buffer `shared` with
 * memcpy and memset, and reading it back with the program's own loads, all
 * while holding `m`.  The lengths come from strlen() of run-time strings so
 * gcc emits real memcpy/memset calls rather than inline moves.
 *
 * Every access to `shared` (the modelled memcpy/memset ranges and the plain
 * loads) is inside a critical section of `m`, so consecutive turns are
 * ordered by unlock→lock: no data race on any schedule. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../c/common.h"

#define TURNS 3
#define CAP 64

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static char shared[CAP];
static const char *const msgs[2] = {
    "the first thread was here",
    "and the second thread wrote a longer line here",
};

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    const char *msg = msgs[id];
    size_t len = strlen(msg);
    int bad = 0;
    for (int k = 0; k < TURNS; k++) {
        CHECK(pthread_mutex_lock(&m));
        while (turn != id)
            CHECK(pthread_cond_wait(&cv, &m));
        memset(shared, 0, len + 1 + (size_t)id);
        memcpy(shared, msg, len);
        for (size_t i = 0; i < len; i++)
            bad |= shared[i] != msg[i];
        bad |= shared[len] != 0;
        turn = 1 - id;
        CHECK(pthread_cond_broadcast(&cv));
        CHECK(pthread_mutex_unlock(&m));
    }
    return (void *)(intptr_t)bad;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i));
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        void *ret;
        CHECK(pthread_join(t[i], &ret));
        bad |= (int)(intptr_t)ret;
    }
    if (bad || strcmp(shared, msgs[1]) != 0) {
        fprintf(stderr, "buffer corrupted: \"%s\"\n", shared);
        return 1;
    }
    printf("last writer: \"%s\"\n", shared);
    return 0;
}
