/* qadeer_int — verdict: none.  The 4-byte twin of qadeer.c: the same program with C11
 * `atomic_int` counters, three 4-byte globals side by side (x and y share an 8-byte word
 * with each other or with g). Dependency is byte-exact, so partial-order reduction must count
 * as with `long` counters: 6 traces (70 executions without reduction); see
 * tests/it/strategies.rs.
 */
#include <stdatomic.h>
#define COUNTER_T atomic_int
#include "qadeer.c"
