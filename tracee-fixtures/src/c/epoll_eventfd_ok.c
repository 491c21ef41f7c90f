/* epoll_eventfd_ok — verdict: none.
 *
 * The main thread waits in epoll_wait (no timeout) on an eventfd that a worker
 * writes after preparing a result; the main thread then reads the eventfd and
 * checks the result.  The way an event loop (libuv, GLib) is woken by its
 * thread pool.  While the main thread waits in the kernel the worker must be
 * scheduled, and the worker's write must wake it: a tracer that lets the
 * main thread block in the kernel with every other thread stopped hangs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "common.h"

static int efd;
static int result;

static void *worker(void *arg)
{
    (void)arg;
    result = 42;
    uint64_t one = 1;
    if (write(efd, &one, sizeof one) != sizeof one)
        abort();
    return NULL;
}

int main(void)
{
    efd = eventfd(0, EFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (efd < 0 || ep < 0)
        abort();
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = efd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) != 0)
        abort();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    struct epoll_event got;
    int n;
    while ((n = epoll_wait(ep, &got, 1, -1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || got.data.fd != efd)
        abort();
    uint64_t count;
    if (read(efd, &count, sizeof count) != sizeof count || count != 1)
        abort();
    if (result != 42)
        abort();
    CHECK(pthread_join(t, NULL));
    return 0;
}
