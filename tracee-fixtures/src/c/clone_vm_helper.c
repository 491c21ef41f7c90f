/* clone_vm_helper — verdict: none, and the summary must say that a process
 * ran untraced.
 *
 * The program starts a helper process with clone(CLONE_VM | SIGCHLD): it
 * shares the program's memory without being one of its threads, and never
 * execs.  mcheck does not check such a process (it runs natively), so it must
 * not call the search space exhausted nor the program clean without saying
 * so.  The helper writes `helped` before the parent reads it after waitpid: no
 * bug.  A worker thread gives the search a choice. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;
static volatile int helped;

static int helper(void *arg)
{
    (void)arg;
    helped = 1;
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);

    size_t size = 64 * 1024;
    char *stack = malloc(size);
    if (stack == NULL)
        return 2;
    pid_t pid = clone(helper, stack + size, CLONE_VM | SIGCHLD, NULL);
    if (pid < 0) {
        perror("clone");
        return 2;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        perror("waitpid");
        return 2;
    }
    free(stack);
    printf("counter %d, helped %d\n", counter, helped);
    return counter == 2 && helped == 1 ? 0 : 1;
}
