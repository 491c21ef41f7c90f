/* files_deadlock_output — verdict: deadlock.
 *
 * An ABBA deadlock in a program that writes an output file: "begin" before its threads,
 * "end" after joining them.  The deadlocking schedule is rare natively, so a native run
 * leaves "begin\nend\n".  Under mcheck the execution that deadlocks is killed after it
 * emptied the file (O_TRUNC) and wrote "begin" only; after the search the file must still
 * be what a run to the end leaves, not what mcheck's killed execution left.  The output
 * path is argv[1], "deadlock.out" in the working directory by default. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;

static void *one(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&a));
    CHECK(pthread_mutex_lock(&b));
    CHECK(pthread_mutex_unlock(&b));
    CHECK(pthread_mutex_unlock(&a));
    return NULL;
}

static void *two(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&b));
    CHECK(pthread_mutex_lock(&a));
    CHECK(pthread_mutex_unlock(&a));
    CHECK(pthread_mutex_unlock(&b));
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "deadlock.out";
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    dprintf(fd, "begin\n");
    pthread_t x, y;
    CHECK(pthread_create(&x, NULL, one, NULL));
    CHECK(pthread_create(&y, NULL, two, NULL));
    CHECK(pthread_join(x, NULL));
    CHECK(pthread_join(y, NULL));
    dprintf(fd, "end\n");
    close(fd);
    return 0;
}
