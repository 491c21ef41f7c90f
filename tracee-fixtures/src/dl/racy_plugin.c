/* racy_plugin — a plugin loaded with dlopen by dlopen_race: its `plugin_hits` counter is
 * incremented without synchronisation. Only visible to mcheck if libraries loaded after
 * startup are instrumented (the r_debug rendezvous). */
long plugin_hits;

void plugin_hit(void)
{
    plugin_hits = plugin_hits + 1;
}
