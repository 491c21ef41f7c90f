/* race_unlocked_publish — verdict: data_race.
 *
 * Publication without a lock.  Thread `publisher` mallocs a struct config,
 * fills its fields and stores the pointer into the global `g_config` with a
 * plain store.  Thread `user` reads `g_config` (up to three polls with
 * sched_yield between them) and, when it is non-NULL, reads its `timeout`
 * field.  main joins both and frees the struct.
 *
 * The plain store of `g_config` and the plain loads of it are not ordered
 * by anything, so they race on EVERY schedule.  On schedules where `user`
 * sees the pointer, its read of `->timeout` also races with the
 * publisher's initialising write of that heap field.  The report should name
 * `g_config`. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include "../c/common.h"

struct config {
    int timeout;
    int retries;
};

static struct config *g_config;

static void *publisher(void *arg)
{
    (void)arg;
    struct config *c = malloc(sizeof *c);
    if (!c)
        abort();
    c->timeout = 30;
    c->retries = 3;
    g_config = c;
    return NULL;
}

static void *user(void *arg)
{
    (void)arg;
    long seen = -1;
    for (int i = 0; i < 3; i++) {
        struct config *c = g_config;
        if (c) {
            seen = c->timeout;
            break;
        }
        sched_yield();
    }
    return (void *)seen;
}

int main(void)
{
    pthread_t p, u;
    void *ret;
    CHECK(pthread_create(&u, NULL, user, NULL));
    CHECK(pthread_create(&p, NULL, publisher, NULL));
    CHECK(pthread_join(p, NULL));
    CHECK(pthread_join(u, &ret));
    printf("user saw timeout = %ld\n", (long)ret);
    free(g_config);
    return 0;
}
