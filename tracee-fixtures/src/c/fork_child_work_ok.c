/* fork_child_work_ok — verdict: none.  A forked child runs the program's code, checked
 * as a process of the tree (it keeps its copy of mcheck's code edits, which must work there).
 *
 * After creating a thread (so that mcheck has instrumented the program: breakpoints on
 * the threading API and patched memory accesses), main forks. The child writes globals,
 * locks and unlocks a mutex, runs a pthread_once and a loop of memory accesses, and exits
 * with a status that says whether everything it computed was right; the parent waits for
 * it and fails unless the child succeeded. A child whose copy of mcheck's breakpoints and
 * patched code were not served as its parent's are would die (SIGTRAP, SIGSEGV) or compute
 * garbage. The loop's rounds are the first argument (default 100): on breakpoints, every
 * access of it is a stop.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long table[1024];
static long counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int initialised;

static void init(void)
{
    initialised++;
}

static void *worker(void *arg)
{
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
    return arg;
}

static int child(long rounds)
{
    for (int i = 0; i < 1024; i++)
        table[i] = i * 2;
    long sum = 0;
    for (long round = 0; round < rounds; round++)
        for (int i = 0; i < 1024; i++)
            sum += table[i];
    pthread_mutex_lock(&lock);
    counter += 10;
    pthread_mutex_unlock(&lock);
    pthread_once(&once, init);
    pthread_once(&once, init);
    return sum == rounds * 1023 * 1024 && counter == 11 && initialised == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0)
        _exit(child(rounds));
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 2;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && counter == 1 ? 0 : 1;
}
