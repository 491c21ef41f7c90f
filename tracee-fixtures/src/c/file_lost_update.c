/* A bug visible only in a file the program writes: two workers add their share to a total
 * in two critical sections (read, then write back), so an update can be lost, and main
 * writes the total to its output file (argv[1], "file_lost_update.out" in the working
 * directory by default). No data race, no assertion, exit 0 and the same stdout in every
 * schedule: only the file ("total 30", or "total 10"/"total 20" when one worker's update
 * is overwritten) shows the bug. Verdict: nondeterminism (the output oracle compares the
 * files the program writes as it compares stdout). */
#include <pthread.h>
#include <stdio.h>

#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int total;

static void *add(void *arg)
{
    int share = *(int *)arg;
    CHECK(pthread_mutex_lock(&lock));
    int seen = total;
    CHECK(pthread_mutex_unlock(&lock));
    /* The update is computed outside the lock from a value that may be stale. */
    int updated = seen + share;
    CHECK(pthread_mutex_lock(&lock));
    total = updated;
    CHECK(pthread_mutex_unlock(&lock));
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "file_lost_update.out";
    int shares[2] = {10, 20};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, add, &shares[i]));
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL));
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    fprintf(out, "workers done\ntotal %d\n", total);
    fclose(out);
    printf("wrote %s\n", path);
    return 0;
}
