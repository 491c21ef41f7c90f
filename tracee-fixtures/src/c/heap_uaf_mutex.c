/* A use after free with no data race: a worker frees the shared session under the lock
 * once it is done, and the reader uses it under the same lock, but nothing makes the
 * reader come first. When the worker wins the lock, the reader reads freed memory (glibc
 * keeps it mapped: no crash, no assertion, only a wrong value). */
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
    /* Bug: it does not clear `current`, so the reader still finds the session. */
    free(s);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    int n = current->requests; /* use after free when closer ran first */
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
