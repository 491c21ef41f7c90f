#!/usr/bin/env python3
"""Data race detection benchmarks for mcheck (Python 3 standard library only).

    python3 bench/races.py            # also run by `make bench` (bench/run.sh)

Measures, in one run, with medians over repetitions:

  1. access: the cost of one traced memory access.  Fixture bench_access N
     does N iterations of `g = g + 1` on a global volatile long: one plain
     load and one plain store per iteration (checked in the disassembly).
     Differential method: mcheck --jobs 1 --strategy random
     --max-executions 1 on N = 0 and on N = --n, with the race detector on
     and with --no-races; (t_N - t_0) / 2N per access, t being the loop time
     between the two timing marks the fixture writes to $BENCH_MARK_FD.  The
     native cost per iteration comes from the same method with N = --native-n
     and gives the slowdown of the loop.  Beside it: bench_atomic under mcheck
     (one LOCK-prefixed instruction per iteration, the other int3 +
     single-step case) as a reference, the same loop under helgrind
     (N = --helgrind-n), and the tracer's syscalls per access (perf trace).
  2. vs-helgrind: wall clock of one run of a fixture under
     `valgrind --tool=helgrind` against mcheck's time per execution
     (elapsed_seconds / executions of `mcheck --jobs 1 --strategy random
     --max-executions 20 --keep-going`, with races on and with --no-races)
     on the same binaries, and a native run; medians of --reps-exec.
  3. precision: on every race_* fixture of tracee-fixtures/expected.json and
     on every other fixture whose verdict is "none" and that needs no mcheck
     options: does mcheck's default command (`mcheck --quiet-program`,
     portfolio strategy, seed 0) report a data race, and does helgrind (one
     run; and how many of --helgrind-runs runs) report "Possible data race"?

mcheck is copied to a temporary directory first so that a rebuild of
target/release/mcheck during the run cannot mix two builds; schedule files go
to a temporary --out directory.  The helgrind runs of section 3 run on a
background thread while mcheck checks the fixtures (verdicts do not depend on
timing, and this keeps the whole script under about 4 minutes); sections 1
and 2 are timed with nothing else of this script running.

Prints markdown tables and writes every figure and sample to
target/races-results.json.  Exit status 0 whatever the figures; 2 when the
harness cannot measure (missing binary, mcheck failure, a fixture whose loop
is not what it should be).
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import platform
import re
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# The harness of the other benchmarks: its syscall counting is shared, not copied.
from bench import perf_trace_counts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCHECK_BUILT = os.path.join(ROOT, "target", "release", "mcheck")
FIXTURES_DIR = os.path.join(ROOT, "tracee-fixtures")
BUILD = os.path.join(FIXTURES_DIR, "build")
ACCESS = "bench_access"
ACCESS_VAR = "bench_access_g"
SECTIONS = ("access", "vs-helgrind", "precision")

# Section 2: racy and correct fixtures, C, C++ and Rust.
VS_FIXTURES = [
    "race_counter",
    "race_heap_int",
    "race_size_peek",
    "race_unlocked_publish",
    "race_mutex_handoff_ok",
    "race_condvar_handoff_ok",
    "race_cpp_atomic_publish_ok",
    "race_rust_mutex_mpsc_ok",
    "condvar_ok",
    "bench_slices",
    "bench_slices_racy",
]

HELGRIND = ["valgrind", "--tool=helgrind", "--error-exitcode=9", "-q"]
DRD = ["valgrind", "--tool=drd", "--error-exitcode=9", "-q"]


class HarnessError(Exception):
    pass


def median(xs):
    return statistics.median(xs) if xs else None


def progress(what):
    sys.stderr.write("races: %s\n" % what)
    sys.stderr.flush()


# ------------------------------------------------------------------ running

def timed_run(cmd, marks=False, timeout=None):
    """Runs cmd (stdout discarded, stderr kept).  Returns (wall s, loop s or None,
    exit status, stderr text).  With marks, passes a pipe as $BENCH_MARK_FD and
    stamps the arrival of the fixture's 'S' and 'E' bytes in a select loop."""
    env = dict(os.environ)
    env.pop("BENCH_MARK_FD", None)
    rfd = wfd = None
    pass_fds = ()
    if marks:
        rfd, wfd = os.pipe()
        env["BENCH_MARK_FD"] = str(wfd)
        pass_fds = (wfd,)
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env, pass_fds=pass_fds)
    except BaseException:
        if rfd is not None:
            os.close(rfd)
        raise
    finally:
        if wfd is not None:
            os.close(wfd)
    first = {}
    err = []
    sel = selectors.DefaultSelector()
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    if rfd is not None:
        sel.register(rfd, selectors.EVENT_READ, "marks")
    deadline = None if timeout is None else t0 + timeout
    open_count = len(sel.get_map())
    while open_count:
        wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
        events = sel.select(wait)
        if not events and deadline is not None and time.perf_counter() >= deadline:
            p.kill()
            p.wait()
            sel.close()
            p.stderr.close()
            if rfd is not None:
                os.close(rfd)
            raise HarnessError("%s did not finish within %g s" % (" ".join(cmd), timeout))
        for key, _ev in events:
            now = time.perf_counter()
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_count -= 1
            elif key.data == "marks":
                for b in data:
                    first.setdefault(bytes([b]), now)
            else:
                err.append(data)
    sel.close()
    p.wait()
    wall = time.perf_counter() - t0
    p.stderr.close()
    if rfd is not None:
        os.close(rfd)
    loop = None
    if b"S" in first and b"E" in first:
        loop = first[b"E"] - first[b"S"]
    return wall, loop, p.returncode, b"".join(err).decode(errors="replace")


