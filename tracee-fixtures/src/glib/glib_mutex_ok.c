/* glib_mutex_ok — verdict: none.  A counter guarded by a GLib mutex.
 *
 * Two GLib threads increment a shared counter 50 times each inside g_mutex_lock and
 * g_mutex_unlock.  GLib's mutex is its own: an atomic compare-and-swap on an int, and
 * futex calls only when contended, never pthread_mutex_lock.  mcheck must see the
 * ordering those atomics give (they are in libglib, a system library) and report no race.
 */
#include <glib.h>

static GMutex lock;
static long counter;

static gpointer work(gpointer arg)
{
    for (int i = 0; i < 50; i++) {
        g_mutex_lock(&lock);
        counter++;
        g_mutex_unlock(&lock);
    }
    return arg;
}

int main(void)
{
    GThread *a = g_thread_new("a", work, NULL);
    GThread *b = g_thread_new("b", work, NULL);
    g_thread_join(a);
    g_thread_join(b);
    return counter == 100 ? 0 : 1;
}
