// lock_order_cpp_deep — verdict: lock_order.
//
// The deep lock-order inversion of lock_order_deep.c with std::mutex and
// std::lock_guard: one thread takes b then a at once; another takes a then b
// only after thousands of rounds of work shared with a third thread.  The
// deadlock needs one preemption at one point among thousands; the lock-order
// graph of any execution shows the inversion.
#include <cstdio>
#include <mutex>
#include <thread>

static std::mutex a, b, work;
static long counter; // under work
static long pairs;   // under a and b
static const int rounds = 2000;

int main()
{
    std::thread deep([] {
        for (int i = 0; i < rounds; i++) {
            std::lock_guard<std::mutex> w(work);
            counter++;
        }
        std::lock_guard<std::mutex> la(a);
        std::lock_guard<std::mutex> lb(b);
        pairs++;
    });
    std::thread busy([] {
        for (int i = 0; i < rounds; i++) {
            std::lock_guard<std::mutex> w(work);
            counter++;
        }
    });
    std::thread early([] {
        std::lock_guard<std::mutex> lb(b);
        std::lock_guard<std::mutex> la(a);
        pairs++;
    });
    deep.join();
    busy.join();
    early.join();
    std::printf("counter = %ld, pairs = %ld\n", counter, pairs);
    return 0;
}
