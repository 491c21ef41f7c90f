# Three threads each do `v = box.value; box.value = f(v)` 2,000 times, without a lock.
# CPython switches threads only when a waiting thread's 5 ms timed wait on the GIL runs
# out and the holder sees the drop request between two bytecodes (here: on entering f,
# between the read and the write); natively each thread is done long before that, and
# the assertion holds (0 failures in 30 native runs).
import sys
import threading

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


class Box:
    value = 0


box = Box()


def f(x):
    return x + 1


def work():
    for _ in range(N):
        v = box.value
        box.value = f(v)


threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert box.value == 3 * N, f"lost updates: {box.value}, expected {3 * N}"
