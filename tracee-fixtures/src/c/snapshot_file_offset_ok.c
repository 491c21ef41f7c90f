/* Opens its own executable before the first thread; the thread reads the ELF magic through
 * that descriptor. A fork copy shares the descriptor's offset with its template, so a second
 * copy would read at offset 4: mcheck must put the offset back before every copy. main and
 * the reader take a mutex each, so that there is a scheduling choice (and more than one
 * execution to start from the snapshot).
 * Correct: every execution reads "\x7fELF" and exits 0. */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static int fd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *reader(void *arg)
{
    (void)arg;
    char magic[4];
    CHECK(pthread_mutex_lock(&lock));
    if (read(fd, magic, 4) != 4 || memcmp(magic, "\x7f" "ELF", 4) != 0) {
        fprintf(stderr, "read the wrong bytes: the file offset was shared\n");
        abort();
    }
    CHECK(pthread_mutex_unlock(&lock));
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    fd = open(argv[0], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 2;
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, reader, NULL));
    CHECK(pthread_mutex_lock(&lock));
    CHECK(pthread_mutex_unlock(&lock));
    CHECK(pthread_join(t, NULL));
    return 0;
}
