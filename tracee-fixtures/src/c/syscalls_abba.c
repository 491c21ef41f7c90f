/* syscalls_abba — verdict: deadlock.
 *
 * abba's lock-order inversion, with system calls between t1's two locks: for going
 * back over system calls under `mcheck replay --gdb` (tests/it/replay_gdb.rs).  t1 takes
 * a, writes a line through libc's write (which mcheck traps and lets run), then makes
 * three system calls of its own, each one `syscall` instruction followed by a label
 * gdb can break at: getuid (which mcheck does not trap), write (trapped, run natively)
 * and sched_yield (a scheduling decision, where t2 may run).  Then it takes b while t2
 * holds b and waits for a. */
#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static volatile long seen;

static long sys_getuid(void)
{
    long r;
    __asm__ volatile("syscall\n\t.globl after_getuid\nafter_getuid:"
                     : "=a"(r)
                     : "a"(102L)
                     : "rcx", "r11", "memory");
    return r;
}

static long sys_write(const char *s, long n)
{
    long r;
    __asm__ volatile("syscall\n\t.globl after_write\nafter_write:"
                     : "=a"(r)
                     : "a"(1L), "D"(1L), "S"(s), "d"(n)
                     : "rcx", "r11", "memory");
    return r;
}

static long sys_yield(void)
{
    long r;
    __asm__ volatile("syscall\n\t.globl after_yield\nafter_yield:"
                     : "=a"(r)
                     : "a"(24L)
                     : "rcx", "r11", "memory");
    return r;
}

static void *t1(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    write(1, "t1 has a\n", 9);
    seen = sys_getuid();
    seen += sys_write("t1\n", 3);
    seen += sys_yield();
    pthread_mutex_lock(&b);
    seen++;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *t2(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    seen++;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    pthread_t x, y;
    pthread_create(&x, NULL, t1, NULL);
    pthread_create(&y, NULL, t2, NULL);
    pthread_join(x, NULL);
    pthread_join(y, NULL);
    return 0;
}
