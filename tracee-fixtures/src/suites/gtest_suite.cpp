// gtest_suite — a GoogleTest binary for `mcheck test` (tests/it/test_suites.rs); linked with
// -lgtest -lgtest_main -pthread (Debian's libgtest-dev).
//
// - Counter.RacyIncrement — verdict: data_race.  Two std::threads increment a plain int
//   without a lock; natively the threads rarely overlap and the expectation holds.
// - Counter.LockedIncrement — verdict: none.  The same under a std::mutex.
// - Queue.CondvarHandoff — verdict: none.  A producer hands three values to a consumer
//   through a mutex and a condition variable.
// - Counter.DISABLED_Slow — disabled: skipped unless --include-ignored.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace {

int plain_counter = 0;

void bump_plain() {
  int v = plain_counter;
  plain_counter = v + 1;
}

}  // namespace

TEST(Counter, RacyIncrement) {
  plain_counter = 0;
  std::thread a(bump_plain), b(bump_plain);
  a.join();
  b.join();
  EXPECT_GE(plain_counter, 1);
}

TEST(Counter, LockedIncrement) {
  int counter = 0;
  std::mutex m;
  auto bump = [&] {
    std::lock_guard<std::mutex> g(m);
    ++counter;
  };
  std::thread a(bump), b(bump);
  a.join();
  b.join();
  EXPECT_EQ(counter, 2);
}

TEST(Queue, CondvarHandoff) {
  std::mutex m;
  std::condition_variable cv;
  std::optional<int> slot;
  int sum = 0;
  std::thread consumer([&] {
    for (int i = 0; i < 3; ++i) {
      std::unique_lock<std::mutex> g(m);
      cv.wait(g, [&] { return slot.has_value(); });
      sum += *slot;
      slot.reset();
      cv.notify_all();
    }
  });
  for (int v = 1; v <= 3; ++v) {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return !slot.has_value(); });
    slot = v;
    cv.notify_all();
  }
  consumer.join();
  EXPECT_EQ(sum, 6);
}

TEST(Counter, DISABLED_Slow) {
  plain_counter = 0;
  std::thread a(bump_plain), b(bump_plain);
  a.join();
  b.join();
  EXPECT_GE(plain_counter, 1);
}
