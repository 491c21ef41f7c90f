import sys
import threading

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
counter = 0
calls = 0
calls_lock = threading.Lock()
start = threading.Barrier(4)

def f(x):
    global calls
    with calls_lock:
        calls += 1
    return x + 1

def work():
    global counter
    start.wait()
    for _ in range(N):
        counter = f(counter)

threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert counter == 4 * N, f"lost updates: counter is {counter}, expected {4 * N}"
