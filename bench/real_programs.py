#!/usr/bin/env python3
"""Real programs under mcheck, side by side with native runs and helgrind.

    python3 bench/real_programs.py            # also run by `make bench` (bench/run.sh)
    python3 bench/real_programs.py --only "git grep,sqlite3" --execs 5

For each of Debian's multi-threaded programs (installed by `make deps` and `make bench`:
compressors, sort, git, two Rust CLIs, sqlite3, two interpreters, an OpenMP program, a
media encoder, a JIT), in one run:

  native          median wall time of the command run natively (--reps runs)
  per execution   wall time of `mcheck --jobs 1 --max-executions N --quiet-program -- CMD`
                  divided by N (N = --execs, 20 by default): the default race detection,
                  fork snapshots at work
  no races        the same with --no-races
  no heap         the same with --no-heap-checks (the heap oracle's cost: the default minus this)
  first           wall time of one execution alone (launch, instrumentation, the run)
  helgrind        wall time of `valgrind --tool=helgrind -q CMD` (one run)
  decisions       scheduling decisions per execution (the report's `decisions`)
  accesses        memory accesses recorded per execution (at breakpoints in brackets)
  per decision    mcheck's time per execution over its decisions, in µs
  memory          mcheck's own peak resident memory (`/usr/bin/time -f %M`)
  findings        the kinds mcheck reported, and whether executions were cut short
  output          whether stdout and the files the command wrote are byte-identical to a
                  native run's

and the targets of issue 28: per execution ≤ helgrind's one run and ≤ max(10 × native,
native + 0.1 s). Prints a markdown table and writes target/real-programs-results.json.
Exit status 0 whatever the figures; 2 when the harness cannot run (no mcheck binary, a
program missing).
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

PY_LOCKED = """
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

PERL_THREADS = """
use threads; use threads::shared;
my $n :shared = 0;
my @t = map { threads->create(sub { for (1..200) { lock($n); $n++ } }) } 1..4;
$_->join for @t;
print "$n\\n";
"""

NODE_WORKER = """
const { Worker, isMainThread, parentPort } = require('worker_threads');
if (isMainThread) {
  const w = new Worker(__filename);
  w.on('message', (m) => { console.log('sum', m); });
} else {
  let s = 0; for (let i = 0; i < 1000; i++) s += i; parentPort.postMessage(s);
}
"""


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=True, **kw)


def make_inputs(tmp):
    """The inputs of the programs, made once in `tmp`."""
    data = os.path.join(tmp, "input.txt")
    with open(data, "w") as f:
        for i in range(60000):
            f.write("line %d of the input, %x\n" % ((i * 7919) % 60000, i * 31))
    # GNU sort merges with threads only above 128 Ki lines.
    with open(os.path.join(tmp, "lines.txt"), "w") as f:
        for i in range(200000):
            f.write("%08x line %d\n" % ((i * 2654435761) % (1 << 32), i))
    for name, text in [("threads.py", PY_LOCKED), ("threads.pl", PERL_THREADS),
                       ("worker.js", NODE_WORKER)]:
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    # A small git repository and a tree of files for git grep, fd and ripgrep.
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    for d in range(8):
        sub = os.path.join(repo, "dir%d" % d)
        os.makedirs(sub)
        for k in range(16):
            with open(os.path.join(sub, "file%d.c" % k), "w") as f:
                for i in range(40):
                    f.write("int value_%d_%d = %d; /* foo %d */\n" % (d, k, i, i % 7))
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    run(["/usr/bin/git", "init", "-q"], repo, env=env)
    run(["/usr/bin/git", "add", "."], repo, env=env)
    run(["/usr/bin/git", "commit", "-q", "-m", "files"], repo, env=env)
    # sqlite3: a table of 50,000 rows, copied afresh before every run (the index changes it).
    db = os.path.join(tmp, "table.db")
    import sqlite3
    c = sqlite3.connect(db)
    c.execute("create table t(a, b)")
    c.executemany("insert into t values(?, ?)",
                  ((i * 7919 % 50000, "x%d" % i) for i in range(50000)))
    c.commit()
    c.close()
    # A one-second clip for ffmpeg, and an image for ImageMagick (its OpenMP resize).
    # A tool that cannot make its input (a stand-in `convert` earlier in PATH) leaves it
    # missing: that program's own row fails, the others are measured.
    inputs = [
        ("ffmpeg", ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc=duration=1:size=320x240:rate=25", "-pix_fmt", "yuv420p", "-y",
                    os.path.join(tmp, "clip.y4m")]),
        ("convert", ["convert", "-size", "800x600", "plasma:fractal", os.path.join(tmp, "image.png")]),
    ]
    for tool, cmd in inputs:
        if not shutil.which(tool):
            continue
        try:
            run(cmd, tmp)
        except subprocess.CalledProcessError as e:
            print("bench: %s could not make its input: %s" % (tool, e), file=sys.stderr)


