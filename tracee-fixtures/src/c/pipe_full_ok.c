/* pipe_full_ok — verdict: none.
 *
 * One thread writes 256 KiB into a pipe in 64 KiB write(2) calls, another reads it all:
 * after the first write the pipe is full, so the second write finds no room and must wait
 * for the reader. mcheck moves a large pipe write in a page at a time as room appears (as
 * the kernel does while the writer sleeps); a write that found the pipe full and had
 * placed nothing yet was never moved on, so once the reader had drained the pipe both
 * waited forever: a false deadlock. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define BLOCK (64 * 1024)
#define BLOCKS 4

static int fds[2];

static void *writer(void *arg)
{
    (void)arg;
    static char block[BLOCK];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < BLOCKS; i++) {
        size_t done = 0;
        while (done < BLOCK) {
            ssize_t n = write(fds[1], block + done, BLOCK - done);
            if (n <= 0)
                abort();
            done += (size_t)n;
        }
    }
    close(fds[1]);
    return NULL;
}

int main(void)
{
    if (pipe(fds) != 0)
        return 1;
    pthread_t w;
    CHECK(pthread_create(&w, NULL, writer, NULL));
    static char buf[16384];
    long total = 0;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        total += n;
    CHECK(pthread_join(w, NULL));
    if (total != (long)BLOCK * BLOCKS)
        abort();
    return 0;
}
