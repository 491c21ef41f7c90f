/* Shared by the bench_* fixtures: the loop count from argv[1]. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>

/* N from argv[1] (default: dflt); exits with status 2 on a bad argument. */
static long bench_count(int argc, char **argv, long dflt)
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

#endif
