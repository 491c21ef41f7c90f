// cpp_abba — verdict: deadlock.
//
// Lock-order inversion with std::mutex and std::lock_guard (std::mutex is a
// pthread mutex underneath).  transfer(from, to) locks `from` then `to`;
// one thread transfers a->b while the other transfers b->a.  Deadlock when
// each thread takes its first mutex before the other takes its second
// (a switch at the second lock).  Otherwise both transfers complete.
// (The fix is std::scoped_lock(from.mu, to.mu).)
#include <cstdio>
#include <mutex>
#include <thread>

namespace {

struct Account {
    std::mutex mu;
    int balance = 100;
};

Account a, b;

void transfer(Account &from, Account &to, int amount) {
    std::lock_guard<std::mutex> g1(from.mu);
    std::lock_guard<std::mutex> g2(to.mu);
    from.balance -= amount;
    to.balance += amount;
}

}  // namespace

int main() {
    std::thread t1([] { transfer(a, b, 10); });
    std::thread t2([] { transfer(b, a, 20); });
    t1.join();
    t2.join();
    std::printf("a=%d b=%d\n", a.balance, b.balance);
    return 0;
}
