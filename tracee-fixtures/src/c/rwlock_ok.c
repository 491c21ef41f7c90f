/* rwlock_ok — verdict: none.
 *
 * Correct use of a pthread rwlock with rdlock, wrlock, tryrdlock, trywrlock,
 * timedrdlock, timedwrlock and unlock.  Two writers each increment a shared
 * value twice (once via wrlock, once via trywrlock/timedwrlock); two readers
 * read it three times, checking it only ever grows and stays within bounds.
 * Try/timed variants that fail (EBUSY / ETIMEDOUT) fall back or retry, so
 * every access is protected and main sees exactly 4. */
#include <pthread.h>
#include <assert.h>
#include "common.h"

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int value;

static void *writer(void *arg)
{
    (void)arg;
    CHECK(pthread_rwlock_wrlock(&rw));
    value++;
    CHECK(pthread_rwlock_unlock(&rw));

    int rc = pthread_rwlock_trywrlock(&rw);
    if (rc == EBUSY) {
        for (;;) {
            struct timespec dl = deadline_in_ms(500);
            rc = pthread_rwlock_timedwrlock(&rw, &dl);
            if (rc == 0)
                break;
            if (rc != ETIMEDOUT)
                CHECK(rc);
        }
    } else {
        CHECK(rc);
    }
    value++;
    CHECK(pthread_rwlock_unlock(&rw));
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    int last = 0;

    CHECK(pthread_rwlock_rdlock(&rw));
    assert(value >= last && value <= 4);
    last = value;
    CHECK(pthread_rwlock_unlock(&rw));

    int rc = pthread_rwlock_tryrdlock(&rw);
    if (rc == EBUSY)
        CHECK(pthread_rwlock_rdlock(&rw));
    else
        CHECK(rc);
    assert(value >= last && value <= 4);
    last = value;
    CHECK(pthread_rwlock_unlock(&rw));

    for (;;) {
        struct timespec dl = deadline_in_ms(500);
        rc = pthread_rwlock_timedrdlock(&rw, &dl);
        if (rc == 0)
            break;
        if (rc != ETIMEDOUT)
            CHECK(rc);
    }
    assert(value >= last && value <= 4);
    CHECK(pthread_rwlock_unlock(&rw));
    return NULL;
}

int main(void)
{
    pthread_t w1, w2, r1, r2;
    CHECK(pthread_create(&r1, NULL, reader, NULL));
    CHECK(pthread_create(&w1, NULL, writer, NULL));
    CHECK(pthread_create(&r2, NULL, reader, NULL));
    CHECK(pthread_create(&w2, NULL, writer, NULL));
    CHECK(pthread_join(r1, NULL));
    CHECK(pthread_join(w1, NULL));
    CHECK(pthread_join(r2, NULL));
    CHECK(pthread_join(w2, NULL));
    CHECK(pthread_rwlock_destroy(&rw));
    assert(value == 4);
    return 0;
}
