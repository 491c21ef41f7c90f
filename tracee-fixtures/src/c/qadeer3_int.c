/* qadeer3_int — verdict: none.  The 4-byte twin of qadeer3.c: `uint32_t` counters side by
 * side (incremented by `lock add` of 4 bytes). Byte-exact dependency gives qadeer3's counts:
 * 6 traces, 126 executions without reduction (tests/it/strategies.rs).
 */
#include <stdint.h>
#define COUNTER_T uint32_t
#include "qadeer3.c"
