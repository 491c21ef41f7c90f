/* orphaned_lock_exit — verdict: none.
 *
 * A thread exits holding a mutex on purpose (as HotSpot's VM thread keeps
 * Threads_lock when the VM goes down), another thread then waits on that
 * mutex forever, and main ends the program with exit() without waiting for
 * it.  The waiter can never proceed, but the program always ends: that is no
 * deadlock, only a note.  (exit_holding_lock is the case where the program's end
 * waits for the lock: a deadlock.)  main sleeps before it exits, so that the late
 * thread is certainly waiting by then. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t vm_lock = PTHREAD_MUTEX_INITIALIZER;

static void *vm_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&vm_lock);
    return NULL; /* keeps vm_lock: nobody may use the VM after this */
}

static void *late_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&vm_lock); /* waits forever */
    puts("late thread got the lock");
    pthread_mutex_unlock(&vm_lock);
    return NULL;
}

int main(void)
{
    pthread_t vm, late;
    pthread_create(&vm, NULL, vm_thread, NULL);
    pthread_join(vm, NULL);
    pthread_create(&late, NULL, late_thread, NULL);
    usleep(1000);
    puts("vm is down, exiting");
    fflush(stdout);
    exit(0);
}
