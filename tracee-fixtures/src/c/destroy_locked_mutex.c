/* destroy_locked_mutex — verdict: api_misuse.
 *
 * pthread_mutex_destroy on a locked mutex.  The worker takes the mutex of a
 * heap-allocated object, finishes with the object and destroys the mutex
 * and frees the object while still holding the lock (it forgot the
 * unlock).  glibc returns EBUSY and the memory is freed anyway.  Happens on
 * every schedule. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct object {
    pthread_mutex_t lock;
    int refs;
};

static void *worker(void *arg)
{
    struct object *o = arg;
    pthread_mutex_lock(&o->lock);
    o->refs--;
    if (o->refs == 0) {
        int rc = pthread_mutex_destroy(&o->lock); /* BUG: still locked */
        printf("destroy returned %d\n", rc);
        free(o);
        return NULL;
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

int main(void)
{
    struct object *o = malloc(sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
    o->refs = 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, o);
    pthread_join(t, NULL);
    return 0;
}
