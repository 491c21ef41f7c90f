/* Everything a thread recreated in a fork copy must get back, checked after a long run of
 * scheduling points (so that copies are made of the whole multi-threaded process in the
 * middle of it): thread-local storage, errno, a recursive mutex held twice, the thread's
 * name, its signal mask, its alternate signal stack, a value kept in an SSE register across
 * the points (extended state), its robust futex list, glibc's cached thread id (pthread_kill of the other worker) and joins.
 * Correct: exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 40

static __thread int tls_value;
static pthread_mutex_t rec[2];
static pthread_t workers[2];
static volatile sig_atomic_t kicks[2];
static long shared_counter;
static int ready;

static void on_usr1(int sig)
{
    (void)sig;
    for (int i = 0; i < 2; i++)
        if (pthread_equal(pthread_self(), workers[i]))
            kicks[i]++;
}

static void fail(int id, const char *what)
{
    fprintf(stderr, "worker %d lost its %s\n", id, what);
    abort();
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[16], got[16];
    snprintf(name, sizeof name, "worker-%d", id);
    CHECK(pthread_setname_np(pthread_self(), name));
    tls_value = 100 + id;
    sigset_t block, now;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR2);
    CHECK(pthread_sigmask(SIG_BLOCK, &block, NULL));
    static char altstacks[2][1 << 16];
    stack_t ss = {.ss_sp = altstacks[id], .ss_size = sizeof altstacks[id], .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        fail(id, "sigaltstack call");
    CHECK(pthread_mutex_lock(&rec[id]));
    CHECK(pthread_mutex_lock(&rec[id]));
    void *robust_before = NULL, *robust_after = NULL;
    size_t robust_len;
    syscall(SYS_get_robust_list, 0, &robust_before, &robust_len);
    errno = 40 + id;
    /* Both workers set up before either starts its loop: copies made during the loops
     * carry two fully dressed threads. */
    __atomic_fetch_add(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2)
        sched_yield();
    errno = 40 + id;
    /* A value only this thread's SSE register holds across the loop (no calls in it). */
    uint64_t bits = 0x5eed000000000000ull + (uint64_t)id, back;
    __asm__ volatile("movq %0, %%xmm7" : : "r"(bits) : "xmm7");
    for (int i = 0; i < ROUNDS; i++)
        __atomic_fetch_add(&shared_counter, 1, __ATOMIC_SEQ_CST);
    __asm__ volatile("movq %%xmm7, %0" : "=r"(back));
    int saved_errno = errno;
    syscall(SYS_get_robust_list, 0, &robust_after, &robust_len);
    if (robust_after != robust_before || robust_before == NULL)
        fail(id, "robust futex list");
    if (saved_errno != 40 + id)
        fail(id, "errno");
    if (tls_value != 100 + id)
        fail(id, "thread-local value");
    if (back != bits)
        fail(id, "SSE register");
    CHECK(pthread_getname_np(pthread_self(), got, sizeof got));
    if (strcmp(got, name) != 0)
        fail(id, "name");
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now));
    if (!sigismember(&now, SIGUSR2))
        fail(id, "signal mask");
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || cur.ss_sp != altstacks[id])
        fail(id, "alternate signal stack");
    CHECK(pthread_mutex_unlock(&rec[id]));
    CHECK(pthread_mutex_unlock(&rec[id]));
    /* The other worker's cached thread id must be its own in the copy. */
    CHECK(pthread_kill(workers[1 - id], SIGUSR1));
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_mutex_init(&rec[i], &attr));
    signal(SIGUSR1, on_usr1);
    /* Workers are created with SIGUSR1 blocked until both handles are published. */
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &usr1, &old));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&workers[i], NULL, worker, (void *)(intptr_t)i));
    CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(workers[i], NULL));
    if (shared_counter != 2 * ROUNDS) {
        fprintf(stderr, "counter %ld\n", shared_counter);
        abort();
    }
    return 0;
}
