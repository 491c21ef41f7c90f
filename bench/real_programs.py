#!/usr/bin/env python3
"""Real programs under mcheck, side by side with native runs and helgrind.

    python3 bench/real_programs.py            # also run by `make bench` (bench/run.sh)

For each of Debian's multi-threaded tools (installed by `make deps`) and two Python
scripts, in one run and with medians over --reps repetitions:

  native        wall time of the command run natively
  mcheck        wall time of `mcheck --jobs 1 --max-executions 1 --quiet-program -- CMD`
                (the default race detection; one execution), and what it reported
                (nothing, but for GNU sort: the real data races of its merge tree, which
                helgrind and DRD report too)
  mcheck 5      the same with --max-executions 5, per execution (fork snapshots at work)
  helgrind      wall time of `valgrind --tool=helgrind -q CMD` (one run)
  memory        mcheck's own peak resident memory (`/usr/bin/time -f %M`), without its
                tracees
  output        whether the files the command wrote are byte-identical to a native run's

Prints a markdown table and writes target/real-programs-results.json. Exit status 0
whatever the figures; 2 when the harness cannot run (no mcheck binary, a tool missing).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench import HarnessError, machine_info, median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCHECK = os.path.join(ROOT, "target", "release", "mcheck")
PYTHON = "/usr/bin/python3"

LOST_UPDATE_FREE = """
import threading
counter = 0
lock = threading.Lock()
def work():
    global counter
    for _ in range(2000):
        with lock:
            counter += 1
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
assert counter == 8000
"""


def programs(tmp):
    """(name, command, files it writes) for each program; inputs are made in `tmp`."""
    data = os.path.join(tmp, "input.txt")
    with open(data, "w") as f:
        for i in range(60000):
            f.write("line %d of the input, %x\n" % ((i * 7919) % 60000, i * 31))
    # GNU sort merges with threads only above 128 Ki lines.
    lines = os.path.join(tmp, "lines.txt")
    with open(lines, "w") as f:
        for i in range(200000):
            f.write("%08x line %d\n" % ((i * 2654435761) % (1 << 32), i))
    script = os.path.join(tmp, "threads.py")
    with open(script, "w") as f:
        f.write(LOST_UPDATE_FREE)
    out = lambda name: os.path.join(tmp, name)
    return [
        ("zstd -T4", ["zstd", "-T4", "-q", "-f", data, "-o", out("o.zst")], [out("o.zst")]),
        ("pigz -p 4", ["pigz", "-p", "4", "-k", "-f", "-c", data], []),
        ("xz -T2", ["xz", "-T2", "-k", "-f", "-c", data], []),
        ("sort --parallel=4", ["sort", "--parallel=4", "-o", out("sorted"), lines],
         [out("sorted")]),
        ("python3 -c pass", [PYTHON, "-c", "pass"], []),
        ("python3 threads.py", [PYTHON, script], []),
        ("pbzip2 -p4", ["pbzip2", "-p4", "-k", "-f", "-c", data], []),
    ]


def wall(cmd, cwd, timeout=900, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env)
    return time.monotonic() - t0, p


def digest(paths, stdout):
    import hashlib
    h = hashlib.sha256(stdout)
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def measure(name, cmd, outputs, tmp, opts):
    row = {"program": name, "command": " ".join(cmd)}
    natives = []
    for _ in range(opts.reps):
        t, p = wall(cmd, tmp)
        natives.append(t)
    row["native_s"] = median(natives)
    native_digest = digest(outputs, p.stdout)
    runs, execs5 = [], []
    findings, same = [], True
    for _ in range(opts.reps):
        report = os.path.join(tmp, "report.json")
        timed = ["/usr/bin/time", "-f", "%M", MCHECK, "--jobs", "1", "--max-executions", "1",
                 "--quiet-program", "--progress", "never", "--out", os.path.join(tmp, "out"),
                 "--json", report, "--"] + cmd
        t, p = wall(timed, tmp)
        runs.append(t)
        try:
            rep = json.load(open(report))
        except (OSError, ValueError):
            raise HarnessError("%s: mcheck wrote no report: %s" % (name, p.stderr[-2000:]))
        findings += [f["kind"] for f in rep["findings"]]
        row["peak_memory_mib"] = int(p.stderr.decode().strip().splitlines()[-1]) / 1024
        row["accesses"] = rep["access_recording"]["accesses"]
        row["accesses_at_breakpoints"] = rep["access_recording"]["accesses_at_breakpoints"]
        # --quiet-program hides stdout: compare files only, and stdout through a run below.
        same = same and all(os.path.exists(o) for o in outputs)
    row["mcheck_s"] = median(runs)
    t, p = wall([MCHECK, "--jobs", "1", "--max-executions", "5", "--progress", "never",
                 "--out", os.path.join(tmp, "out"), "--"] + cmd, tmp)
    row["mcheck_per_execution_of_5_s"] = t / 5
    # Output: one more mcheck execution, its stdout and files against the native run's.
    t, p = wall([MCHECK, "--jobs", "1", "--max-executions", "1", "--progress", "never",
                 "--out", os.path.join(tmp, "out"), "--"] + cmd, tmp)
    row["output_identical"] = digest(outputs, p.stdout) == native_digest
    row["findings"] = sorted(set(findings))
    if shutil.which("valgrind") and not opts.no_helgrind:
        t, p = wall(["valgrind", "--tool=helgrind", "-q"] + cmd, tmp)
        row["helgrind_s"] = t
    return row


def print_rows(rows):
    print("### Real programs (`python3 bench/real_programs.py`)")
    print()
    print("| program | native | mcheck, 1 execution | per execution of 5 | helgrind | mcheck / helgrind "
          "| mcheck memory | accesses (at breakpoints) | findings | output identical |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        hg = r.get("helgrind_s")
        ratio = "%.2f×" % (r["mcheck_s"] / hg) if hg else "—"
        print("| %s | %.3f s | %.2f s | %.2f s | %s | %s | %.0f MiB | %d (%d) | %s | %s |" % (
            r["program"], r["native_s"], r["mcheck_s"], r["mcheck_per_execution_of_5_s"],
            "%.2f s" % hg if hg else "—", ratio, r["peak_memory_mib"], r["accesses"],
            r["accesses_at_breakpoints"], ", ".join(r["findings"]) or "none",
            "yes" if r["output_identical"] else "NO"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="repetitions (medians)")
    ap.add_argument("--only", default="", help="comma-separated program names to run")
    ap.add_argument("--no-helgrind", action="store_true", help="skip helgrind")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "real-programs-results.json"))
    opts = ap.parse_args()
    if not os.access(MCHECK, os.X_OK):
        print("bench: %s is missing: run 'make bench'" % MCHECK, file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="mcheck-real-") as tmp:
        for name, cmd, outputs in programs(tmp):
            if opts.only and name not in opts.only.split(","):
                continue
            if not shutil.which(cmd[0]):
                print("bench: %s is not installed (make deps)" % cmd[0], file=sys.stderr)
                return 2
            print("bench: %s" % name, file=sys.stderr)
            try:
                rows.append(measure(name, cmd, outputs, tmp, opts))
            except (HarnessError, subprocess.TimeoutExpired) as e:
                print("bench: %s: %s" % (name, e), file=sys.stderr)
                return 2
    print_rows(rows)
    os.makedirs(os.path.dirname(opts.json), exist_ok=True)
    with open(opts.json, "w") as f:
        json.dump({"machine": machine_info(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