def programs(tmp):
    """(name, command, files it writes, a command that resets its input) of each program."""
    data = os.path.join(tmp, "input.txt")
    out = lambda name: os.path.join(tmp, name)
    db, db0 = out("work.db"), out("table.db")
    repo = out("repo")
    return [
        ("zstd -T4", ["zstd", "-T4", "-q", "-f", data, "-o", out("o.zst")], [out("o.zst")], None),
        ("pigz -p 4", ["pigz", "-p", "4", "-k", "-f", "-c", data], [], None),
        ("xz -T2", ["xz", "-T2", "-k", "-f", "-c", data], [], None),
        ("sort --parallel=4", ["sort", "--parallel=4", "-o", out("sorted"), out("lines.txt")],
         [out("sorted")], None),
        ("pbzip2 -p4", ["pbzip2", "-p4", "-k", "-f", "-c", data], [], None),
        ("lbzip2 -n4", ["lbzip2", "-n", "4", "-k", "-f", "-c", data], [], None),
        ("plzip -n4", ["plzip", "-n", "4", "-k", "-f", "-c", data], [], None),
        ("7z -mmt4", ["7z", "a", "-mmt4", "-bd", "-y", out("a.7z"), data], [], out("a.7z")),
        ("python3 threads", [PYTHON, out("threads.py")], [], None),
        ("perl threads", ["perl", out("threads.pl")], [], None),
        ("git grep --threads=4", ["/usr/bin/git", "-C", repo, "grep", "--threads=4", "-c", "foo 3"],
         [], None),
        ("fdfind -j4", ["fdfind", "-j", "4", "--base-directory", repo, "file1"], [], None),
        ("rg -j4", ["rg", "-j", "4", "-c", "foo 3", repo], [], None),
        ("sqlite3 threads=4", ["sqlite3", db, "PRAGMA threads=4; CREATE INDEX i ON t(a, b);"],
         [], ("copy", db0, db)),
        ("convert (OpenMP)", ["convert", out("image.png"), "-resize", "50%", out("small.png")],
         [out("small.png")], None),
        # `-threads` after `-i` is the encoder's (before it, the raw decoder's); `-f mpeg4`
        # is no muxer in Debian 12's ffmpeg (it exited 1, and mcheck said so).
        ("ffmpeg -threads 4", ["ffmpeg", "-loglevel", "error", "-i", out("clip.y4m"),
                               "-threads", "4", "-c:v", "mpeg4", "-f", "mp4", "-y",
                               out("clip.mp4")],
         [out("clip.mp4")], None),
        ("node worker", ["node", out("worker.js")], [], None),
    ]


def reset(how):
    """Puts a program's input back (a database the program changes)."""
    if how is None:
        return
    if isinstance(how, tuple) and how[0] == "copy":
        shutil.copyfile(how[1], how[2])
    elif isinstance(how, str) and os.path.exists(how):
        os.remove(how)


def wall(cmd, cwd, timeout, before=None):
    reset(before)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return time.monotonic() - t0, p


def digest(paths, stdout):
    import hashlib
    h = hashlib.sha256(stdout)
    for p in paths:
        if os.path.exists(p):
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def mcheck(cmd, tmp, execs, extra, before, timeout):
    """One mcheck search of `execs` executions: (wall time, report, peak memory MiB)."""
    report = os.path.join(tmp, "report.json")
    if os.path.exists(report):
        os.remove(report)
    timed = ["/usr/bin/time", "-f", "%M", MCHECK, "--jobs", "1", "--max-executions", str(execs),
             "--quiet-program", "--progress", "never", "--out", os.path.join(tmp, "out"),
             "--json", report] + extra + ["--"] + cmd
    try:
        t, p = wall(timed, tmp, timeout, before)
    except subprocess.TimeoutExpired:
        return None, None, None
    try:
        rep = json.load(open(report))
    except (OSError, ValueError):
        raise HarnessError("mcheck wrote no report: %s" % p.stderr[-2000:].decode(errors="replace"))
    mem = int(p.stderr.decode().strip().splitlines()[-1]) / 1024
    return t, rep, mem


