/* Shared helpers for the C fixtures.  Header-only, no global state.
 *
 * CHECK(expr) aborts with a message when a pthread/sem call that must succeed
 * fails: in a correct fixture that would be a real bug, so it is reported as
 * an assertion, never silently ignored. */
#ifndef MCHECK_FIXTURE_COMMON_H
#define MCHECK_FIXTURE_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(expr)                                                           \
    do {                                                                      \
        int check_rc_ = (expr);                                               \
        if (check_rc_ != 0) {                                                 \
            fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", __FILE__,          \
                    __LINE__, #expr, check_rc_, strerror(check_rc_));         \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* Absolute CLOCK_REALTIME deadline `ms` milliseconds from now, as the
 * timed pthread/sem functions want it. */
static inline struct timespec deadline_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
