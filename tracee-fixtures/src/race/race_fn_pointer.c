/* race_fn_pointer — verdict: data_race.
 *
 * Two threads bump a shared counter without a lock, inside a function they reach through a
 * table of function pointers (`call *8(%rax)`: an indirect call through memory, the shape
 * of C++ virtual calls and CPython's slot calls) and through a global function pointer
 * (`call *hook(%rip)`).  mcheck patches those calls (it records the pointer they read),
 * so the callee must still see the original return address: both stacks of the report go
 * through `worker`, the caller. */
#include <pthread.h>
#include <stdio.h>

struct ops {
    void (*reset)(long *);
    void (*bump)(long *);
};

static long counter;
static long calls;

static void bump(long *c) { *c = *c + 1; }
static void reset(long *c) { (void)c; }
static void note(void) { __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED); }

static const struct ops table = {reset, bump};
/* Volatile: the compiler cannot see through them, so the calls stay indirect. */
static const struct ops *volatile ops = &table;
static void (*volatile hook)(void) = note;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        hook();
        ops->bump(&counter);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter = %ld after %ld calls\n", counter, calls);
    return 0;
}
