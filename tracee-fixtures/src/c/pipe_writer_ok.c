/* pipe_writer_ok — verdict: none.
 *
 * Two threads take turns writing 64 KiB blocks to stdout with write(2), under a mutex:
 * 256 KiB in all, four times what a pipe holds. Run as `sh -c 'pipe_writer_ok | wc -c'`
 * (tests/it/process_tree.rs), its stdout is a pipe to another process of the traced tree:
 * a writer finds the pipe full until `wc` reads, and `wc` runs only when mcheck lets it.
 * mcheck used to let writes to stdout run as if the user drained them, so the writer slept
 * in the kernel with `wc` held stopped, and every execution was cut after the watchdog's
 * wait ("mcheck does not know what would have woken it"). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define BLOCK (64 * 1024)

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static char block[BLOCK];

static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_mutex_lock(&m));
        size_t done = 0;
        while (done < BLOCK) {
            ssize_t n = write(1, block + done, BLOCK - done);
            if (n <= 0)
                abort();
            done += (size_t)n;
        }
        CHECK(pthread_mutex_unlock(&m));
    }
    return NULL;
}

int main(void)
{
    memset(block, 'x', sizeof block);
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, writer, NULL));
    CHECK(pthread_create(&b, NULL, writer, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    return 0;
}