class Mcheck:
    """The private copy of mcheck and a scratch directory for its reports."""

    def __init__(self, tmpdir):
        self.path = os.path.join(tmpdir, "mcheck")
        shutil.copy2(MCHECK_BUILT, self.path)
        self.tmpdir = tmpdir
        self.outdir = os.path.join(tmpdir, "mcheck-out")
        self.count = 0

    def run(self, options, prog, args, marks=False, timeout=300, want=(0,)):
        """`mcheck OPTIONS --json R --out D -- prog args`; returns (wall, loop, report)."""
        self.count += 1
        report = os.path.join(self.tmpdir, "report-%d.json" % self.count)
        cmd = ([self.path] + list(options) + ["--json", report, "--out", self.outdir, "--",
                                              prog] + [str(a) for a in args])
        wall, loop, rc, err = timed_run(cmd, marks=marks, timeout=timeout)
        if rc not in want:
            raise HarnessError("%s exited with %d:\n%s" % (" ".join(cmd), rc, err[-2000:]))
        try:
            with open(report) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            raise HarnessError("%s: no readable JSON report (%s)" % (" ".join(cmd), e))
        os.unlink(report)
        rep["_exit"] = rc
        return wall, loop, rep


def fixture(name):
    return os.path.join(BUILD, name)


# ------------------------------------------------------- section 1: access

