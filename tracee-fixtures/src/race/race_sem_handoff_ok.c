/* race_sem_handoff_ok — verdict: none.
 *
 * A malloc'd buffer reused for several hand-overs, ordered by two
 * semaphores.  The producer sem_waits `empty`, fills the buffer and
 * sem_posts `full`; the consumer sem_waits `full`, reads the buffer, writes
 * its checksum into the buffer's last word, and sem_posts `empty`.  Three
 * rounds on the same block (allocated by main before creating the threads).
 *
 * post→wait orders the producer's writes before the consumer's reads, and
 * the consumer's reads/writes before the producer's next fill.  No data race
 * on any schedule. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

#define ROUNDS 3
#define LEN 8

static sem_t empty, full;

static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0) {
        if (errno != EINTR) {
            perror("sem_wait");
            abort();
        }
    }
}

static void *producer(void *arg)
{
    int *buf = arg;
    for (int r = 0; r < ROUNDS; r++) {
        wait_sem(&empty);
        if (r > 0 && buf[LEN] != (r - 1) * LEN + (LEN - 1) * LEN / 2) {
            fprintf(stderr, "bad checksum in round %d\n", r - 1);
            abort();
        }
        for (int i = 0; i < LEN; i++)
            buf[i] = r + i;
        CHECK(sem_post(&full));
    }
    return NULL;
}

static void *consumer(void *arg)
{
    int *buf = arg;
    long total = 0;
    for (int r = 0; r < ROUNDS; r++) {
        wait_sem(&full);
        int sum = 0;
        for (int i = 0; i < LEN; i++)
            sum += buf[i];
        buf[LEN] = sum;
        total += sum;
        CHECK(sem_post(&empty));
    }
    return (void *)total;
}

int main(void)
{
    int *buf = malloc((LEN + 1) * sizeof *buf);
    if (!buf)
        abort();
    buf[LEN] = 0;
    CHECK(sem_init(&empty, 0, 1));
    CHECK(sem_init(&full, 0, 0));
    pthread_t p, c;
    void *ret;
    CHECK(pthread_create(&p, NULL, producer, buf));
    CHECK(pthread_create(&c, NULL, consumer, buf));
    CHECK(pthread_join(p, NULL));
    CHECK(pthread_join(c, &ret));
    long total = (long)ret;
    long want = ROUNDS * (LEN - 1) * LEN / 2 + LEN * (ROUNDS - 1) * ROUNDS / 2;
    if (total != want) {
        fprintf(stderr, "total %ld want %ld\n", total, want);
        return 1;
    }
    free(buf);
    CHECK(sem_destroy(&empty));
    CHECK(sem_destroy(&full));
    printf("total = %ld\n", total);
    return 0;
}
