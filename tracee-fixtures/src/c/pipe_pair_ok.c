/* pipe_pair_ok — verdict: none.
 *
 * A writer thread sends numbered messages through a pipe, some small and one
 * larger than the pipe can hold, then closes its end; the main thread reads
 * until end of file and checks every byte.  Either thread may have to wait in
 * the kernel: the reader on an empty pipe, the writer on a full one (the large
 * message only fits while the reader drains it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
#include "common.h"

#define SMALL 8
#define LARGE (100 * 1024) /* more than a pipe holds (64 KiB) */

static int fds[2];
static unsigned char large[LARGE];

static void write_all(const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fds[1], p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            abort();
        p += w;
        n -= (size_t)w;
    }
}

static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < SMALL; i++) {
        unsigned char b = (unsigned char)i;
        write_all(&b, 1);
    }
    memset(large, 0x5a, LARGE);
    write_all(large, LARGE);
    close(fds[1]);
    return NULL;
}

int main(void)
{
    if (pipe(fds) != 0)
        abort();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL));
    static unsigned char got[SMALL + LARGE];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fds[0], got + have, sizeof got - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            abort();
        if (r == 0)
            break;
        have += (size_t)r;
    }
    if (have != sizeof got)
        abort();
    for (int i = 0; i < SMALL; i++)
        if (got[i] != (unsigned char)i)
            abort();
    static unsigned char want[LARGE];
    memset(want, 0x5a, LARGE);
    if (memcmp(got + SMALL, want, LARGE) != 0)
        abort();
    CHECK(pthread_join(t, NULL));
    return 0;
}
