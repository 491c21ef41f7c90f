// The correct twin of heap_delete_use: the entry is used inside the same critical section
// as its lookup, so the evictor cannot delete it in between.
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>

struct Entry {
    std::string value;
    int hits = 0;
};

static std::mutex m;
static std::map<int, Entry *> cache;

static void touch(int key) {
    std::lock_guard<std::mutex> g(m);
    auto it = cache.find(key);
    if (it != cache.end())
        it->second->hits++;
}

static void evict(int key) {
    std::lock_guard<std::mutex> g(m);
    auto it = cache.find(key);
    if (it != cache.end()) {
        delete it->second;
        cache.erase(it);
    }
}

int main() {
    cache[1] = new Entry{"one", 0};
    std::thread user([] { touch(1); });
    std::thread evictor([] { evict(1); });
    user.join();
    evictor.join();
    std::puts("done");
    return 0;
}
