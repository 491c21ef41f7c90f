/* Output written before fork snapshots are taken: a header before the first thread (the
 * startup snapshot is taken at its creation), then a first phase of locked work, a line,
 * and a second phase long enough for branch snapshots to be taken after that line. Every
 * schedule prints the same lines. An execution restored from a snapshot does not write
 * what came before it again, so the output oracle must count it from the snapshot's
 * output so far: before it did, every copy looked as if it had printed less, a false
 * `nondeterminism`. Verdict: none. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total;

static void *add(void *arg) {
    long share = (long)arg;
    for (int i = 0; i < 20; i++) {
        pthread_mutex_lock(&lock);
        total += share;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void phase(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, add, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
}

int main(void) {
    /* Written now, not at exit: stdout is a pipe, fully buffered. */
    printf("header: two phases of two workers\n");
    fflush(stdout);
    phase();
    printf("after phase 1: total %ld\n", total);
    fflush(stdout);
    phase();
    printf("after phase 2: total %ld\n", total);
    return 0;
}
