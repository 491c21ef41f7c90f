/* race_io_buffer — verdict: data_race.
 *
 * One thread read()s from a pipe into a global buffer while another write()s the same
 * buffer to /dev/null, with no synchronisation. The kernel's copy into and out of user
 * memory is invisible to instruction tracing: mcheck models read/write (and fread/fwrite,
 * send/recv) called from the program as accesses of their buffers — read as a write of the
 * bytes it returned, write as a read of its length — so the race on `buffer` is reported.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static char buffer[64];
static int pipe_fds[2];

static void *reader(void *arg)
{
    (void)arg;
    if (read(pipe_fds[0], buffer, sizeof buffer) < 0)
        perror("read");
    return NULL;
}

static void *sender(void *arg)
{
    (void)arg;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, buffer, 16) < 0)
            perror("write");
        close(fd);
    }
    return NULL;
}

int main(void)
{
    if (pipe(pipe_fds) != 0 || write(pipe_fds[1], "hello, racy world", 17) != 17)
        return 2;
    pthread_t a, b;
    pthread_create(&a, NULL, reader, NULL);
    pthread_create(&b, NULL, sender, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
