/* race_memcpy — verdict: data_race.
 *
 * Two threads copy into one shared buffer with memcpy and no lock.  The race is only in
 * libc's memcpy, which mcheck does not trace: it models the program's call (at the PLT
 * stub, recording the call's arguments in the access log without a stop) as a write of
 * the destination range and a read of the source.  The report names the buffer and the
 * line of each call, and the stack of each goes through `fill`. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char shared[256];
/* Volatile: the compiler cannot turn the copies into inline moves. */
static volatile size_t length = 200;

static void fill(const char *from)
{
    memcpy(shared, from, length);
}

static void *writer(void *arg)
{
    char local[256];
    memset(local, (int)(long)arg, sizeof local);
    fill(local);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, writer, (void *)'a');
    pthread_create(&b, NULL, writer, (void *)'b');
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%c\n", shared[0]);
    return 0;
}
