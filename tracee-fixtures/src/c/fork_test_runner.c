/* fork_test_runner — verdict: data_race (none with --correct-only).
 *
 * A test runner as test suites have them: each test runs in a process of its
 * own, forked by the runner, which waits for it and counts failures.  Every
 * test starts two threads.  `locked_counter` and `condvar_handoff` are
 * correct; `racy_counter` increments a global with no lock (a lost update on
 * some schedules).  mcheck must follow every forked test process and check
 * its threads: the race is in a child, never in the runner itself.
 *
 *   fork_test_runner [-j] [--correct-only]
 *     -j              fork every test first, then wait for them all (the
 *                     tests' processes run at once, like `make -j`); their
 *                     mutexes and globals are at the same addresses in every
 *                     child, yet each child has its own copy
 *     --correct-only  skip racy_counter */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long counter;
static int ready;

static void *locked_bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static int locked_counter(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, locked_bump, NULL);
    pthread_create(&b, NULL, locked_bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return counter == 4 ? 0 : 1;
}

static void *producer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    counter = 42;
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

static int condvar_handoff(void)
{
    pthread_t p;
    pthread_create(&p, NULL, producer, NULL);
    pthread_mutex_lock(&m);
    while (!ready)
        pthread_cond_wait(&cv, &m);
    long seen = counter;
    pthread_mutex_unlock(&m);
    pthread_join(p, NULL);
    return seen == 42 ? 0 : 1;
}

static void *racy_bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        counter++; /* no lock: the bug */
        sched_yield();
    }
    return NULL;
}

static int racy_counter(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, racy_bump, NULL);
    pthread_create(&b, NULL, racy_bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return counter == 4 ? 0 : 1;
}

struct test {
    const char *name;
    int (*run)(void);
    int racy;
};

static const struct test tests[] = {
    {"locked_counter", locked_counter, 0},
    {"condvar_handoff", condvar_handoff, 0},
    {"racy_counter", racy_counter, 1},
};
#define NTESTS (int)(sizeof tests / sizeof tests[0])

/* Waits for test process `pid`; 1 when the test failed. */
static int failed(const char *name, pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    return !ok;
}

int main(int argc, char **argv)
{
    int parallel = 0, correct_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-j") == 0)
            parallel = 1;
        else if (strcmp(argv[i], "--correct-only") == 0)
            correct_only = 1;
        else {
            fprintf(stderr, "usage: %s [-j] [--correct-only]\n", argv[0]);
            return 2;
        }
    }
    pid_t pids[NTESTS] = {0};
    int failures = 0;
    for (int i = 0; i < NTESTS; i++) {
        if (correct_only && tests[i].racy)
            continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0)
            _exit(tests[i].run());
        pids[i] = pid;
        if (!parallel)
            failures += failed(tests[i].name, pid);
    }
    for (int i = 0; parallel && i < NTESTS; i++)
        if (pids[i] != 0)
            failures += failed(tests[i].name, pids[i]);
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
