/* dlopen_race — verdict: data_race.
 *
 * main loads libracy_plugin.so (next to the executable) with dlopen after startup, then two
 * threads call its plugin_hit(), which increments a global of the plugin without any
 * synchronisation. The race is inside code that was not mapped when the program started:
 * mcheck must instrument libraries as the dynamic loader maps them (a breakpoint on
 * ld.so's _dl_debug_state, the r_debug rendezvous), or it would see nothing.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void (*hit)(void);

static void *worker(void *arg)
{
    (void)arg;
    hit();
    return NULL;
}

int main(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0)
        return 2;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    strcpy(slash + 1, "libracy_plugin.so");
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    hit = (void (*)(void))dlsym(lib, "plugin_hit");
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
