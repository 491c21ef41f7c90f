/* atomic_pair_int K — verdict: none.  The 4-byte twin of atomic_pair.c: an `int` counter
 * (`lock xadd` of 4 bytes) next to the 4-byte `k`. Same counts as atomic_pair
 * (tests/it/strategies.rs).
 */
#define COUNTER_T int
#include "atomic_pair.c"