def disassemble_main(prog):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", prog],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    text = out.stdout.decode(errors="replace")
    m = re.search(r"^[0-9a-f]+ <main>:\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    insns = []
    if m:
        for line in m.group(1).splitlines():
            mm = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
            if mm:
                insns.append((int(mm.group(1), 16), mm.group(2).strip()))
    return insns


def check_access_loop():
    """Checks that the innermost loop of main() of bench_access that touches the
    global holds exactly two memory-operand instructions: a load of the global into a
    register and a store of a register to it.  Returns a note."""
    if not shutil.which("objdump"):
        return "objdump not found: the loop of %s was not checked" % ACCESS
    insns = disassemble_main(fixture(ACCESS))
    loops = []
    for addr, text in insns:
        mm = re.match(r"j\w+\s+([0-9a-f]+) <main\+", text)
        if mm and int(mm.group(1), 16) < addr:
            loops.append((int(mm.group(1), 16), addr))
    # the loop: the smallest backward-jump range that touches the global
    loops = [(lo, hi) for lo, hi in loops
             if any(lo <= a <= hi and "<%s>" % ACCESS_VAR in t for a, t in insns)]
    if not loops:
        raise HarnessError("%s: no loop in main() accesses %s" % (ACCESS, ACCESS_VAR))
    lo, hi = min(loops, key=lambda r: r[1] - r[0])
    body = [(a, t) for a, t in insns if lo <= a <= hi]
    mem = [(a, t) for a, t in body if "(" in t and not t.startswith(("lea", "nop"))]
    load = [t for a, t in mem
            if re.match(r"mov\S*\s+\S*\(%rip\),%r\w+\s+# \w+ <" + ACCESS_VAR + ">", t)]
    store = [t for a, t in mem
             if re.match(r"mov\S*\s+%r\w+,\S*\(%rip\)\s+# \w+ <" + ACCESS_VAR + ">", t)]
    if len(mem) != 2 or len(load) != 1 or len(store) != 1:
        raise HarnessError("%s: the loop %#x-%#x should hold one load and one store of %s "
                           "and no other memory access; it holds: %s"
                           % (ACCESS, lo, hi, ACCESS_VAR, "; ".join(t for _a, t in mem)))
    if any(t.startswith("lock") or t.startswith("xchg") or t.startswith("call")
           for _a, t in body):
        raise HarnessError("%s: the loop contains a call or an atomic instruction" % ACCESS)
    return ("%s: loop %#x-%#x, %d instructions, memory accesses: `%s` and `%s`"
            % (ACCESS, lo, hi, len(body), re.sub(r"\s+", " ", load[0]),
               re.sub(r"\s+", " ", store[0])))


def measure_access(mc, opts):
    # --execution-timeout: the --no-races loop makes no scheduling point for
    # its whole length, which on a busy machine can exceed the default 10 s.
    base = ["--jobs", "1", "--strategy", "random", "--max-executions", "1", "--seed", "0",
            "--quiet-program", "--execution-timeout", "120"]
    # key, fixture, options, N, operations per loop iteration.  Without race
    # detection the loop runs at native speed, so it needs the native N to rise
    # above the noise of the marks.  bench_atomic (one LOCK-prefixed
    # instruction per iteration, a scheduling point; its loop is checked by
    # bench/bench.py) is the reference: the other kind of instruction mcheck
    # stops at with int3 and single-steps.
    variants = [("races", ACCESS, base, opts.n, 2),
                ("no-races", ACCESS, base + ["--no-races"], opts.native_n, 2),
                ("atomic", "bench_atomic", base, opts.atomic_n, 1)]
    runs = {(v, k): [] for v, _f, _o, n, _p in variants for k in (0, n)}
    order = [(v, f, o, k) for v, f, o, n, _p in variants for k in (0, n)]
    for rep in range(opts.reps_access):
        rot = rep % len(order)
        for v, f, o, k in order[rot:] + order[:rot]:
            wall, loop, rep_ = mc.run(o, fixture(f), [k], marks=True)
            if rep_.get("findings") or rep_.get("executions") != 1:
                raise HarnessError("%s %d under mcheck (%s): %s executions, findings %s"
                                   % (f, k, v, rep_.get("executions"), rep_.get("findings")))
            if loop is None:
                raise HarnessError("%s: no timing marks came through $BENCH_MARK_FD" % f)
            runs[(v, k)].append({"wall": wall, "loop": loop,
                                 "report": rep_.get("elapsed_seconds")})
    native = {0: [], opts.native_n: []}
    for rep in range(opts.reps_access):
        for k in ((0, opts.native_n) if rep % 2 == 0 else (opts.native_n, 0)):
            wall, loop, rc, err = timed_run([fixture(ACCESS), str(k)], marks=True)
            if rc != 0 or loop is None:
                raise HarnessError("%s %d natively: status %d %s" % (ACCESS, k, rc, err))
            native[k].append(loop)
    native_iter = (median(native[opts.native_n]) - median(native[0])) / opts.native_n
    res = {"n": opts.n, "native_n": opts.native_n, "native_us_per_iteration": native_iter * 1e6,
           "samples": {"%s/%d" % k: v for k, v in runs.items()},
           "native_samples": {str(k): v for k, v in native.items()}}
    if opts.helgrind_n > 0 and shutil.which("valgrind"):
        # the same loop under helgrind and DRD, for comparison (same marks)
        hn = opts.helgrind_n
        for tool, cmd in (("helgrind", HELGRIND), ("drd", DRD)):
            hg = {0: [], hn: []}
            for rep in range(opts.reps_access):
                for k in ((0, hn) if rep % 2 == 0 else (hn, 0)):
                    _w, loop, rc, err = timed_run(cmd + [fixture(ACCESS), str(k)], marks=True,
                                                  timeout=300)
                    if rc != 0 or loop is None:
                        raise HarnessError("%s %d under %s: status %d %s"
                                           % (ACCESS, k, tool, rc, err[-2000:]))
                    hg[k].append(loop)
            per = [(b - a) / (2 * hn) for a, b in zip(hg[0], hg[hn])]
            it = median(per) * 2
            res[tool] = {
                "fixture": ACCESS, "n": hn, "operations": 2 * hn,
                "us_per_operation": median(per) * 1e6, "us_per_operation_min": min(per) * 1e6,
                "us_per_operation_max": max(per) * 1e6, "report_us_per_operation": None,
                "loop_us_per_iteration": it * 1e6,
                "slowdown_vs_native": it / native_iter if native_iter > 0 else None,
                "wall_ms_n0": None, "wall_ms_n": None,
                "samples": {str(k): v for k, v in hg.items()},
            }
    for v, f, _o, n, per_iter in variants:
        ops = n * per_iter
        per = [(b["loop"] - a["loop"]) / ops for a, b in zip(runs[(v, 0)], runs[(v, n)])]
        rper = [(b["report"] - a["report"]) / ops for a, b in zip(runs[(v, 0)], runs[(v, n)])]
        it = median(per) * per_iter
        res[v] = {
            "fixture": f,
            "n": n,
            "operations": ops,
            "us_per_operation": median(per) * 1e6,
            "us_per_operation_min": min(per) * 1e6,
            "us_per_operation_max": max(per) * 1e6,
            "report_us_per_operation": median(rper) * 1e6,
            "loop_us_per_iteration": it * 1e6,
            "slowdown_vs_native": (it / native_iter if native_iter > 0 and f == ACCESS
                                   else None),
            "wall_ms_n0": median([r["wall"] for r in runs[(v, 0)]]) * 1e3,
            "wall_ms_n": median([r["wall"] for r in runs[(v, n)]]) * 1e3,
            "report_ms_n0": median([r["report"] for r in runs[(v, 0)]]) * 1e3,
        }
    return res


def tracer_syscalls_per_access(mc, n=2000):
    """{syscall: calls per traced access} of mcheck's threads, by the
    differential method on bench_access 0 and n, or None without perf."""
    if not shutil.which("perf"):
        return None
    counts = []
    for k in (0, n):
        cmd = [mc.path, "--jobs", "1", "--strategy", "random", "--max-executions", "1",
               "--quiet-program", "--out", mc.outdir, "--", fixture(ACCESS), str(k)]
        c = perf_trace_counts(cmd, mc.tmpdir)
        if c is None:
            return None
        counts.append(c)
    per = {}
    for sc in sorted(set(counts[0]) | set(counts[1])):
        d = (counts[1].get(sc, 0) - counts[0].get(sc, 0)) / (2 * n)
        if abs(d) >= 0.05:
            per[sc] = round(d, 2)
    return per


def print_access(res, opts):
    print()
    print("### 1. Cost per traced memory access (`%s N`, %d repetitions)"
          % (ACCESS, opts.reps_access))
    print()
    print("| mcheck on | N | operations | median µs per operation | min–max µs | report µs "
          "| loop ns per iteration | native ns per iteration | slowdown of the loop "
          "| whole run N=0 ms | whole run ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    labels = (("races", "`%s`: traced load/store, race detection on (default)" % ACCESS),
              ("no-races", "`%s`, `--no-races`" % ACCESS),
              ("atomic", "reference: `bench_atomic`, LOCK-prefixed instruction "
                         "(scheduling point), race detection on"))
    for tool in ("helgrind", "drd"):
        if tool in res:
            labels += ((tool, "for comparison: `%s` under %s (one run, no mcheck)"
                        % (ACCESS, tool)),)

    def opt(fmt, x):
        return "–" if x is None else fmt % x
    for v, label in labels:
        r = res[v]
        prec = 2 if r["us_per_operation"] >= 0.1 else 5
        native = res["native_us_per_iteration"] * 1e3 if r["fixture"] == ACCESS else None
        print("| %s | %d | %d | **%.*f** | %.*f–%.*f | %s | %s | %s | %s | %s | %s |" % (
            label, r["n"], r["operations"], prec, r["us_per_operation"], prec,
            r["us_per_operation_min"], prec, r["us_per_operation_max"],
            opt("%%.%df" % prec, r["report_us_per_operation"]),
            fmt_num(r["loop_us_per_iteration"] * 1e3), opt("%.2f", native),
            fmt_x(r["slowdown_vs_native"]), opt("%.1f", r["wall_ms_n0"]),
            opt("%.1f", r["wall_ms_n"])))
    print()
    print("native: `%s %d` natively, differential, %.2f ns per iteration (one load + one store)."
          % (ACCESS, res["native_n"], res["native_us_per_iteration"] * 1e3))
    sc = res.get("tracer_syscalls_per_access")
    if sc:
        print()
        print("tracer syscalls per traced access (`perf trace -s`, %s 0 vs 2000): %s; total %.2f"
              % (ACCESS, ", ".join("%s %g" % kv for kv in sc.items()), sum(sc.values())))


def fmt_num(x):
    """2 decimals below 100, else a whole number with spaces between thousands."""
    return "%.2f" % x if abs(x) < 100 else format(int(round(x)), ",").replace(",", " ")


def fmt_x(x):
    if x is None:
        return "–"
    if x >= 100:
        return "~%s×" % format(int(round(x, -2 if x >= 1000 else -1)), ",").replace(",", " ")
    return "%.1f×" % x


# ------------------------------------------------- section 2: vs helgrind

def measure_vs(mc, opts, names):
    rows = {nm: {"helgrind": [], "mcheck": [], "mcheck_no_races": [], "mcheck_wall": [],
                 "native": []} for nm in names}
    ex = opts.executions
    base = ["--jobs", "1", "--strategy", "random", "--max-executions", str(ex), "--seed", "0",
            "--keep-going", "--quiet-program"]
    for rep in range(opts.reps_exec):
        rot = rep % len(names)
        for nm in names[rot:] + names[:rot]:
            prog = fixture(nm)
            wall, _l, rc, err = timed_run(HELGRIND + [prog], timeout=120)
            if rc not in (0, 9):
                raise HarnessError("helgrind on %s exited with %d:\n%s" % (nm, rc, err[-2000:]))
            rows[nm]["helgrind"].append(wall)
            for key, extra in (("mcheck", []), ("mcheck_no_races", ["--no-races"])):
                w, _l, rep_ = mc.run(base + extra, prog, [], want=(0, 1))
                if rep_.get("executions") != ex:
                    raise HarnessError("mcheck %s on %s: %s executions instead of %d"
                                       % (" ".join(extra), nm, rep_.get("executions"), ex))
                bad = [f for f in rep_.get("findings", []) if f.get("kind") != "data_race"]
                if bad or (extra and rep_.get("findings")):
                    raise HarnessError("mcheck %s on %s: unexpected findings %s"
                                       % (" ".join(extra), nm, rep_.get("findings")))
                rows[nm][key].append(rep_["elapsed_seconds"] / ex)
                if key == "mcheck":
                    rows[nm]["mcheck_wall"].append(w)
            w, _l, rc, _e = timed_run([prog], timeout=60)
            if rc != 0:
                raise HarnessError("%s exited with %d natively" % (nm, rc))
            rows[nm]["native"].append(w)
    out = []
    for nm in names:
        r = rows[nm]
        m = {k: median(v) for k, v in r.items()}
        out.append({"fixture": nm, "samples": r, "helgrind_ms": m["helgrind"] * 1e3,
                    "mcheck_ms_per_execution": m["mcheck"] * 1e3,
                    "mcheck_no_races_ms_per_execution": m["mcheck_no_races"] * 1e3,
                    "mcheck_whole_ms": m["mcheck_wall"] * 1e3,
                    "native_ms": m["native"] * 1e3,
                    "ratio": m["mcheck"] / m["helgrind"],
                    "race_overhead": m["mcheck"] / m["mcheck_no_races"]})
    return out


def print_vs(rows, opts):
    print()
    print("### 2. mcheck per execution vs one helgrind run (medians of %d)" % opts.reps_exec)
    print()
    print("| fixture | native run ms | helgrind run ms | mcheck ms / execution "
          "| mcheck `--no-races` ms / execution | races on / off | mcheck / helgrind "
          "| whole mcheck run (%d executions) ms |" % opts.executions)
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f | %.0f | %.1f | %.1f | %.1f× | **%.3f** | %.0f |" % (
            r["fixture"], r["native_ms"], r["helgrind_ms"], r["mcheck_ms_per_execution"],
            r["mcheck_no_races_ms_per_execution"], r["race_overhead"], r["ratio"],
            r["mcheck_whole_ms"]))
    ratios = [r["ratio"] for r in rows]
    print()
    print("median ratio mcheck per execution / helgrind per run: %.3f (range %.3f–%.3f)"
          % (median(ratios), min(ratios), max(ratios)))


