/* race_twostage — verdict: data_race, then the assertion it causes (reported by default).
 *
 * The `twostage` shape: the writer publishes `data1` under a lock (stage one), then sets
 * `data2 = data1 + 1` after the unlock without one (stage two). The reader takes the lock,
 * reads `data1`, and when it is set reads `data2` and asserts the two stages are
 * consistent. It fails when the reader runs between the stages: it sees `data1` set and
 * `data2` not yet. Stage two runs within the writer's step after its unlock, so a search
 * that schedules at synchronisation only never separates the stages; `data2` is accessed
 * without synchronisation, a race, and refinement makes its accesses scheduling points.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>

static volatile int data1, data2;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    data1 = 1;
    pthread_mutex_unlock(&m);
    data2 = data1 + 1;
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    int t1 = data1;
    pthread_mutex_unlock(&m);
    if (t1 == 0)
        return NULL;
    int t2 = data2;
    assert(t2 == t1 + 1 && "the reader ran between the two stages");
    return NULL;
}

int main(void)
{
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    return 0;
}
