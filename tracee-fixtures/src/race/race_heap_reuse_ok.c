/* race_heap_reuse_ok — verdict: none.
 *
 * A heap block freed by one thread and an equal-sized block malloc'd by
 * another thread that (with glibc, almost always) gets the same address.
 *
 * Round 1 (join hand-over, small block): thread `first` mallocs 48 bytes,
 * fills and reads them, frees them and exits.  main joins it and creates
 * thread `second`, which mallocs 48 bytes — glibc flushed `first`'s tcache
 * into its arena at exit and hands that arena to `second`, so the address is
 * reused — and writes and reads the whole block.
 *
 * Round 2 (semaphore hand-over, large block): main mallocs 2048 bytes (above
 * the tcache limit, so a free returns it to main's arena) and passes it to
 * thread `user`, which fills it, frees it and sem_posts `freed`.  main
 * sem_waits `freed`, mallocs 2048 bytes (same address) and writes it while
 * `user` is still alive (it waits on `done` until main posts it).
 *
 * In both rounds the old block's last access is ordered before the new
 * block's first access (exit/join→create, resp. free→sem_post→sem_wait→
 * malloc), so even a detector that kept the old block's history would find
 * no race; one that forgets it at free/malloc doubly so.  Whether the
 * address was actually reused is printed but not checked. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

#define SMALL 48
#define LARGE 2048

static sem_t freed, done;
static uintptr_t first_addr, second_addr, big_addr, again_addr;

static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0) {
        if (errno != EINTR) {
            perror("sem_wait");
            abort();
        }
    }
}

static long fill_and_sum(unsigned char *p, size_t n, unsigned char seed)
{
    long sum = 0;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i);
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    return sum;
}

static void *first(void *arg)
{
    (void)arg;
    unsigned char *p = malloc(SMALL);
    if (!p)
        abort();
    first_addr = (uintptr_t)p; /* read by main after the join */
    long s = fill_and_sum(p, SMALL, 1);
    free(p);
    return (void *)s;
}

static void *second(void *arg)
{
    (void)arg;
    unsigned char *p = malloc(SMALL);
    if (!p)
        abort();
    second_addr = (uintptr_t)p;
    long s = fill_and_sum(p, SMALL, 2);
    free(p);
    return (void *)s;
}

static void *user(void *arg)
{
    unsigned char *p = arg;
    long s = fill_and_sum(p, LARGE, 3);
    free(p);
    CHECK(sem_post(&freed));
    wait_sem(&done);
    return (void *)s;
}

int main(void)
{
    pthread_t t;
    void *r1, *r2, *r3;

    CHECK(pthread_create(&t, NULL, first, NULL));
    CHECK(pthread_join(t, &r1));
    CHECK(pthread_create(&t, NULL, second, NULL));
    CHECK(pthread_join(t, &r2));

    CHECK(sem_init(&freed, 0, 0));
    CHECK(sem_init(&done, 0, 0));
    unsigned char *big = malloc(LARGE);
    if (!big)
        abort();
    big_addr = (uintptr_t)big;
    CHECK(pthread_create(&t, NULL, user, big));
    wait_sem(&freed);
    unsigned char *again = malloc(LARGE);
    if (!again)
        abort();
    again_addr = (uintptr_t)again;
    long s4 = fill_and_sum(again, LARGE, 4);
    CHECK(sem_post(&done));
    CHECK(pthread_join(t, &r3));
    free(again);

    if ((long)r1 <= 0 || (long)r2 <= 0 || (long)r3 <= 0 || s4 <= 0)
        return 1;
    printf("small block reused: %s, large block reused: %s\n",
           first_addr == second_addr ? "yes" : "no",
           big_addr == again_addr ? "yes" : "no");
    CHECK(sem_destroy(&freed));
    CHECK(sem_destroy(&done));
    return 0;
}