# ------------------------------------------------- section 3: precision

def precision_fixtures():
    with open(os.path.join(FIXTURES_DIR, "expected.json")) as f:
        entries = json.load(f)
    out, skipped = [], []
    for e in entries:
        name = e["name"]
        if not (name.startswith("race_") or e.get("verdict") == "none"):
            continue
        if e.get("options"):
            skipped.append("%s (needs %s)" % (name, " ".join(e["options"])))
            continue
        out.append(e)
    # racy ones first, then the correct race_* ones, then the other correct ones
    out.sort(key=lambda e: (e["verdict"] != "data_race", not e["name"].startswith("race_")))
    return out, skipped


_DEMANGLE = {}


def demangle(names):
    todo = [n for n in names if n not in _DEMANGLE]
    if todo and shutil.which("c++filt"):
        p = subprocess.run(["c++filt"], input="\n".join(todo).encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        outs = p.stdout.decode(errors="replace").splitlines()
        if len(outs) == len(todo):
            for a, b in zip(todo, outs):
                # drop Rust crate hashes: std[e28293b1aa0f68bd]::x -> std::x
                _DEMANGLE[a] = re.sub(r"\[[0-9a-f]{8,}\]", "", b)
    return [_DEMANGLE.get(n, n) for n in names]


def parse_helgrind(err):
    """(data race reports, sorted raced-on objects, {other error kind: count}).

    helgrind separates its reports with lines of dashes; a data race report
    may start with "Lock at ... was first observed" paragraphs, then comes
    "Possible data race ...", and its "Address ... is ..." line names the
    object."""
    blocks, cur = [], []
    for line in err.splitlines():
        text = re.sub(r"^==\d+== ?", "", line)
        if re.match(r"^-{3}.*-{20,}$", text):
            blocks.append(cur)
            # thread announcements are not reports
            cur = None if "Thread-Announcement" in text else []
        elif cur is not None:
            cur.append(text)
    blocks.append(cur)
    blocks = [b for b in blocks[1:] if b is not None]
    races = 0
    objs = set()
    other = {}
    for blk in blocks:
        starts = [i for i, t in enumerate(blk) if t.startswith("Possible data race")]
        if starts:
            races += 1
            for t in blk[starts[0]:]:
                m = re.search(r'Address 0x[0-9a-f]+ is (\d+) bytes inside data symbol "([^"]+)"',
                              t)
                if m:
                    objs.add(("sym", m.group(2), int(m.group(1))))
                    continue
                m = re.search(r"Address 0x[0-9a-f]+ is (\d+) bytes inside a block of size "
                              r"(\d+) alloc", t)
                if m:
                    objs.add(("heap", "heap block (%s bytes)" % m.group(2), int(m.group(1))))
                    continue
                if re.search(r"Address 0x[0-9a-f]+ is on thread #\d+'s stack", t):
                    objs.add(("stack", "stack", 0))
            continue
        heads = [t.strip() for t in blk if t.strip()
                 and not re.match(r"\s*(at|by) 0x", t)
                 and not t.strip().startswith(("Lock at", "Address"))]
        if heads:
            kind = re.sub(r"^Thread #\d+:? ", "", heads[0])
            kind = re.sub(r"\s*(at )?0x[0-9A-Fa-f]+", "", kind)
            kind = re.sub(r"#\d+", "#n", kind)
            other[kind] = other.get(kind, 0) + 1
    syms = sorted({o[1] for o in objs if o[0] == "sym"})
    names = dict(zip(syms, demangle(syms)))
    shown = sorted({(names[o[1]] if o[0] == "sym" else o[1])
                    + ("+%d" % o[2] if o[2] else "") for o in objs})
    return races, shown, other


def helgrind_once(prog, args):
    wall, _l, rc, err = timed_run(HELGRIND + [prog] + [str(a) for a in args], timeout=120)
    races, objs, other = parse_helgrind(err)
    return {"wall": wall, "exit": rc, "races": races, "objects": objs, "other": other}


def mcheck_objects(findings):
    out = []
    for f in findings:
        if f.get("kind") != "data_race":
            continue
        msg = f.get("message", "")
        m = re.search(r"data race on `([^`]+)`", msg)
        if m:
            v = m.group(1)
        else:
            m = re.search(r"data race on heap block 0x[0-9a-f]+\+(\d+) \((\d+) bytes\)", msg)
            v = ("heap block (%s bytes)%s" % (m.group(2), "+" + m.group(1)
                                             if m.group(1) != "0" else "")) if m else "?"
        if v not in out:
            out.append(v)
    return out


def measure_precision(mc, opts):
    fixtures, skipped = precision_fixtures()
    missing = [e["name"] for e in fixtures
               if not os.access(os.path.join(FIXTURES_DIR, e["binary"]), os.X_OK)]
    if missing:
        raise HarnessError("missing fixtures (run `make fixtures`): %s" % ", ".join(missing))
    hg = {}
    pool = None
    futures = {}
    if opts.helgrind_runs > 0 and shutil.which("valgrind"):
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=opts.helgrind_workers)
        for e in fixtures:
            prog = os.path.join(FIXTURES_DIR, e["binary"])
            futures[e["name"]] = [pool.submit(helgrind_once, prog, e.get("args", []))
                                  for _ in range(opts.helgrind_runs)]
    rows = []
    for e in fixtures:
        prog = os.path.join(FIXTURES_DIR, e["binary"])
        try:
            wall, _l, rep = mc.run(["--quiet-program"], prog, e.get("args", []), want=(0, 1),
                                   timeout=opts.mcheck_timeout)
        except HarnessError as err:
            # one fixture that mcheck cannot check does not void the table
            progress("mcheck on %s: %s" % (e["name"], str(err).splitlines()[0]))
            wall, rep = None, {"_exit": None, "findings": [], "error": str(err)[:500]}
        findings = rep.get("findings", [])
        rows.append({
            "mcheck_error": rep.get("error"),
            "fixture": e["name"], "lang": e.get("lang"), "expected": e["verdict"],
            "racy": e["verdict"] == "data_race",
            "mcheck_exit": rep["_exit"], "mcheck_wall": wall,
            "mcheck_executions": rep.get("executions"),
            "mcheck_complete": rep.get("complete"),
            "mcheck_race": any(f.get("kind") == "data_race" for f in findings),
            "mcheck_objects": mcheck_objects(findings),
            "mcheck_other": sorted({f.get("kind") for f in findings
                                    if f.get("kind") != "data_race"}),
            "mcheck_messages": [f.get("message", "").splitlines()[0] for f in findings],
        })
    for row in rows:
        fs = futures.get(row["fixture"])
        if fs is None:
            row["helgrind"] = None
            continue
        runs = []
        for f in fs:
            try:
                r = f.result()
            except HarnessError as err:       # a helgrind run that hung
                progress("helgrind on %s: %s" % (row["fixture"], err))
                continue
            if r["exit"] not in (0, 9):
                progress("helgrind on %s exited with %s" % (row["fixture"], r["exit"]))
                continue
            runs.append(r)
        if not runs:
            row["helgrind"] = None
            continue
        objs = sorted({o for r in runs for o in r["objects"]})
        other = {}
        for r in runs:
            for k, c in r["other"].items():
                other[k] = other.get(k, 0) + 1
        row["helgrind"] = {"first_race": runs[0]["races"] > 0,
                           "runs_with_race": sum(1 for r in runs if r["races"] > 0),
                           "runs": len(runs), "objects": objs, "other_kinds": other,
                           "reports_per_run": [r["races"] for r in runs],
                           "wall": [r["wall"] for r in runs]}
    if pool is not None:
        pool.shutdown()
    return rows, skipped


