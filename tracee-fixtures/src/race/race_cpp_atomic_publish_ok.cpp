// race_cpp_atomic_publish_ok — verdict: none.
//
// C++ std::atomic publication.  Two std::threads bump a global
// std::atomic<int> `hits` (fetch_add, LOCK XADD).  The producer writes the
// plain global `payload` and then does ready.store(true, release) on a
// global std::atomic<bool>; the consumer polls ready.load(acquire)
// (std::this_thread::yield in between, at most 8 times so that no schedule
// spins for long) and reads `payload` only if it saw `ready` set.
//
// On x86 the release store and the acquire load are plain MOVs; they are
// atomic accesses because `ready` is std::atomic<bool> in DWARF.  The
// release→acquire pair orders the write of `payload` before its read, and
// `hits` is only touched atomically (main reads it after joining), so there
// is no data race on any schedule.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

std::atomic<int> hits{0};
std::atomic<bool> ready{false};
int payload = 0;

void producer() {
    for (int i = 0; i < 3; ++i) {
        hits.fetch_add(1);
        std::this_thread::yield();
    }
    payload = 42;
    ready.store(true, std::memory_order_release);
}

void consumer() {
    hits.fetch_add(1, std::memory_order_relaxed);
    bool seen = false;
    for (int polls = 0; polls < 8; ++polls) {
        if ((seen = ready.load(std::memory_order_acquire)))
            break;
        std::this_thread::yield();
    }
    if (seen && payload != 42) {
        std::fprintf(stderr, "consumer saw payload %d\n", payload);
        std::abort();
    }
}

}  // namespace

int main() {
    std::thread c(consumer);
    std::thread p(producer);
    p.join();
    c.join();
    int h = hits.load();
    if (h != 4) {
        std::fprintf(stderr, "hits = %d\n", h);
        return 1;
    }
    std::printf("payload = %d, hits = %d\n", payload, h);
    return 0;
}
