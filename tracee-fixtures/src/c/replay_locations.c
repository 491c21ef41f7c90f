/* Where a replay's steps are said to happen: an atomic that is a function's first
 * instruction (its breakpoint sits where the function starts, so a location taken at
 * pc - 1 names the function before it), a sleep (a system call, located by unwinding out
 * of libc) and an atomic through a pointer the worker clears: main crashes when it runs
 * after the clear. tests/it/replay.rs checks the replay's table names these lines.
 * Verdict: crash. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

_Atomic int counter;
_Atomic int *_Atomic target = &counter;

/* Its first instruction is the atomic increment. */
__attribute__((noinline)) void bump(void) {
    atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed); /* LINE bump */
}

static void *worker(void *arg) {
    (void)arg;
    bump();
    usleep(1000); /* LINE sleep */
    target = NULL; /* LINE clear */
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    for (int i = 0; i < 3; i++)
        atomic_fetch_add(target, 1); /* LINE main */
    pthread_join(t, NULL);
    printf("%d\n", counter);
    return 0;
}
