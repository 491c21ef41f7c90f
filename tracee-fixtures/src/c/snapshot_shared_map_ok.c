/* A MAP_SHARED counter created before the first thread: a fork copy would share it with its
 * template, so the second execution would start from the first one's count. mcheck must
 * refuse the snapshot (and say why). Correct: the count is 2 at the end of every execution. */
#include <pthread.h>
#include <sys/mman.h>

#include "common.h"

static int *counter;

static void *bump(void *arg)
{
    (void)arg;
    __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void)
{
    counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (counter == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, bump, NULL));
    CHECK(pthread_create(&b, NULL, bump, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    if (*counter != 2) {
        fprintf(stderr, "counter is %d, not 2: the mapping was shared\n", *counter);
        abort();
    }
    return 0;
}
