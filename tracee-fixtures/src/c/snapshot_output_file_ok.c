/* Writes its report into a file it opens itself and moves onto stdout with dup2 before its
 * first thread, as `sort -o` does; a thread reads all of stdin meanwhile. A fork copy shares
 * the open file descriptions of its template, so without care the second execution writes
 * after the first one's bytes (the file grows by one report per execution) and reads stdin
 * at its end.
 *
 * Usage: snapshot_output_file_ok [OUT [MODE [check]]], OUT defaulting to /dev/null; OUT "-"
 * writes to the stdout the program was started with (a file the shell opened), MODE then
 * choosing only whether a header comes first (trunc, append) or the file is cut (keep).
 *   trunc   open with O_TRUNC, a header before the threads, the body after them
 *   keep    open without O_TRUNC and, after the threads, ftruncate(1, 0) and write all (sort)
 *   append  open with O_APPEND, a header before the threads, the body after them
 *   check   abort unless the file then holds exactly what a native run leaves
 *           (only meaningful when nothing else writes the file: mcheck --jobs 1)
 * Every execution writes the same bytes (the counter ends at 2*ROUNDS in every schedule).
 * Correct: no finding, and the file ends byte-identical to a native run. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define ROUNDS 30
#define LINES 400

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long input_bytes;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    char buf[4096];
    ssize_t n;
    long total = 0;
    while ((n = read(0, buf, sizeof buf)) > 0)
        total += n;
    CHECK(pthread_mutex_lock(&lock));
    input_bytes = total;
    CHECK(pthread_mutex_unlock(&lock));
    return NULL;
}

static off_t size_of_stdout(void)
{
    struct stat st;
    if (fstat(1, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return st.st_size;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "/dev/null";
    const char *mode = argc > 2 ? argv[2] : "trunc";
    int check = argc > 3 && strcmp(argv[3], "check") == 0;
    int flags = O_WRONLY | O_CREAT;
    if (strcmp(mode, "trunc") == 0)
        flags |= O_TRUNC;
    else if (strcmp(mode, "append") == 0)
        flags |= O_APPEND;
    else if (strcmp(mode, "keep") != 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (strcmp(out, "-") != 0) {
        int fd = open(out, flags, 0644);
        if (fd < 0 || dup2(fd, 1) != 1) {
            perror(out);
            return 2;
        }
        close(fd);
    }
    off_t before = size_of_stdout();
    long written = 0;
    if (strcmp(mode, "keep") != 0)
        written += dprintf(1, "header of %s\n", mode);

    pthread_t t[3];
    CHECK(pthread_create(&t[0], NULL, worker, NULL));
    CHECK(pthread_create(&t[1], NULL, worker, NULL));
    CHECK(pthread_create(&t[2], NULL, reader, NULL));
    for (int i = 0; i < 3; i++)
        CHECK(pthread_join(t[i], NULL));

    if (strcmp(mode, "keep") == 0) {
        if (ftruncate(1, 0) != 0 && size_of_stdout() >= 0) {
            perror("ftruncate");
            return 2;
        }
        before = 0;
    }
    written += dprintf(1, "counter %ld, %ld byte(s) of input\n", counter, input_bytes);
    for (int i = 0; i < LINES; i++)
        written += dprintf(1, "line %d of the report\n", i);

    off_t after = size_of_stdout();
    if (check && after >= 0 && after != before + written) {
        fprintf(stderr, "the file holds %ld byte(s), this execution wrote %ld after %ld\n",
                (long)after, written, (long)before);
        abort();
    }
    return 0;
}
