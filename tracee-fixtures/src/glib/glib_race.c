/* glib_race — verdict: data_race.  The same program as glib_mutex_ok, but one thread
 * forgets the lock: its increments race with the other thread's, which GLib's mutex
 * orders only with other locked sections.
 */
#include <glib.h>

static GMutex lock;
static long counter;

static gpointer locked(gpointer arg)
{
    for (int i = 0; i < 50; i++) {
        g_mutex_lock(&lock);
        counter++;
        g_mutex_unlock(&lock);
    }
    return arg;
}

static gpointer unlocked(gpointer arg)
{
    for (int i = 0; i < 50; i++)
        counter++;
    return arg;
}

int main(void)
{
    GThread *a = g_thread_new("a", locked, NULL);
    GThread *b = g_thread_new("b", unlocked, NULL);
    g_thread_join(a);
    g_thread_join(b);
    return 0;
}
