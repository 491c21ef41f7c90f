/* file_header_ok — verdict: none.
 *
 * Opens its output before its threads (as pigz, xz and most compressors do), writes a
 * header to it through write(2) once the first thread exists (after mcheck's startup
 * snapshot), lets two workers take turns on a mutex long enough for a tree search to take
 * branch snapshots, then appends the total, sets the file's mode (as gzip and pigz copy
 * the input's: a call mcheck sees, so it puts the file back before the next execution) and
 * reads the whole file back: it must begin with the header. A fork copy of a point after the header, started with the file put back
 * as it was at the startup snapshot, would write the total at its offset past an empty
 * file: zeros where the header was, and the program's assertion fails (a false finding of
 * mcheck's making). The output path is argv[1], "file_header.out" by default. */
#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define HEADER "HEADER v1\n"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int total;

static void *worker(void *arg)
{
    for (int i = 0; i < 40; i++) {
        CHECK(pthread_mutex_lock(&m));
        total += (int)(long)arg;
        CHECK(pthread_mutex_unlock(&m));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "file_header.out";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, (void *)1L));
    if (write(fd, HEADER, strlen(HEADER)) != (ssize_t)strlen(HEADER)) {
        perror("write");
        return 1;
    }
    CHECK(pthread_create(&b, NULL, worker, (void *)2L));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    char line[64];
    int n = snprintf(line, sizeof line, "total %d\n", total);
    if (write(fd, line, (size_t)n) != n) {
        perror("write");
        return 1;
    }
    /* As gzip and pigz give their output the input's mode: a call that changes the file,
     * after which mcheck puts the file back before the next execution. */
    if (fchmod(fd, 0644) != 0) {
        perror("fchmod");
        return 1;
    }
    char back[128] = {0};
    ssize_t got = pread(fd, back, sizeof back - 1, 0);
    assert(got == (ssize_t)strlen(HEADER) + n);
    assert(memcmp(back, HEADER, strlen(HEADER)) == 0);
    close(fd);
    return 0;
}
