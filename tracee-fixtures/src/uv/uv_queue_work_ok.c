/* uv_queue_work_ok — verdict: none.
 *
 * libuv's thread pool: four work items run on pool threads, each completion
 * is signalled to the event loop (an eventfd the loop waits on in
 * epoll_wait), and the loop runs the after-work callbacks.  The loop thread
 * spends its time blocked in the kernel while the pool works. */
#include <stdlib.h>
#include <uv.h>

static uv_work_t reqs[4];
static int values[4];
static int completed;

static void work(uv_work_t *req) { *(int *)req->data *= 10; }

static void after_work(uv_work_t *req, int status)
{
    if (status != 0 || *(int *)req->data % 10 != 0)
        abort();
    completed++;
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    for (int i = 0; i < 4; i++) {
        values[i] = i + 1;
        reqs[i].data = &values[i];
        if (uv_queue_work(loop, &reqs[i], work, after_work) != 0)
            abort();
    }
    if (uv_run(loop, UV_RUN_DEFAULT) != 0 || completed != 4)
        abort();
    for (int i = 0; i < 4; i++)
        if (values[i] != (i + 1) * 10)
            abort();
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
