/* Shared by the bench_* fixtures: the loop count from argv[1], and optional
 * timing marks.
 *
 * When the environment variable BENCH_MARK_FD names an open file descriptor
 * (bench/bench.py passes the write end of a pipe), bench_mark() writes one
 * byte to it just before and just after the measured loop; the harness
 * timestamps their arrival.  This times the loop itself, independently of
 * how long mcheck takes to start, exec the program, and notice that it has
 * ended.  write(2) is not a scheduling point.  Without the variable the
 * marks do nothing. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* N from argv[1] (default: dflt); exits with status 2 on a bad argument. */
static inline long bench_count(int argc, char **argv, long dflt)
{
    if (argc < 2)
        return dflt;
    char *end;
    long n = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || n < 0) {
        fprintf(stderr, "usage: %s [N >= 0]\n", argv[0]);
        exit(2);
    }
    return n;
}

/* Writes byte c to $BENCH_MARK_FD, if set. */
static inline void bench_mark(char c)
{
    static int fd = -2;
    if (fd == -2) {
        const char *s = getenv("BENCH_MARK_FD");
        fd = s && *s ? atoi(s) : -1;
    }
    if (fd >= 0 && write(fd, &c, 1) != 1)
        fd = -1;
}

#endif
