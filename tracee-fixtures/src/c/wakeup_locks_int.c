/* wakeup_locks_int — verdict: none.  The 4-byte twin of wakeup_locks.c: `int` x and y side
 * by side in one 8-byte word. Byte-exact dependency gives wakeup_locks' counts: 4 traces,
 * 45 executions without reduction (tests/it/strategies.rs).
 */
#define WORD_T int
#include "wakeup_locks.c"