def short_list(xs, limit=3):
    if not xs:
        return ""
    s = ", ".join("`%s`" % x for x in xs[:limit])
    if len(xs) > limit:
        s += " +%d" % (len(xs) - limit)
    return s


def print_precision(rows, skipped, opts):
    k = opts.helgrind_runs
    print()
    print("### 3. Precision: mcheck (default command) and helgrind (1 run, and %d runs)" % k)
    print()
    print("| fixture | expected | mcheck | mcheck executions | helgrind, 1 run | helgrind, "
          "runs of %d with a race | helgrind's objects | helgrind's other complaints |" % k)
    print("|---|---|---|---:|---|---:|---|---|")
    for r in rows:
        mc = "race: %s" % short_list(r["mcheck_objects"]) if r["mcheck_race"] else "none"
        if r["mcheck_error"]:
            mc = "error (see JSON)"
        if r["mcheck_other"]:
            mc += " (+ %s)" % ", ".join(r["mcheck_other"])
        if r["racy"] != r["mcheck_race"]:
            mc = "**%s** (%s)" % (mc, "miss" if r["racy"] else "false positive")
        h = r["helgrind"]
        if h is None:
            h1 = hk = ho = hx = "–"
        else:
            h1 = "race" if h["first_race"] else "none"
            if r["racy"] != h["first_race"]:
                h1 = "**%s**" % h1
            hk = "%d of %d" % (h["runs_with_race"], h["runs"])
            ho = short_list(h["objects"])
            hx = "; ".join("%s (%d of %d)" % (kk, c, h["runs"])
                           for kk, c in sorted(h["other_kinds"].items()))
        print("| %s | %s | %s | %s%s | %s | %s | %s | %s |" % (
            r["fixture"], "race" if r["racy"] else "no race", mc, r["mcheck_executions"],
            " (all)" if r["mcheck_complete"] else "", h1, hk, ho, hx))
    t = totals(rows, k)
    print("| **totals** | %d racy, %d correct | **%d of %d races found, %d false positives** "
          "| | **%s** | **%s** | | |" % (
              t["racy"], t["correct"], t["mcheck_found"], t["racy"], t["mcheck_fp"],
              "%d of %d found, %d false positives" % (t["hg1_found"], t["racy"], t["hg1_fp"])
              if t["hg"] else "–",
              "found in ≥ 1 run: %d of %d; false positives in ≥ 1 run: %d, in all %d: %d"
              % (t["hgk_found"], t["racy"], t["hgk_fp"], k, t["hgk_fp_all"])
              if t["hg"] else "–"))
    if skipped:
        print()
        print("skipped (need special mcheck options): %s" % ", ".join(skipped))
    mismatches = [r for r in rows if r["racy"] != r["mcheck_race"]]
    print()
    if mismatches:
        print("mcheck mismatches:")
        for r in mismatches:
            print("  %s: expected %s, mcheck: %s" % (
                r["fixture"], r["expected"], "; ".join(r["mcheck_messages"]) or "no finding"))
    else:
        print("mcheck: no miss and no false positive.")


