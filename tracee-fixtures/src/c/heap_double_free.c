/* A racy double free: two workers finish with a shared buffer, and each frees it when it
 * sees that the other one is done. The check and the update of the counter are two steps
 * (each under the lock, but not together), so both can see the other done and both free. */
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
    done++;
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&lock);
    int both = done == 2;
    pthread_mutex_unlock(&lock);
    if (both)
        free(buffer); /* both workers may get here */
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
