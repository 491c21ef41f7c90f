// race_virtual_throw_ok — verdict: none.
//
// Two threads make virtual calls (`call *0x10(%rax)` at -O1: an indirect call through
// memory, which mcheck patches to record the vtable slot it reads) whose callee sometimes
// throws; the caller catches, and adds to a total under a mutex.  The exception unwinds
// from the callee into the caller through the return address the call pushed: it must be
// the original one (the caller's code), never mcheck's generated code, or the unwinder
// finds no frame information and the program terminates.
#include <cassert>
#include <mutex>
#include <stdexcept>
#include <thread>

struct Shape {
    virtual ~Shape() = default;
    virtual int area(int x) const = 0;
};

struct Square : Shape {
    int area(int x) const override
    {
        if (x % 3 == 2)
            throw std::runtime_error("no square of this side");
        return x * x;
    }
};

static std::mutex m;
static long total;

static void worker(const Shape *s)
{
    for (int i = 0; i < 6; i++) {
        try {
            int a = s->area(i);
            std::lock_guard<std::mutex> g(m);
            total += a;
        } catch (const std::runtime_error &) {
            std::lock_guard<std::mutex> g(m);
            total += 100;
        }
    }
}

int main()
{
    Square sq;
    const Shape *volatile p = &sq;
    std::thread a(worker, p), b(worker, p);
    a.join();
    b.join();
    // Sides 0, 1, 3, 4 give 0 + 1 + 9 + 16; sides 2 and 5 throw (100 each); two threads.
    assert(total == 2 * (0 + 1 + 9 + 16 + 200));
    return 0;
}
