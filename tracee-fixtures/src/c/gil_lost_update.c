/* gil_lost_update — verdict: assertion.
 *
 * A global interpreter lock built as CPython 3's (Python/ceval_gil.h): a
 * thread that wants the lock waits on a condition variable 5 ms at a time;
 * when a wait times out and the lock has not changed hands meanwhile, it asks
 * the holder to let go (two relaxed atomic stores), and the holder polls that
 * request between the steps of its work, as CPython's eval loop does between
 * bytecodes.  The holder reaches the request through a pointer, as CPython's
 * interpreter state.
 *
 * Each worker adds one to a shared box ROUNDS times, holding the lock, but not
 * atomically under it: it reads the box, polls, then writes the box back plus
 * one (Python's `v = box.value; box.value = f(v)`).  A timeout that fires
 * while the holder is between its read and its write makes it drop the lock
 * there; another thread then updates the box, and the holder's write loses
 * those updates.  Natively the holder must run for 5 ms for that to happen,
 * which ROUNDS small never does; nothing in the program orders it otherwise. */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

#define THREADS 3
#define ROUNDS 40
#define INTERVAL_MS 5
#ifndef POLL_BETWEEN_READ_AND_WRITE
#define POLL_BETWEEN_READ_AND_WRITE 1
#endif

struct gil {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    pthread_mutex_t switch_mutex;
    pthread_cond_t switch_cond;
    atomic_int locked;
    atomic_long last_holder;
    unsigned long switch_number;
};

struct ceval {
    atomic_int eval_breaker;
    atomic_int drop_request;
};

static struct gil gil = {
    .mutex = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .switch_mutex = PTHREAD_MUTEX_INITIALIZER,
    .switch_cond = PTHREAD_COND_INITIALIZER,
};
static struct ceval ceval;
static struct ceval *volatile ceval_state = &ceval;
static long box;

static void set_drop_request(int on)
{
    struct ceval *c = ceval_state;
    atomic_store_explicit(&c->drop_request, on, memory_order_relaxed);
    atomic_store_explicit(&c->eval_breaker, on, memory_order_relaxed);
}

static void take_gil(long self)
{
    CHECK(pthread_mutex_lock(&gil.mutex));
    while (atomic_load_explicit(&gil.locked, memory_order_relaxed)) {
        unsigned long saved = gil.switch_number;
        struct timespec deadline = deadline_in_ms(INTERVAL_MS);
        int rc = pthread_cond_timedwait(&gil.cond, &gil.mutex, &deadline);
        if (rc == ETIMEDOUT &&
            atomic_load_explicit(&gil.locked, memory_order_relaxed) &&
            gil.switch_number == saved)
            set_drop_request(1);
        else if (rc != ETIMEDOUT)
            CHECK(rc);
    }
    atomic_store_explicit(&gil.locked, 1, memory_order_release);
    if (atomic_load_explicit(&gil.last_holder, memory_order_relaxed) != self) {
        atomic_store_explicit(&gil.last_holder, self, memory_order_relaxed);
        gil.switch_number++;
    }
    CHECK(pthread_mutex_lock(&gil.switch_mutex));
    CHECK(pthread_cond_signal(&gil.switch_cond));
    CHECK(pthread_mutex_unlock(&gil.switch_mutex));
    if (atomic_load_explicit(&ceval_state->drop_request, memory_order_relaxed))
        set_drop_request(0);
    CHECK(pthread_mutex_unlock(&gil.mutex));
}

static void drop_gil(long self)
{
    CHECK(pthread_mutex_lock(&gil.mutex));
    atomic_store_explicit(&gil.locked, 0, memory_order_relaxed);
    CHECK(pthread_cond_signal(&gil.cond));
    CHECK(pthread_mutex_unlock(&gil.mutex));
    if (atomic_load_explicit(&ceval_state->drop_request, memory_order_relaxed)) {
        /* Wait until another thread took the lock (CPython's FORCE_SWITCHING). */
        CHECK(pthread_mutex_lock(&gil.switch_mutex));
        if (atomic_load_explicit(&gil.last_holder, memory_order_relaxed) == self) {
            set_drop_request(0);
            CHECK(pthread_cond_wait(&gil.switch_cond, &gil.switch_mutex));
        }
        CHECK(pthread_mutex_unlock(&gil.switch_mutex));
    }
}

/* The eval loop's check between two steps. */
static void poll_eval_breaker(long self)
{
    struct ceval *c = ceval_state;
    if (atomic_load_explicit(&c->eval_breaker, memory_order_relaxed) &&
        atomic_load_explicit(&c->drop_request, memory_order_relaxed)) {
        drop_gil(self);
        take_gil(self);
    }
}

static void *worker(void *arg)
{
    long self = (long)arg;
    take_gil(self);
    for (int i = 0; i < ROUNDS; i++) {
        poll_eval_breaker(self);
        long v = box;
        if (POLL_BETWEEN_READ_AND_WRITE)
            poll_eval_breaker(self);
        box = v + 1;
    }
    drop_gil(self);
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1)));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("box = %ld\n", box);
    assert(box == THREADS * ROUNDS);
    return 0;
}
