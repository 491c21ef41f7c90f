/* race_size_peek — verdict: data_race.
 *
 * A mutex-protected growable vector of ints (`vec.data`, `vec.size`,
 * `vec.cap`; data realloc'd as it grows).  The appender pushes 6 values,
 * each push under `vec.lock`.  The peeker reads `vec.size` WITHOUT the lock
 * ("just a quick look") and, if non-zero, takes the lock to read the last
 * element; three rounds with sched_yield.
 *
 * The unlocked load of `vec.size` is not ordered with the appender's locked
 * stores to it: the peeker's very first peek is before any lock it takes,
 * and later peeks follow an unlock, which orders nothing after it.  So the
 * peek races with some push on EVERY schedule.  The locked element reads
 * are fine.  The report should name the global `vec` at the offset of its
 * `size` field (`vec+48` on x86-64 glibc, after the 40-byte mutex and the
 * data pointer). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

struct int_vec {
    pthread_mutex_t lock;
    int *data;
    size_t size;
    size_t cap;
};

static struct int_vec vec = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void push(int v)
{
    CHECK(pthread_mutex_lock(&vec.lock));
    if (vec.size == vec.cap) {
        size_t cap = vec.cap ? 2 * vec.cap : 2;
        int *d = realloc(vec.data, cap * sizeof *d);
        if (!d)
            abort();
        vec.data = d;
        vec.cap = cap;
    }
    vec.data[vec.size] = v;
    vec.size++;
    CHECK(pthread_mutex_unlock(&vec.lock));
}

static void *appender(void *arg)
{
    (void)arg;
    for (int i = 1; i <= 6; i++) {
        push(i);
        sched_yield();
    }
    return NULL;
}

static void *peeker(void *arg)
{
    (void)arg;
    long last = 0;
    for (int r = 0; r < 3; r++) {
        size_t n = vec.size; /* BUG: read without the lock */
        if (n > 0) {
            CHECK(pthread_mutex_lock(&vec.lock));
            last = vec.data[vec.size - 1];
            CHECK(pthread_mutex_unlock(&vec.lock));
        }
        sched_yield();
    }
    return (void *)last;
}

int main(void)
{
    pthread_t a, p;
    void *ret;
    CHECK(pthread_create(&p, NULL, peeker, NULL));
    CHECK(pthread_create(&a, NULL, appender, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(p, &ret));
    printf("size = %zu, peeker saw last = %ld\n", vec.size, (long)ret);
    free(vec.data);
    return 0;
}
