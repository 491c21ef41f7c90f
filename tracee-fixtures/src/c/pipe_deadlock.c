/* pipe_deadlock — verdict: deadlock.
 *
 * Two threads talk through two pipes, and each reads first: T1 reads the
 * pipe T2 should write, T2 reads the pipe T1 should write.  Both wait in
 * read() forever; the main thread waits in pthread_join.  Nothing in the
 * program can wake them, every schedule.  mcheck reports a deadlock naming
 * each thread's system call and descriptor. */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
#include "common.h"

static int a[2], b[2];

static void *ping(void *arg)
{
    (void)arg;
    char c;
    if (read(b[0], &c, 1) != 1)   /* waits for pong, which waits for us */
        abort();
    if (write(a[1], "p", 1) != 1)
        abort();
    return NULL;
}

static void *pong(void *arg)
{
    (void)arg;
    char c;
    if (read(a[0], &c, 1) != 1)   /* waits for ping, which waits for us */
        abort();
    if (write(b[1], "q", 1) != 1)
        abort();
    return NULL;
}

int main(void)
{
    if (pipe(a) != 0 || pipe(b) != 0)
        abort();
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, ping, NULL));
    CHECK(pthread_create(&t2, NULL, pong, NULL));
    CHECK(pthread_join(t1, NULL));
    CHECK(pthread_join(t2, NULL));
    return 0;
}
