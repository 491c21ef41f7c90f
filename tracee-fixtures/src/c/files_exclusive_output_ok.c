/* files_exclusive_output_ok — verdict: none.
 *
 * Creates its output with O_CREAT|O_EXCL, as `pbzip2 -k` and many careful tools do: it
 * refuses to overwrite a file that exists and fails with exit status 1.  Two workers add to
 * a counter under a mutex; main then creates the output and writes the sum (after the
 * threads, so that executions from mcheck's fork snapshot, taken at the first thread
 * creation, open it again too).  Every run of the program from a clean
 * directory succeeds, so under mcheck every execution must find the directory as a fresh
 * run would: without its output (the previous execution's changes undone).  The output
 * path is argv[1], "exclusive.out" in the working directory by default. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int sum;

static void *worker(void *arg)
{
    for (int i = 0; i < 3; i++) {
        CHECK(pthread_mutex_lock(&m));
        sum += (int)(long)arg;
        CHECK(pthread_mutex_unlock(&m));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "exclusive.out";
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, (void *)1L));
    CHECK(pthread_create(&b, NULL, worker, (void *)2L));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    dprintf(fd, "sum %d\n", sum);
    close(fd);
    return 0;
}
