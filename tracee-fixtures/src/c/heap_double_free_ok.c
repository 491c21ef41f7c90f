/* The correct twin of heap_double_free: the last worker to finish frees the buffer, decided
 * in the same critical section as the count. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int done;
static char *buffer;

static void *worker(void *arg) {
    const char *name = arg;
    pthread_mutex_lock(&lock);
    buffer[0] = name[0];
    int last = ++done == 2;
    pthread_mutex_unlock(&lock);
    if (last)
        free(buffer);
    return NULL;
}

int main(void) {
    buffer = malloc(64);
    memset(buffer, 0, 64);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, "a");
    pthread_create(&b, NULL, worker, "b");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    puts("done");
    return 0;
}
