// stack_lambda_race — verdict: data_race.
//
// A std::thread runs a lambda that captures main's local `hits` by
// reference and increments it; main increments the same local through its
// own frame before joining.  The two read-modify-writes are unordered: a data
// race on a stack variable of the parent (TSan reports it).  The lambda goes
// through the captured reference (a pointer); main's accesses are to its own
// stack slot, which mcheck once left out as private to its frame.
#include <cstdio>
#include <thread>

int main()
{
    int hits = 0;
    std::thread worker([&hits] { hits += 1; });
    hits += 1;
    worker.join();
    std::printf("done\n");
    return 0;
}