def measure(name, cmd, outputs, before, tmp, opts):
    row = {"program": name, "command": " ".join(cmd)}
    natives = []
    for _ in range(opts.reps):
        t, p = wall(cmd, tmp, 300, before)
        natives.append(t)
    row["native_s"] = median(natives)
    native_digest = digest(outputs, p.stdout)
    t, rep, mem = mcheck(cmd, tmp, 1, [], before, opts.timeout)
    row["first_s"] = t
    t, rep, mem = mcheck(cmd, tmp, opts.execs, [], before, opts.timeout)
    if rep is None:
        row["timed_out"] = True
        return row
    n = max(rep["executions"], 1)
    row["executions"] = rep["executions"]
    row["per_execution_s"] = t / n
    row["decisions"] = rep.get("decisions", 0) / n
    row["accesses"] = rep["access_recording"]["accesses"] / n
    row["accesses_at_breakpoints"] = rep["access_recording"]["accesses_at_breakpoints"] / n
    row["cut_short"] = rep.get("cut_short", 0)
    row["findings"] = sorted({f["kind"] for f in rep["findings"]})
    row["statement"] = rep["coverage"]["statement"]
    row["peak_memory_mib"] = mem
    t, rep2, _ = mcheck(cmd, tmp, opts.execs, ["--no-races"], before, opts.timeout)
    if rep2 is not None:
        row["no_races_per_execution_s"] = t / max(rep2["executions"], 1)
    t, rep3, _ = mcheck(cmd, tmp, opts.execs, ["--no-heap-checks"], before, opts.timeout)
    if rep3 is not None:
        row["no_heap_checks_per_execution_s"] = t / max(rep3["executions"], 1)
    # Output: one more execution with the program's output shown, against the native run's.
    try:
        t, p = wall([MCHECK, "--jobs", "1", "--max-executions", "1", "--progress", "never",
                     "--out", os.path.join(tmp, "out"), "--"] + cmd, tmp, opts.timeout, before)
        row["output_identical"] = digest(outputs, p.stdout) == native_digest
    except subprocess.TimeoutExpired:
        row["output_identical"] = None
    if shutil.which("valgrind") and not opts.no_helgrind:
        try:
            t, p = wall(["valgrind", "--tool=helgrind", "-q"] + cmd, tmp, opts.timeout, before)
            row["helgrind_s"] = t
        except subprocess.TimeoutExpired:
            row["helgrind_s"] = None
    per = row["per_execution_s"]
    row["target_s"] = max(10 * row["native_s"], row["native_s"] + 0.1)
    row["meets_native_target"] = per <= row["target_s"]
    hg = row.get("helgrind_s")
    row["meets_helgrind_target"] = hg is not None and per <= hg
    return row


def print_rows(rows):
    print("### Real programs (`python3 bench/real_programs.py`)")
    print()
    print("| program | native | per execution | no races | no heap | first | helgrind | target "
          "| decisions | µs/decision | accesses (at bp) | memory | findings | output |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("timed_out"):
            print("| %s | %.3f s | timed out | | | | | | | | | | | |" % (r["program"], r["native_s"]))
            continue
        hg = r.get("helgrind_s")
        nr = r.get("no_races_per_execution_s")
        nh = r.get("no_heap_checks_per_execution_s")
        per = r["per_execution_s"]
        met = ("✓" if r["meets_native_target"] else "✗") + ("✓" if r["meets_helgrind_target"] else "✗")
        us = per * 1e6 / r["decisions"] if r["decisions"] else 0
        out = {True: "yes", False: "NO", None: "?"}[r.get("output_identical")]
        cut = " (%d cut)" % r["cut_short"] if r.get("cut_short") else ""
        print("| %s | %.3f s | %.2f s | %s | %s | %.2f s | %s | %.2f s %s | %.0f | %.0f | %.0f (%.0f) | %.0f MiB | %s%s | %s |" % (
            r["program"], r["native_s"], per, "%.2f s" % nr if nr else "—",
            "%.2f s" % nh if nh else "—", r["first_s"] or 0,
            "%.2f s" % hg if hg else "—", r["target_s"], met, r["decisions"], us,
            r["accesses"], r["accesses_at_breakpoints"], r["peak_memory_mib"],
            ", ".join(r["findings"]) or "none", cut, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="native repetitions (medians)")
    ap.add_argument("--execs", type=int, default=20, help="executions per mcheck search")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mcheck run")
    ap.add_argument("--only", default="", help="comma-separated program names to run")
    ap.add_argument("--no-helgrind", action="store_true", help="skip helgrind")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "real-programs-results.json"))
    opts = ap.parse_args()
    if not os.access(MCHECK, os.X_OK):
        print("bench: %s is missing: run 'make bench'" % MCHECK, file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="mcheck-real-") as tmp:
        make_inputs(tmp)
        for name, cmd, outputs, before in programs(tmp):
            if opts.only and name not in opts.only.split(","):
                continue
            if not shutil.which(cmd[0]):
                print("bench: %s is not installed (make deps)" % cmd[0], file=sys.stderr)
                return 2
            print("bench: %s" % name, file=sys.stderr)
            try:
                rows.append(measure(name, cmd, outputs, before, tmp, opts))
            except (HarnessError, subprocess.CalledProcessError) as e:
                print("bench: %s: %s" % (name, e), file=sys.stderr)
                return 2
    print_rows(rows)
    os.makedirs(os.path.dirname(opts.json), exist_ok=True)
    with open(opts.json, "w") as f:
        json.dump({"machine": machine_info(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
