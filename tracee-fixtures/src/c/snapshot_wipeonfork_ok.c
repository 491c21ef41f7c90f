/* A page made MADV_WIPEONFORK after the threads started, in a mapping of its own (so that
 * /proc/PID/maps does not change): a fork copy made after that point would find the page
 * zeroed, which the program itself never sees. mcheck must stop taking branch snapshots
 * once the advice is given (it reads the mappings' fork flags again). Correct: the page
 * keeps its value in every execution, and the counter ends at 4 * ROUNDS. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>

#include "common.h"

#define ROUNDS 40

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static volatile unsigned *page;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
        if (*page != 0xfeedu) {
            fprintf(stderr, "the page lost its value: %#x\n", *page);
            abort();
        }
    }
    return NULL;
}

int main(void)
{
    /* Far from the other mappings: the kernel merges no neighbour into it. */
    void *at = mmap((void *)0x3f0000000000, 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (at == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    page = at;
    *page = 0xfeedu;
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, NULL));
    CHECK(pthread_create(&b, NULL, worker, NULL));
    /* Branch snapshots are taken every few dozen decisions: some before the advice, with
     * the same mappings as after it, and some after. */
    for (int i = 0; i < 2 * ROUNDS; i++) {
        if (i == ROUNDS && madvise(at, 4096, MADV_WIPEONFORK) != 0) {
            perror("madvise");
            return 2;
        }
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    if (counter != 4 * ROUNDS || *page != 0xfeedu) {
        fprintf(stderr, "counter %ld, page %#x\n", counter, *page);
        return 1;
    }
    return 0;
}
