/* gil_update_ok — verdict: none.
 *
 * gil_lost_update's lock, with the holder polling the drop request only
 * between whole updates (before the read, never between the read and the
 * write): a timeout can make it hand the lock over at any poll, and no update
 * is lost.  A checker that lets timeouts fire at the polls must find nothing
 * here (no lost update, no deadlock in the hand-over). */
#define POLL_BETWEEN_READ_AND_WRITE 0
#include "gil_lost_update.c"
