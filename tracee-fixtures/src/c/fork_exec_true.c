/* fork_exec_true — verdict: none.  Process-hygiene fixture.
 *
 * A multi-threaded program forks; the child execs /bin/true and the parent
 * waits for it with waitpid and checks it exited 0.  A worker thread
 * updates a mutex-protected counter concurrently.  Correct on every
 * schedule; mcheck must cope with the fork/exec of a child (and leave no
 * child or zombie behind). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int counter;

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

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("waitpid");
            return 2;
        }
    }
    pthread_join(t, NULL);
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child status %#x\n", status);
        return 1;
    }
    return counter == 2 ? 0 : 1;
}
