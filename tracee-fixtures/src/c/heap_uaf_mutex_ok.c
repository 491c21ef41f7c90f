/* The correct twin of heap_uaf_mutex: the closer clears `current` under the lock before
 * freeing, and the reader checks it under the same lock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct session {
    int id;
    int requests;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *current;

static void *closer(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    struct session *s = current;
    current = NULL;
    free(s);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    int n = -1;
    pthread_mutex_lock(&lock);
    if (current)
        n = current->requests;
    pthread_mutex_unlock(&lock);
    printf("requests: %d\n", n);
    return NULL;
}

int main(void) {
    current = malloc(sizeof *current);
    current->id = 1;
    current->requests = 7;
    pthread_t a, b;
    pthread_create(&a, NULL, reader, NULL);
    pthread_create(&b, NULL, closer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
