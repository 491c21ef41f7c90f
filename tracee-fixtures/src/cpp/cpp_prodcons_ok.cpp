// cpp_prodcons_ok — verdict: none.
//
// C++ producer/consumer with std::thread, std::mutex, std::unique_lock,
// std::lock_guard and std::condition_variable.  A bounded queue (capacity 2)
// carries 5 items from one producer to two consumers.  Every wait uses the
// predicate overload of condition_variable::wait, so notifications sent
// before a consumer waits are never lost; end of stream is a `done` flag
// followed by notify_all.  main checks the sum of consumed items.
#include <cassert>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

namespace {

constexpr int kCapacity = 2;
constexpr int kItems = 5;

std::mutex mu;
std::condition_variable not_empty;
std::condition_variable not_full;
std::deque<int> queue;
bool done = false;
int consumed_sum = 0;

void producer() {
    for (int i = 1; i <= kItems; ++i) {
        std::unique_lock<std::mutex> lk(mu);
        not_full.wait(lk, [] { return queue.size() < kCapacity; });
        queue.push_back(i);
        not_empty.notify_one();
    }
    {
        std::lock_guard<std::mutex> lk(mu);
        done = true;
    }
    not_empty.notify_all();
}

void consumer() {
    for (;;) {
        std::unique_lock<std::mutex> lk(mu);
        not_empty.wait(lk, [] { return !queue.empty() || done; });
        if (queue.empty())
            return;  // done and drained
        consumed_sum += queue.front();
        queue.pop_front();
        not_full.notify_one();
    }
}

}  // namespace

int main() {
    std::thread c1(consumer);
    std::thread p(producer);
    std::thread c2(consumer);
    p.join();
    c1.join();
    c2.join();
    assert(consumed_sum == kItems * (kItems + 1) / 2);
    std::printf("sum = %d\n", consumed_sum);
    return 0;
}
