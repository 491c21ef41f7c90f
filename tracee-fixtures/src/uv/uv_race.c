/* uv_race — verdict: data_race.
 *
 * libuv's thread pool, with a bug: every work item adds its value to one global total
 * without a lock.  The work callbacks run on the pool's threads at the same time, so the
 * additions race with each other (the after-work callbacks, run by the event loop after
 * libuv's own queue lock and wakeup, are ordered after them and read the total safely).
 * mcheck must see libuv's synchronisation (a pthread mutex and condition variable, an
 * atomic flag and an eventfd) well enough to keep the after-work reads out of the report,
 * and still report the race between the work callbacks. */
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

static uv_work_t reqs[4];
static int values[4];
static long total;
static int completed;

static void work(uv_work_t *req) { total += *(int *)req->data; }

static void after_work(uv_work_t *req, int status)
{
    (void)req;
    if (status != 0)
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
    printf("total %ld\n", total);
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