def totals(rows, k):
    racy = [r for r in rows if r["racy"]]
    ok = [r for r in rows if not r["racy"]]
    hg = any(r["helgrind"] is not None for r in rows)
    racy_h = [r for r in racy if r["helgrind"] is not None]
    ok_h = [r for r in ok if r["helgrind"] is not None]
    t = {"racy": len(racy), "correct": len(ok), "hg": hg,
         "mcheck_found": sum(r["mcheck_race"] for r in racy),
         "mcheck_fp": sum(r["mcheck_race"] for r in ok)}
    if hg:
        t.update({
            "hg1_found": sum(r["helgrind"]["first_race"] for r in racy_h),
            "hg1_fp": sum(r["helgrind"]["first_race"] for r in ok_h),
            "hgk_found": sum(r["helgrind"]["runs_with_race"] > 0 for r in racy_h),
            "hgk_fp": sum(r["helgrind"]["runs_with_race"] > 0 for r in ok_h),
            "hgk_fp_all": sum(r["helgrind"]["runs_with_race"] == r["helgrind"]["runs"]
                              for r in ok_h),
            "hg_missing": len(rows) - len(racy_h) - len(ok_h),
        })
    return t


# ------------------------------------------------------------------ machine

def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            info["cpu"] = m.group(1).strip() if m else None
    except OSError:
        info["cpu"] = None
    try:
        g = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        info["commit"] = g.stdout.decode().strip() or None
        d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        info["src_changes"] = len(d.stdout.decode().splitlines())
    except OSError:
        info["commit"] = None
    try:
        v = subprocess.run(["valgrind", "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
        info["valgrind"] = v.stdout.decode().strip()
    except OSError:
        info["valgrind"] = None
    return info


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated subset of %s" % ",".join(SECTIONS))
    ap.add_argument("--n", type=int, default=2000000,
                    help="loop iterations of %s under mcheck (2 accesses each)" % ACCESS)
    ap.add_argument("--atomic-n", type=int, default=20000,
                    help="loop iterations of bench_atomic (a scheduling point each)")
    ap.add_argument("--native-n", type=int, default=200000000,
                    help="loop iterations of %s natively" % ACCESS)
    ap.add_argument("--helgrind-n", type=int, default=20000000,
                    help="loop iterations of %s under helgrind in section 1 (0: skip)" % ACCESS)
    ap.add_argument("--reps-access", type=int, default=7, help="repetitions of section 1")
    ap.add_argument("--reps-exec", type=int, default=3, help="repetitions of section 2")
    ap.add_argument("--executions", type=int, default=20,
                    help="executions per mcheck run in section 2")
    ap.add_argument("--helgrind-runs", type=int, default=5,
                    help="helgrind runs per fixture in section 3 (0: no helgrind)")
    ap.add_argument("--helgrind-workers", type=int, default=1,
                    help="helgrind runs at a time in section 3 (next to mcheck's checks)")
    ap.add_argument("--mcheck-timeout", type=float, default=120,
                    help="longest one mcheck check of section 3 may take, in seconds")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "races-results.json"),
                    help="where to write the figures")
    opts = ap.parse_args()
    sections = [s.strip() for s in opts.sections.split(",") if s.strip()]
    for s in sections:
        if s not in SECTIONS:
            ap.error("unknown section %r" % s)
    if opts.n < 1 or opts.native_n < 1 or opts.reps_access < 1 or opts.reps_exec < 1 \
            or opts.executions < 1 or opts.helgrind_runs < 0 or opts.helgrind_workers < 1:
        ap.error("counts must be positive")

    if not os.access(MCHECK_BUILT, os.X_OK):
        print("races: %s is missing: run `make bench` (or `cargo build --release`)"
              % MCHECK_BUILT, file=sys.stderr)
        return 2
    have_valgrind = shutil.which("valgrind") is not None
    if not have_valgrind:
        print("races: valgrind not found: the helgrind columns are left out", file=sys.stderr)
        opts.helgrind_runs = 0
        sections = [s for s in sections if s != "vs-helgrind"]
    t_start = time.perf_counter()
    info = machine_info()
    info["load_start"] = loadavg()
    results = {"machine": info, "options": vars(opts)}
    try:
        need = [ACCESS, "bench_atomic"] if "access" in sections else []
        need += VS_FIXTURES if "vs-helgrind" in sections else []
        for nm in need:
            if not os.access(fixture(nm), os.X_OK):
                raise HarnessError("%s is missing: run `make fixtures` (or `make bench`)"
                                   % fixture(nm))
        tmpdir = tempfile.mkdtemp(prefix="mcheck-races-")
        try:
            mc = Mcheck(tmpdir)
            with open(mc.path, "rb") as f:
                info["mcheck_sha256"] = hashlib.sha256(f.read()).hexdigest()
            print("## Data race detection: mcheck (commit %s, %s uncommitted change(s) in "
                  "src/, binary sha256 %s) and %s; %s CPUs, %s, kernel %s; load %.2f at start"
                  % (info.get("commit"), info.get("src_changes"),
                     info["mcheck_sha256"][:12], info.get("valgrind"),
                     info["nproc"], info.get("cpu"), info["kernel"], info["load_start"] or 0))
            if "access" in sections:
                note = check_access_loop()
                print()
                print(note)
                progress("section 1: cost per traced access")
                results["access"] = measure_access(mc, opts)
                results["access"]["tracer_syscalls_per_access"] = tracer_syscalls_per_access(mc)
                results["access"]["disassembly"] = note
                print_access(results["access"], opts)
            if "vs-helgrind" in sections:
                progress("section 2: mcheck per execution vs helgrind")
                results["vs_helgrind"] = measure_vs(mc, opts, VS_FIXTURES)
                print_vs(results["vs_helgrind"], opts)
            if "precision" in sections:
                progress("section 3: precision (mcheck default command; helgrind x%d)"
                         % opts.helgrind_runs)
                rows, skipped = measure_precision(mc, opts)
                results["precision"] = {"rows": rows, "skipped": skipped,
                                        "totals": totals(rows, opts.helgrind_runs)}
                print_precision(rows, skipped, opts)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    except HarnessError as e:
        print("races: cannot measure: %s" % e, file=sys.stderr)
        return 2
    info["load_end"] = loadavg()
    info["seconds"] = time.perf_counter() - t_start
    print()
    print("load %.2f at end; %.0f s in all" % (info["load_end"] or 0, info["seconds"]))
    try:
        os.makedirs(os.path.dirname(opts.json), exist_ok=True)
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)
        print("figures and samples: %s" % os.path.relpath(opts.json, ROOT))
    except OSError as e:
        print("races: could not write %s: %s" % (opts.json, e), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
