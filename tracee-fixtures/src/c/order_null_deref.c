/* order_null_deref — verdict: crash.
 *
 * NULL dereference that needs a specific order.  The user thread takes the
 * shared buffer pointer under a mutex and writes through it; the setup
 * thread allocates the buffer and publishes the pointer under the same
 * mutex.  The user thread is created first.  If its critical section runs
 * before the setup thread's, it reads NULL and the write faults (SIGSEGV).
 * Otherwise it writes into the buffer and everything is fine. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int *volatile buffer;

static void *user(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    int *p = buffer;
    pthread_mutex_unlock(&m);
    p[3] = 7; /* BUG: p is NULL if setup has not run yet */
    return NULL;
}

static void *setup(void *arg)
{
    (void)arg;
    int *p = calloc(8, sizeof(int));
    pthread_mutex_lock(&m);
    buffer = p;
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t u, s;
    pthread_create(&u, NULL, user, NULL);
    pthread_create(&s, NULL, setup, NULL);
    pthread_join(u, NULL);
    pthread_join(s, NULL);
    printf("buffer[3] = %d\n", buffer[3]);
    free(buffer);
    return 0;
}
