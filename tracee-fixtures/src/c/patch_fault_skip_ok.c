/* patch_fault_skip_ok — verdict: none.  A fault inside a patched access, handled.
 *
 * After creating a thread (from then on mcheck records memory accesses, through code
 * patched into the program), main loads through a NULL pointer at a known instruction
 * (`probe`, inline assembly, a site mcheck patches), many times. The SIGSEGV handler
 * checks that the interrupted context is exactly that instruction, with the registers
 * the program had there, and skips it by moving rip to the label after it.  If mcheck
 * delivered the signal with the thread inside its generated code, or with registers of
 * its own, the handler sees another rip and aborts.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

extern const char probe_start[], probe_end[];

static volatile long faults;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    if ((const char *)g[REG_RIP] != probe_start || si->si_addr != NULL || g[REG_RCX] != 0x1234)
        abort();
    g[REG_RIP] = (greg_t)probe_end;
    faults++;
}

static void *idle(void *arg)
{
    return arg;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    long sum = 0;
    for (int i = 0; i < 100; i++) {
        long v = 7;
        uintptr_t null = 0;
        __asm__ volatile("mov $0x1234, %%rcx\n"
                         ".globl probe_start\nprobe_start:\n"
                         "mov (%1), %0\n"
                         ".globl probe_end\nprobe_end:\n"
                         : "+r"(v)
                         : "r"(null)
                         : "rcx", "memory");
        sum += v;
    }
    return faults == 100 && sum == 700 ? 0 : 1;
}
