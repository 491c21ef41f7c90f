/* holt_append K [distinct] — verdict: none (with "distinct": nondeterminism under
 * --state-cache).  Holt's table ("The One Page Model Checker"): two threads each append K
 * characters to a shared buffer through a shared index.
 *
 * main creates one thread, and then main and that thread each append K characters: an
 * append is an atomic fetch-add on the shared index (`lock xadd`, one scheduling point),
 * then a plain store of the character into the slot the fetch-add returned.  Nothing else
 * is shared.  Both threads append the same character, so the buffer after i appends of
 * one and j of the other is the same whatever their order: the program state depends only
 * on the per-thread step counter, which is what state caching prunes on.  With the
 * argument "distinct" the threads append different characters and main prints the buffer
 * to stderr: the output depends on the schedule.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX 64

static char buf[2 * MAX + 1];
static long len;
static int k = 3;
static int distinct;

/* mcheck hashes every register and the red zone below the stack pointer: it cannot tell
 * dead values from live ones.  After the store, the slot index (which depends on the order
 * of the appends) is dead but still sits in scratch registers and in this frame, which the
 * caller's red zone keeps: clear them, so that equal states are equal bit for bit (as they
 * are for Holt's in-process hook, after whose call the scratch registers are dead). */
static void append(char c)
{
    long i = __atomic_fetch_add(&len, 1, __ATOMIC_SEQ_CST);
    buf[i] = c;
    i = 0;
    __asm__ volatile("xor %%eax, %%eax\n\txor %%ecx, %%ecx\n\txor %%edx, %%edx\n\t"
                     "xor %%esi, %%esi\n\txor %%edi, %%edi\n\txor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d"
                     ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "cc",
                     "memory");
    (void)i;
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < k; i++)
        append(distinct ? 'b' : 'a');
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        k = atoi(argv[1]);
    if (k < 0 || k > MAX)
        return 2;
    distinct = argc > 2 && strcmp(argv[2], "distinct") == 0;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    for (int i = 0; i < k; i++)
        append('a');
    pthread_join(t, NULL);
    if (len != 2L * k || strlen(buf) != (size_t)(2 * k))
        return 1;
    if (distinct)
        fprintf(stderr, "%s\n", buf);
    return 0;
}
