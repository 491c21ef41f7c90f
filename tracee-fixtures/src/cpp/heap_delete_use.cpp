// A delete-then-use with std::thread: a cache entry is evicted (deleted) by one thread
// while another still holds the pointer it looked up. Each map operation is under the
// mutex; the lookup's result is used after the lock is released.
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

static Entry *lookup(int key) {
    std::lock_guard<std::mutex> g(m);
    auto it = cache.find(key);
    return it == cache.end() ? nullptr : it->second;
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
    std::thread user([] {
        Entry *e = lookup(1);
        if (e) {
            std::lock_guard<std::mutex> g(m);
            e->hits++; // use after delete when the evictor ran between lookup and here
        }
    });
    std::thread evictor([] { evict(1); });
    user.join();
    evictor.join();
    std::puts("done");
    return 0;
}
