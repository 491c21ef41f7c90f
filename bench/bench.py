#!/usr/bin/env python3
"""mcheck benchmark harness (Python 3 standard library only).  Run it through
bench/run.sh (`make bench`); `bench/run.sh --help` lists the knobs.

Measures, side by side in one run, with medians over repetitions:

  1. the cost of one syscall-type scheduling point (sched_yield, trapped by
     seccomp and emulated by the tracer): fixture bench_yield N;
  2. the cost of one breakpoint-type scheduling point, separately for
     (a) emulated pthread calls: bench_mutex N (N lock/unlock pairs = 2N points),
     (b) LOCK-prefixed instructions, stepped over: bench_atomic N (N points);
  3. one whole execution of a small two-thread program (bench_two_threads)
     under mcheck versus a native fork+exec of the same binary;
  4. executions per second of a short random search on small correct
     fixtures, next to native fork+exec runs per second of the same program;
  5. the speed-up of the same search from --jobs 1 to --jobs 2 (an exhaustive
     dfs whose execution count must not change, and a random search);
  6. stress testing against mcheck on the buggy fixtures of
     tracee-fixtures/expected.json: mcheck's time to its first finding
     against how often the bug shows in native runs over a fixed window;
  7. fair scheduling: dfs executions and wall time to exhaust the correct spin
     waits (yield_spin_ok, pause_spin_ok), and the same dfs with --no-fair,
     which does not end and spends --fair-unfair-executions.
  8. (section por) exhaustive dfs with and without partial-order reduction:
     executions and wall time, next to the number of Mazurkiewicz traces
     where it is known.
  9. (section audit) `mcheck audit` of a manifest of small correct fixtures
     with --jobs 1 and --jobs 2: targets per minute and executions per second.
 10. (section deep) the SCTBench-style table: executions to the first failure
     (not a race report) per strategy and for the default portfolio, on the
     deep-bug fixtures and the other hard ones, median over --deep-seeds seeds.

Per-point costs use the differential method: the fixture is checked with
`mcheck --max-executions 1` for N = 0 and for a large N, and
(t_N - t_0) / points is the cost of one point, free of start-up, exec and exit
costs.  Two clocks are used for t:

  * loop: the fixture writes a byte to a pipe (fd $BENCH_MARK_FD) just before
    and just after its loop; this harness timestamps their arrival.  This is
    the headline figure.
  * report: `elapsed_seconds` from mcheck's JSON report.  Shown beside it as
    a cross-check; it includes whatever mcheck does around the execution (and
    inherits the granularity with which mcheck notices that its workers are
    done).

Sections 4-7 are described in docs/performance.md; `--sections` runs a
subset.  mcheck is copied to a temporary directory first and every run uses
that copy, so that a rebuild of target/release/mcheck by someone else during
the run cannot mix two builds.

The runs of one repetition are made back to back (the order rotates between
repetitions) so that machine noise hits every fixture alike; the figures
reported are medians over repetitions.

Prints a table and writes the same figures as JSON (default:
target/bench-results.json).  Exit status: 0 whether targets are met or not;
2 when the harness itself cannot run (missing binary, mcheck failure, a
fixture that does not make the points it should).
"""

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import selectors
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCHECK = os.path.join(ROOT, "target", "release", "mcheck")
FIXTURES = os.path.join(ROOT, "tracee-fixtures", "build")

# Targets from the performance issue, in microseconds per point (2-core VMs).
TARGET_SYSCALL_US = 15.0
TARGET_BREAKPOINT_US = 40.0

# label, fixture, scheduling points per loop iteration, kind, target (us)
POINT_BENCHES = [
    ("syscall: sched_yield", "bench_yield", 1, "syscall", TARGET_SYSCALL_US),
    ("breakpoint: pthread_mutex_lock/unlock", "bench_mutex", 2, "breakpoint",
     TARGET_BREAKPOINT_US),
    ("breakpoint: LOCK-prefixed instruction", "bench_atomic", 1, "breakpoint",
     TARGET_BREAKPOINT_US),
]
WHOLE = "bench_two_threads"
SECTIONS = ("points", "whole", "rate", "jobs", "stress", "fair", "por", "bpor", "cache",
            "audit", "refine", "deep")


class HarnessError(Exception):
    pass


def fixture(name):
    return os.path.join(FIXTURES, name)


def median(xs):
    return statistics.median(xs)


# ------------------------------------------------------------------ running

class Run:
    """One timed process run: wall clock, loop time from the marks, mcheck report."""

    def __init__(self, wall, loop, report, stamps=()):
        self.wall = wall
        self.loop = loop
        self.report = report
        self.stamps = list(stamps)

    def starts(self):
        """Arrival times of the 'S' marks (main started: once per execution from exec; an
        execution from a fork snapshot taken at the first thread creation starts past it)."""
        return [t for b, t in self.stamps if b == b"S"]

    def ends(self):
        """Arrival times of the 'E' marks (the program's work done: once per execution)."""
        return [t for b, t in self.stamps if b == b"E"]

    def per_end(self):
        """Mean time from one 'E' mark to the next, or None with fewer than 2."""
        s = self.ends()
        return (s[-1] - s[0]) / (len(s) - 1) if len(s) >= 2 else None

    def mains(self):
        """Durations 'S' -> 'E' of the executions (meaningful with one job)."""
        out, start = [], None
        for b, t in self.stamps:
            if b == b"S":
                start = t
            elif b == b"E" and start is not None:
                out.append(t - start)
                start = None
        return out


def timed_run(cmd, marks):
    """Runs cmd with stdout discarded and stderr kept for error messages.

    With marks, passes a pipe's write end as $BENCH_MARK_FD and timestamps every
    byte the fixture writes to it (the loop time is 'S' to 'E').  One thread
    waits on both pipes with select, so a mark is stamped as soon as it
    arrives (no second Python thread, hence no GIL hand-over delay)."""
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
    stamps = []
    err = []
    sel = selectors.DefaultSelector()
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    if rfd is not None:
        sel.register(rfd, selectors.EVENT_READ, "marks")
    open_count = len(sel.get_map())
    while open_count:
        for key, _ev in sel.select():
            now = time.perf_counter()
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_count -= 1
            elif key.data == "marks":
                stamps.extend((bytes([b]), now) for b in data)
            else:
                err.append(data)
    sel.close()
    p.wait()
    wall = time.perf_counter() - t0
    p.stderr.close()
    if rfd is not None:
        os.close(rfd)
    loop = None
    first = {}
    for b, t in stamps:
        first.setdefault(b, t)
    if b"S" in first and b"E" in first:
        loop = first[b"E"] - first[b"S"]
    if p.returncode != 0:
        raise HarnessError("%s exited with %d:\n%s" % (
            " ".join(cmd), p.returncode, b"".join(err).decode(errors="replace")[-2000:]))
    if marks and loop is None:
        raise HarnessError("%s: no timing marks came through $BENCH_MARK_FD "
                           "(does mcheck still pass inherited fds and the environment on?)"
                           % " ".join(cmd))
    return Run(wall, loop, None, stamps)


class Mcheck:
    def __init__(self, tmpdir):
        self.tmpdir = tempfile.mkdtemp(prefix="report-", dir=tmpdir)
        # Schedule files of findings go here, never into the repository.
        self.outdir = os.path.join(self.tmpdir, "mcheck-out")
        help_text = subprocess.run([MCHECK, "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL).stdout.decode(errors="replace")
        self.has_jobs = "--jobs" in help_text
        self.has_random = re.search(r"^\s*-\s*random:", help_text, re.M) is not None

    def run(self, prog, args, executions, marks=False, jobs=1, strategy=None, exact=True):
        """Runs mcheck over prog once; checks the report; returns a Run.

        exact: the report must show exactly `executions` executions (otherwise
        at least one: a systematic strategy may exhaust the space earlier)."""
        report = os.path.join(self.tmpdir, "report.json")
        if os.path.exists(report):
            os.unlink(report)
        cmd = [MCHECK, "--max-executions", str(executions), "--seed", "1",
               "--quiet-program", "--json", report, "--out", self.outdir]
        if self.has_jobs and jobs is not None:
            cmd += ["--jobs", str(jobs)]
        if strategy is not None:
            cmd += ["--strategy", strategy]
        cmd += ["--", prog] + [str(a) for a in args]
        r = timed_run(cmd, marks)
        with open(report) as f:
            r.report = json.load(f)
        if r.report.get("findings"):
            raise HarnessError("%s: unexpected findings: %s" % (" ".join(cmd),
                                                                 r.report["findings"]))
        got = r.report.get("executions")
        if not isinstance(got, int) or got < 1 or (exact and got != executions):
            raise HarnessError("%s: %s executions instead of %d" % (
                " ".join(cmd), r.report.get("executions"), executions))
        return r

    def check(self, options, prog, args, timeout=120, give_up=False, env=None):
        """Runs `mcheck OPTIONS --json R --out D -- prog args` once, whatever its
        verdict.  Returns (process wall clock s, exit status, report or None).
        After `timeout` seconds mcheck is interrupted (SIGINT, then SIGKILL);
        with give_up that returns (None, None, None), otherwise it is an error.
        `env`: extra environment variables for mcheck."""
        report = os.path.join(self.tmpdir, "report.json")
        if os.path.exists(report):
            os.unlink(report)
        cmd = ([MCHECK] + list(options) + ["--json", report, "--out", self.outdir, "--"]
               + [prog] + [str(a) for a in args])
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE,
                             env=dict(os.environ, **env) if env else None)
        try:
            _out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)      # lets mcheck kill its tracees itself
            try:
                p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
            if give_up:
                return None, None, None
            raise HarnessError("%s did not finish within %g s" % (" ".join(cmd), timeout))
        wall = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise HarnessError("%s exited with %d:\n%s" % (
                " ".join(cmd), p.returncode, err.decode(errors="replace")[-2000:]))
        rep = None
        if os.path.exists(report):
            with open(report) as f:
                rep = json.load(f)
        return wall, p.returncode, rep


def run_native(prog, args, marks=False):
    return timed_run([prog] + [str(a) for a in args], marks)


def native_wall(cmd):
    """Wall clock of one fork+exec of cmd (stdout/stderr discarded); must exit 0."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise HarnessError("%s exited with %d natively" % (" ".join(cmd), p.returncode))
    return wall


def native_outcome(cmd, hang_after):
    """Runs cmd natively once, in its own process group, killing the group when
    it has not finished after hang_after seconds.  Returns (wall s, outcome):
    outcome is the exit status (>= 0), -SIGNAL when a signal ended it, or
    "hang"."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = p.wait(timeout=hang_after)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        rc = "hang"
    return time.perf_counter() - t0, rc


# ------------------------------------------------------------ fixture checks

def disassemble_main(prog):
    """[(address, instruction text)] of main() in prog, or None without objdump."""
    if not shutil.which("objdump"):
        return None
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", prog],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    text = out.stdout.decode(errors="replace")
    m = re.search(r"^[0-9a-f]+ <main>:\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    if not m:
        return []
    insns = []
    for line in m.group(1).splitlines():
        mm = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
        if mm:
            insns.append((int(mm.group(1), 16), mm.group(2)))
    return insns


def check_fixtures():
    """Checks with objdump that each fixture's loop really contains its points:
    each wanted instruction occurs exactly once in main(), inside the range of
    a backward jump (the loop).  Returns notes; raises HarnessError."""
    wanted = {
        "bench_yield": [("call sched_yield", r"call\s+\S+ <sched_yield@plt>")],
        "bench_mutex": [("call pthread_mutex_lock", r"call\s+\S+ <pthread_mutex_lock@plt>"),
                        ("call pthread_mutex_unlock", r"call\s+\S+ <pthread_mutex_unlock@plt>")],
        "bench_atomic": [("lock-prefixed add", r"^lock\b")],
    }
    for name in [b[1] for b in POINT_BENCHES] + [WHOLE]:
        if not os.access(fixture(name), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures` (or `make bench`)"
                               % fixture(name))
    notes = []
    for name, patterns in wanted.items():
        insns = disassemble_main(fixture(name))
        if insns is None:
            return ["objdump not found: the fixtures' loops were not checked"]
        loops = []
        for addr, text in insns:
            mm = re.match(r"j\w+\s+([0-9a-f]+) <main\+", text)
            if mm and int(mm.group(1), 16) < addr:
                loops.append((int(mm.group(1), 16), addr))
        found = []
        for what, pat in patterns:
            sites = [a for a, t in insns if re.search(pat, t)]
            if len(sites) != 1:
                raise HarnessError("%s: main() should contain exactly one %s, found %d"
                                   % (name, what, len(sites)))
            if not any(lo <= sites[0] <= hi for lo, hi in loops):
                raise HarnessError("%s: the %s at %#x is not inside a loop"
                                   % (name, what, sites[0]))
            found.append("%s at %#x" % (what, sites[0]))
        notes.append("%s: one %s per loop iteration" % (name, ", one ".join(found)))
    return notes


# ---------------------------------------------- what a point costs the tracer

def perf_trace_counts(cmd, tmpdir):
    """Syscall counts of mcheck's own threads (comm mcheck*) while running cmd,
    from `perf trace -s` (which does not use ptrace, so it coexists with
    mcheck's own tracing).  None when perf trace is unavailable."""
    out = os.path.join(tmpdir, "perf-trace.txt")
    try:
        p = subprocess.run(["perf", "trace", "-s", "-o", out, "--"] + cmd,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not os.path.exists(out):
        return None
    counts = {}
    comm = None
    with open(out) as f:
        for line in f:
            h = re.match(r"^ (\S.*) \((\d+)\), \d+ events", line)
            if h:
                comm = h.group(1)
                continue
            row = re.match(r"^\s+([a-z_0-9]+)\s+(\d+)\s+(\d+)\s+[\d.]+", line)
            if row and comm is not None and comm.startswith("mcheck"):
                counts[row.group(1)] = counts.get(row.group(1), 0) + int(row.group(2))
    return counts or None


def tracer_syscalls_per_point(mc, n, tmpdir):
    """{fixture: {syscall: calls per point}} by the differential method, or None."""
    if not shutil.which("perf"):
        return None
    result = {}
    for _label, name, per_iter, _kind, _target in POINT_BENCHES:
        counts = []
        for arg in (0, n):
            cmd = [MCHECK, "--max-executions", "1", "--quiet-program"]
            if mc.has_jobs:
                cmd += ["--jobs", "1"]
            c = perf_trace_counts(cmd + ["--", fixture(name), str(arg)], tmpdir)
            if c is None:
                return None
            counts.append(c)
        per = {}
        for sc in sorted(set(counts[0]) | set(counts[1])):
            d = (counts[1].get(sc, 0) - counts[0].get(sc, 0)) / (n * per_iter)
            if abs(d) >= 0.05:
                per[sc] = round(d, 2)
        result[name] = per
    return result


# ------------------------------------------- executions per second, small fixtures

# Small correct fixtures (tracee-fixtures/build) for executions per second: name, args.
RATE_FIXTURES = [
    ("mutex_normal_ok", []),
    ("condvar_ok", []),
    ("atomic_pair", [2]),
    ("cpp_prodcons_ok", []),
    ("rust_mutex_ok", []),
]


def label_of(name, args):
    return " ".join([name] + [str(a) for a in args])


def measure_rates(mc, opts):
    """mcheck --jobs 1 --strategy random --max-executions E on each small fixture
    (rate_reps runs each, fixture order rotating), and native fork+execs of the
    same command (rate_native_runs each, interleaved between fixtures)."""
    for name, _a in RATE_FIXTURES:
        if not os.access(fixture(name), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(name))
    raw = {label_of(n, a): {"elapsed": [], "wall": [], "native": []} for n, a in RATE_FIXTURES}
    for n, a in RATE_FIXTURES:           # warm-up
        mc.run(fixture(n), a, 10, jobs=1, strategy="random")
        native_wall([fixture(n)] + [str(x) for x in a])
    for rep in range(opts.rate_reps):
        k = rep % len(RATE_FIXTURES)
        for n, a in RATE_FIXTURES[k:] + RATE_FIXTURES[:k]:
            r = mc.run(fixture(n), a, opts.rate_executions, jobs=1, strategy="random")
            d = raw[label_of(n, a)]
            d["elapsed"].append(r.report["elapsed_seconds"])
            d["wall"].append(r.wall)
    for _ in range(opts.rate_native_runs):
        for n, a in RATE_FIXTURES:
            raw[label_of(n, a)]["native"].append(native_wall([fixture(n)] + [str(x) for x in a]))
    out = []
    for n, a in RATE_FIXTURES:
        d = raw[label_of(n, a)]
        e = opts.rate_executions
        rate = e / median(d["elapsed"])
        rate_wall = e / median(d["wall"])
        native = 1.0 / median(d["native"])
        out.append({
            "fixture": label_of(n, a),
            "command": "mcheck --jobs 1 --strategy random --max-executions %d --seed 1 "
                       "--quiet-program -- %s" % (e, label_of(n, a)),
            "executions_per_run": e,
            "mcheck_executions_per_s": rate,
            "mcheck_executions_per_s_samples": [e / x for x in d["elapsed"]],
            "mcheck_executions_per_s_process_wall": rate_wall,
            "mcheck_median_elapsed_s": median(d["elapsed"]),
            "mcheck_median_process_wall_s": median(d["wall"]),
            "native_runs": len(d["native"]),
            "native_median_us": median(d["native"]) * 1e6,
            "native_runs_per_s": native,
            "native_to_mcheck_ratio": native / rate,
        })
    return out


def print_rates(rates, opts):
    print("Executions per second on small correct fixtures: mcheck --jobs 1 --strategy random "
          "--max-executions %d (median of %d runs) vs native fork+exec (median of %d runs)"
          % (opts.rate_executions, opts.rate_reps, opts.rate_native_runs))
    cols = "  %-18s %13s %17s %14s %13s %9s"
    print(cols % ("fixture", "mcheck exec/s", "(by process wall)", "native runs/s",
                  "native us/run", "ratio"))
    for r in rates:
        print(cols % (r["fixture"], "%.0f" % r["mcheck_executions_per_s"],
                      "%.0f" % r["mcheck_executions_per_s_process_wall"],
                      "%.0f" % r["native_runs_per_s"], "%.0f" % r["native_median_us"],
                      "%.1fx" % r["native_to_mcheck_ratio"]))
    print("  mcheck exec/s = executions / elapsed_seconds of the report;")
    print("  by process wall = executions / wall clock of the whole mcheck process; "
          "ratio = native runs/s / mcheck exec/s")
    print()


# ------------------------------------------------------------ 1 job vs 2 jobs

DFS_FIXTURE, DFS_ARGS, DFS_EXECUTIONS = "atomic_pair", [6], 1716
RANDOM_JOBS_FIXTURE = "mutex_normal_ok"


def measure_jobs(mc, opts):
    """The same search with --jobs 1 and --jobs 2, jobs_reps runs each (the
    order of the two alternates).  Returns (results, failed checks)."""
    searches = [
        ("dfs", DFS_FIXTURE, DFS_ARGS,
         ["--strategy", "dfs", "--no-por", "--max-executions", "1000000"]),
        ("random", RANDOM_JOBS_FIXTURE, [],
         ["--strategy", "random", "--max-executions", str(opts.jobs_random_executions)]),
    ]
    for _s, n, _a, _o in searches:
        if not os.access(fixture(n), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
    raw = {(s, j): {"wall": [], "elapsed": [], "executions": [], "complete": []}
           for s, _n, _a, _o in searches for j in (1, 2)}
    for rep in range(opts.jobs_reps):
        for s, n, a, o in searches:
            for j in ((1, 2) if rep % 2 == 0 else (2, 1)):
                wall, rc, r = mc.check(o + ["--jobs", str(j), "--quiet-program"], fixture(n), a)
                if rc != 0 or r is None or r.get("findings"):
                    raise HarnessError("%s %s with --jobs %d: exit %d, findings %s"
                                       % (s, label_of(n, a), j, rc,
                                          r and r.get("findings")))
                d = raw[(s, j)]
                d["wall"].append(wall)
                d["elapsed"].append(r["elapsed_seconds"])
                d["executions"].append(r["executions"])
                d["complete"].append(r.get("complete"))
    failed, notes, out = [], [], []
    for s, n, a, o in searches:
        row = {"search": s, "fixture": label_of(n, a),
               "command": "mcheck %s --jobs J --quiet-program -- %s"
                          % (" ".join(o), label_of(n, a))}
        for j in (1, 2):
            d = raw[(s, j)]
            row["jobs%d" % j] = {"median_wall_s": median(d["wall"]), "wall_s": d["wall"],
                                 "median_elapsed_s": median(d["elapsed"]),
                                 "executions": d["executions"], "complete": d["complete"]}
        row["speedup_wall"] = row["jobs1"]["median_wall_s"] / row["jobs2"]["median_wall_s"]
        row["speedup_elapsed"] = (row["jobs1"]["median_elapsed_s"]
                                  / row["jobs2"]["median_elapsed_s"])
        if s == "dfs":
            counts = set(raw[("dfs", 1)]["executions"] + raw[("dfs", 2)]["executions"])
            complete = all(raw[("dfs", j)]["complete"] for j in (1, 2))
            row["executions_identical"] = len(counts) == 1
            if len(counts) != 1 or not complete:
                failed.append("dfs on %s: executions %s with --jobs 1, %s with --jobs 2, "
                              "complete %s/%s: the same exhaustive search must make the same "
                              "number of executions and finish"
                              % (label_of(n, a), raw[("dfs", 1)]["executions"],
                                 raw[("dfs", 2)]["executions"], raw[("dfs", 1)]["complete"],
                                 raw[("dfs", 2)]["complete"]))
            elif counts != {DFS_EXECUTIONS}:
                notes.append("dfs on %s explored %d executions (expected %d): the fixture "
                             "or mcheck's scheduling points changed"
                             % (label_of(n, a), counts.pop(), DFS_EXECUTIONS))
        out.append(row)
    return out, failed, notes


FAIR_FIXTURES = ("yield_spin_ok", "pause_spin_ok")


def measure_fair(mc, opts):
    """dfs with --jobs 1 on each spin-wait fixture, with the fair scheduler
    (must exhaust the space) and with --no-fair (must spend its budget), once
    each: the counts are deterministic.  Returns rows; raises HarnessError
    when the fair search does not end or finds something."""
    rows = []
    for name in FAIR_FIXTURES:
        if not os.access(fixture(name), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(name))
        row = {"fixture": name}
        for mode, extra in (("fair", ["--max-executions", "1000000"]),
                            ("unfair", ["--no-fair", "--max-executions",
                                        str(opts.fair_unfair_executions),
                                        "--max-steps", str(opts.fair_unfair_max_steps)])):
            options = ["--strategy", "dfs", "--jobs", "1", "--quiet-program"] + extra
            wall, rc, r = mc.check(options, fixture(name), [], timeout=600)
            if rc != 0 or r is None or r.get("findings"):
                raise HarnessError("dfs (%s) on %s: exit %s, findings %s"
                                   % (mode, name, rc, r and r.get("findings")))
            if mode == "fair" and not r.get("complete"):
                raise HarnessError("fair dfs on %s did not exhaust the space" % name)
            row[mode] = {"command": "mcheck %s -- %s" % (" ".join(options), name),
                         "executions": r["executions"], "complete": r.get("complete"),
                         "wall_s": wall, "elapsed_s": r["elapsed_seconds"]}
        rows.append(row)
    return rows


def print_fair(rows, opts):
    print("Fair scheduling: dfs --jobs 1 on correct spin waits")
    cols = "  %-16s %-40s %11s %9s %9s"
    print(cols % ("fixture", "search", "executions", "complete", "wall s"))
    for r in rows:
        for mode, what in (("fair", "dfs (fair scheduler)"),
                           ("unfair", "dfs --no-fair --max-steps %d"
                            % opts.fair_unfair_max_steps)):
            d = r[mode]
            print(cols % (r["fixture"], what, d["executions"],
                          "yes" if d["complete"] else "no", "%.2f" % d["wall_s"]))
    print("  without fairness dfs keeps re-picking the spinner at its yields: it stops only at "
          "--max-executions")
    print()


def print_jobs(rows, failed, notes, opts):
    print("Speed-up from --jobs 1 to --jobs 2 (median of %d runs each; %d CPUs)"
          % (opts.jobs_reps, os.cpu_count()))
    cols = "  %-40s %11s %11s %11s %11s %8s"
    print(cols % ("search", "executions", "jobs 1 s", "jobs 2 s", "speed-up", "elapsed"))
    for r in rows:
        ex = sorted(set(r["jobs1"]["executions"] + r["jobs2"]["executions"]))
        print(cols % ("%s on %s" % (r["search"], r["fixture"]),
                      "/".join(str(x) for x in ex),
                      "%.3f" % r["jobs1"]["median_wall_s"], "%.3f" % r["jobs2"]["median_wall_s"],
                      "%.2fx" % r["speedup_wall"], "%.2fx" % r["speedup_elapsed"]))
    print("  jobs N s: wall clock of the whole mcheck process; elapsed: the same ratio from "
          "the reports' elapsed_seconds")
    for r in rows:
        if "executions_identical" in r:
            print("  check: %s on %s: %s" % (
                r["search"], r["fixture"],
                "the same %d executions with 1 and 2 jobs, search complete"
                % r["jobs1"]["executions"][0] if r["executions_identical"]
                and not failed else "MISMATCH (see below)"))
    for n in notes:
        print("  NOTE: " + n)
    for f in failed:
        print("  CHECK FAILED: " + f)
    print()


# ------------------------------------------------------------- audit

# Small correct fixtures: every target runs its whole budget.
AUDIT_FIXTURES = ("mutex_normal_ok", "sem_ok", "condvar_ok", "barrier_ok", "rwlock_ok",
                  "once_ok", "cpp_prodcons_ok", "rust_mutex_ok")


def measure_audit(opts, tmpdir):
    """`mcheck audit` of AUDIT_FIXTURES with --jobs 1 and --jobs 2 (jobs_reps runs each,
    alternating).  Returns one row per job count: targets per minute and executions per
    second over the audit's wall clock."""
    manifest = os.path.join(tmpdir, "audit.toml")
    with open(manifest, "w") as f:
        for n in AUDIT_FIXTURES:
            if not os.access(fixture(n), os.X_OK):
                raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
            f.write('[[target]]\nname = "%s"\ncommand = ["%s"]\nmax_executions = %d\n\n'
                    % (n, fixture(n), opts.audit_executions))
    raw = {j: {"wall": [], "executions": []} for j in (1, 2)}
    for rep in range(opts.jobs_reps):
        for j in ((1, 2) if rep % 2 == 0 else (2, 1)):
            out = os.path.join(tmpdir, "audit-out-%d" % j)
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            p = subprocess.run([MCHECK, "audit", manifest, "--out", out, "--jobs", str(j)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wall = time.perf_counter() - t
            if p.returncode != 0:
                raise HarnessError("mcheck audit --jobs %d: exit %d: %s"
                                   % (j, p.returncode, p.stderr.decode(errors="replace")))
            with open(os.path.join(out, "audit.json")) as f:
                record = json.load(f)
            raw[j]["wall"].append(wall)
            raw[j]["executions"].append(sum(t["report"]["executions"]
                                            for t in record["targets"]))
    rows = []
    for j in (1, 2):
        w = median(raw[j]["wall"])
        ex = median(raw[j]["executions"])
        rows.append({"jobs": j, "targets": len(AUDIT_FIXTURES), "median_wall_s": w,
                     "wall_s": raw[j]["wall"], "executions": raw[j]["executions"],
                     "targets_per_minute": len(AUDIT_FIXTURES) * 60.0 / w,
                     "executions_per_second": ex / w})
    return rows


def print_audit(rows, opts):
    print("mcheck audit throughput: %d correct fixtures, max_executions %d each "
          "(median of %d runs)" % (len(AUDIT_FIXTURES), opts.audit_executions, opts.jobs_reps))
    cols = "  %-6s %12s %12s %16s %16s"
    print(cols % ("jobs", "executions", "wall s", "targets/min", "executions/s"))
    for r in rows:
        print(cols % (r["jobs"], "%d" % median(r["executions"]), "%.2f" % r["median_wall_s"],
                      "%.1f" % r["targets_per_minute"], "%.0f" % r["executions_per_second"]))
    print()


# ------------------------------------------------ partial-order reduction

# (fixture, args, Mazurkiewicz traces or None): atomic_pair K has C(2K, K) (every increment
# writes the one counter), qadeer C(4,2) = 6 (the orders of the shared increments).
# Executions per search at most (the unreduced mutex fixture does not finish).
POR_CAP = 2000
POR_FIXTURES = [
    ("atomic_pair", [1], 2),
    ("atomic_pair", [2], 6),
    ("atomic_pair", [3], 20),
    ("qadeer", [], 6),
    ("qadeer3", [], 6),
    ("wakeup_locks", [], 4),
    # The 4-byte twins (counters side by side in 8-byte words): byte-exact dependency
    # gives them the same traces.
    ("atomic_pair_int", [3], 20),
    ("qadeer_int", [], 6),
    ("qadeer3_int", [], 6),
    ("wakeup_locks_int", [], 4),
    ("race_mutex_handoff_ok", [], None),
    ("race_barrier_phases_ok", [], None),
]
# (column, extra options, environment): no reduction, source sets alone, wakeup trees.
POR_MODES = [("full", ["--no-por"], {}), ("source", [], {"MCHECK_DPOR": "source"}),
             ("reduced", [], {})]


# ------------------------------------------------ bounded partial-order reduction of icb

# (fixture, args, preemption bound, execution cap): icb searches that complete their bound
# (condvar_ok: capped), and long executions where the reduction saves nothing and its
# bookkeeping per decision shows (bench_lock_turns N: about 4 N decisions per execution).
BPOR_FIXTURES = [
    ("qadeer", [], 2, 100000),
    ("wakeup_locks", [], 1, 100000),
    ("thread_lifecycle_ok", [], 2, 100000),
    ("sem_ok", [], 2, 100000),
    ("barrier_ok", [], 1, 100000),
    ("condvar_ok", [], 2, 3000),
    ("bench_lock_turns", [2000], 0, 10),
    ("bench_lock_turns", [8000], 0, 10),
]
# (column, extra options): icb unreduced, icb with bounded partial-order reduction.
BPOR_MODES = [("unreduced", ["--no-por"], {}), ("reduced", [], {})]


def measure_bpor(mc, opts):
    """icb with and without bounded partial-order reduction on each BPOR fixture, --jobs 1,
    jobs_reps runs each (alternating); returns rows of executions, completeness and median
    wall clock."""
    rows = []
    for n, a, bound, cap in BPOR_FIXTURES:
        row = {"fixture": label_of(n, a), "bound": bound, "cap": cap}
        row.update(run_modes(mc, opts, "icb", ["--strategy", "icb", "--preemption-bound",
                                                str(bound), "--max-executions", str(cap)],
                             BPOR_MODES, n, a, 900))
        rows.append(row)
    return rows


def run_modes(mc, opts, what, options, modes, n, a, timeout):
    """The search `options` (--jobs 1, no finding allowed) on fixture n with args a, in each
    of `modes` ((key, extra options, environment)), jobs_reps times, the modes alternating
    within a repetition so that noise hits them alike; returns per mode the executions seen,
    whether every run completed, and the median wall clock."""
    if not os.access(fixture(n), os.X_OK):
        raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
    runs = {key: ([], [], []) for key, _, _ in modes}
    for _ in range(opts.jobs_reps):
        for key, extra, env in modes:
            wall, rc, r = mc.check(options + ["--jobs", "1", "--quiet-program"] + extra,
                                   fixture(n), a, timeout=timeout, env=env)
            if rc != 0 or r is None or r.get("findings"):
                raise HarnessError("%s %s on %s: exit %d" % (what, key, label_of(n, a), rc))
            walls, execs, complete = runs[key]
            walls.append(wall)
            execs.append(r["executions"])
            complete.append(r.get("complete"))
    return {key: {"executions": sorted(set(execs)), "complete": all(complete),
                  "median_wall_s": median(walls)}
            for key, (walls, execs, complete) in runs.items()}


def print_bpor(rows, opts):
    print("icb with and without bounded partial-order reduction (--jobs 1, median of %d runs)"
          % opts.jobs_reps)
    cols = "  %-24s %5s %12s %8s %12s %8s %11s %9s"
    print(cols % ("fixture", "bound", "icb execs", "s", "bpor execs", "s", "execs ratio",
                  "s ratio"))
    for r in rows:
        u, d = r["unreduced"], r["reduced"]
        cell = lambda m: "/".join(str(x) for x in m["executions"]) + (
            "" if m["complete"] else "+")
        print(cols % (r["fixture"], r["bound"], cell(u), "%.2f" % u["median_wall_s"], cell(d),
                      "%.2f" % d["median_wall_s"],
                      "%.1fx" % (u["executions"][0] / max(1, d["executions"][0])),
                      "%.2fx" % (u["median_wall_s"] / max(1e-9, d["median_wall_s"]))))
    print("  command: mcheck --strategy icb --preemption-bound B [--no-por] --jobs 1 "
          "--quiet-program --max-executions CAP -- FIXTURE ARGS; '+': the cap was reached; "
          "ratios: unreduced / reduced")
    print()


# ------------------------------------------------ race-directed refinement

# Bug fixtures whose failure needs a switch between racy accesses.
REFINE_FIXTURES = ["race_reorder", "race_wronglock", "race_twostage", "race_lost_update"]
# (column, options): the default command, pct alone (its own defaults: no racy points,
# --keep-going so that a race does not end it), icb alone (refinement on by default).
REFINE_MODES = [
    ("default", []),
    ("pct", ["--strategy", "pct", "--keep-going", "--max-executions", "1000"]),
    ("icb", ["--strategy", "icb"]),
]


def measure_refine(mc, opts):
    """For each bug fixture and mode, --jobs 1, seed 1: the execution that first reported
    a failure other than a data race (None: not within the budget), the executions run
    and the refinement rounds."""
    rows = []
    for n in REFINE_FIXTURES:
        if not os.access(fixture(n), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
        row = {"fixture": n}
        for key, extra in REFINE_MODES:
            _wall, rc, r = mc.check(["--jobs", "1", "--seed", "1", "--quiet-program"] + extra,
                                    fixture(n), [], timeout=300)
            if r is None:
                raise HarnessError("%s on %s: no report (exit %s)" % (key, n, rc))
            failures = [f["execution"] for f in r.get("findings", [])
                        if f.get("kind") != "data_race"]
            row[key] = {"first_failure": min(failures) if failures else None,
                        "executions": r["executions"],
                        "rounds": r["coverage"].get("refinement_rounds", 0)}
        rows.append(row)
    return rows


def print_refine(rows, opts):
    print("Executions to the failure a race causes (--jobs 1, seed 1; rounds: refinement "
          "rounds, new trees with the racy sites as scheduling points)")
    cols = "  %-20s %16s %16s %16s"
    print(cols % ("fixture", "default (rounds)", "pct", "icb (rounds)"))
    cell = lambda m, rounds: ("-" if m["first_failure"] is None else str(m["first_failure"])) + (
        " (%d)" % m["rounds"] if rounds else "")
    for r in rows:
        print(cols % (r["fixture"], cell(r["default"], True), cell(r["pct"], False),
                      cell(r["icb"], True)))
    print("  commands: mcheck --jobs 1 --seed 1 --quiet-program [--strategy pct --keep-going "
          "--max-executions 1000 | --strategy icb] -- FIXTURE; '-': no failure reported")
    print()


# ------------------------------------------------ deep bugs (SCTBench-style table)

# (fixture, args): bugs that need a deep or specific ordering, bugs seen only in the output
# or in a file the program writes (written to a temporary path, not the working directory),
# and switches that only a timeout makes (a GIL-like lock handed over by a timed wait;
# a condvar signal taken by a later waiter). Fixtures whose verdict is data_race run with
# --keep-going (the race is reported first; the failure it leads to is what is counted).
DEEP_FILE = os.path.join(tempfile.gettempdir(), "mcheck-bench-file_lost_update.out")
DEEP_FIXTURES = [("deep_safestack", []), ("deep_order3", []), ("unjoined_account", []),
                 ("unjoined_token_ring", []), ("race_reorder", []), ("race_twostage", []),
                 ("output_lost_update", []), ("file_lost_update", [DEEP_FILE]),
                 ("gil_lost_update", []), ("cond_fifo_assumed", [])]
# (column, options): each strategy with its own defaults, and the default command.
DEEP_STRATEGIES = [
    ("random", ["--strategy", "random"]),
    ("pct3", ["--strategy", "pct"]),
    ("pct1..5", ["--strategy", "pct", "--pct-depth", "1..5"]),
    ("pos", ["--strategy", "pos"]),
    ("icb", ["--strategy", "icb"]),
    ("dfs", ["--strategy", "dfs"]),
    ("default", []),
]
DEEP_SEED_STRIDE = 100000


def expected_verdicts():
    with open(os.path.join(ROOT, "tracee-fixtures", "expected.json")) as f:
        return {e["name"]: e["verdict"] for e in json.load(f)}


def measure_deep(mc, opts):
    """For each deep fixture and strategy, --jobs 1, seeds 1..deep_seeds: the execution that
    first reported a failure other than a data race (None: not within --deep-budget)."""
    verdicts = expected_verdicts()
    rows = []
    for n, args in DEEP_FIXTURES:
        if not os.access(fixture(n), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
        row = {"fixture": n}
        keep = ["--keep-going"] if verdicts.get(n) == "data_race" else []
        for key, extra in DEEP_STRATEGIES:
            firsts = []
            for seed in deep_seeds(opts):
                _wall, rc, r = mc.check(["--jobs", "1", "--seed", str(seed), "--quiet-program",
                                         "--max-executions", str(opts.deep_budget)]
                                        + keep + extra, fixture(n), args, timeout=600)
                if r is None:
                    raise HarnessError("%s on %s: no report (exit %s)" % (key, n, rc))
                failures = [f["execution"] for f in r.get("findings", [])
                            if f.get("kind") != "data_race"]
                firsts.append(min(failures) if failures else None)
                if key in ("icb", "dfs"):
                    break  # deterministic: the seed changes nothing
            row[key] = firsts
        rows.append(row)
    return rows


def deep_seeds(opts):
    """Seeds far apart: execution i of seed S is execution 0 of seed S+i, so that runs with
    neighbouring seeds share almost all their executions and are no independent samples."""
    return [1 + k * DEEP_SEED_STRIDE for k in range(opts.deep_seeds)]


def deep_cell(firsts, budget):
    """Median executions to the failure, a missed run counting as more than the budget;
    with how many runs found it when not all did."""
    found = [x for x in firsts if x is not None]
    if not found:
        return "-"
    med = median([x if x is not None else budget + 1 for x in firsts])
    text = (">%d" % budget) if med > budget else "%g" % med
    return text if len(found) == len(firsts) else "%s (%d/%d)" % (text, len(found), len(firsts))


def print_deep(rows, opts):
    print("Executions to the first failure (not a race report), --jobs 1, median over seeds "
          "%s (icb, dfs: one run), budget %d"
          % (", ".join(map(str, deep_seeds(opts))), opts.deep_budget))
    keys = [k for k, _ in DEEP_STRATEGIES]
    cols = "  %-20s" + " %12s" * len(keys)
    print(cols % tuple(["fixture"] + keys))
    for r in rows:
        print(cols % tuple([r["fixture"]] + [deep_cell(r[k], opts.deep_budget) for k in keys]))
    print("  command: mcheck --jobs 1 --seed S --quiet-program --max-executions BUDGET "
          "[--keep-going for data_race fixtures] [--strategy random | pct [--pct-depth 1..5] | "
          "pos | icb | dfs] -- FIXTURE; '-': no run found it; (k/n): k of n runs found it, "
          "a miss counting as more than the budget")
    print()


def measure_por(mc, opts):
    """Exhaustive dfs of each POR fixture without reduction, with source sets alone and with
    wakeup trees (POR_MODES), --jobs 1, jobs_reps runs each (alternating); returns rows of
    executions, completeness and median wall clock."""
    rows = []
    for n, a, traces in POR_FIXTURES:
        row = {"fixture": label_of(n, a), "traces": traces}
        row.update(run_modes(mc, opts, "dfs", ["--strategy", "dfs", "--max-executions",
                                                str(POR_CAP)], POR_MODES, n, a, 600))
        rows.append(row)
    return rows


def print_por(rows, opts):
    print("Exhaustive dfs: no reduction, source sets alone, wakeup trees (--jobs 1, median of "
          "%d runs)" % opts.jobs_reps)
    cols = "  %-26s %8s" + " %12s %8s" * len(POR_MODES) + " %10s"
    head = ["fixture", "traces"]
    for key, _, _ in POR_MODES:
        head += [key + " execs", "s"]
    print(cols % tuple(head + ["full/wakeup"]))
    for r in rows:
        cells = [r["fixture"], "?" if r["traces"] is None else r["traces"]]
        for key, _, _ in POR_MODES:
            m = r[key]
            cells += ["/".join(str(x) for x in m["executions"]) + ("" if m["complete"] else "+"),
                      "%.2f" % m["median_wall_s"]]
        ratio = r["full"]["executions"][0] / max(1, r["reduced"]["executions"][0])
        print(cols % tuple(cells + ["%.1fx" % ratio]))
    print("  command: [MCHECK_DPOR=source] mcheck --strategy dfs [--no-por] --jobs 1 "
          "--quiet-program --max-executions %d -- FIXTURE ARGS; '+': search not complete "
          "(cap reached)" % POR_CAP)
    print()


# ------------------------------------------------ state caching

CACHE_FIXTURES = [
    ("atomic_pair", [2]),
    ("qadeer", []),
    ("holt_append", [3]),
    ("holt_append", [4]),
    ("holt_append", [5]),
    ("holt_append", [6]),
    ("race_mutex_handoff_ok", []),
    ("race_barrier_phases_ok", []),
    ("sem_ok", []),
]
# (column, extra options): no reduction, partial-order reduction, state cache alone, state
# cache with the sleep sets partial-order reduction becomes under it.
CACHE_MODES = [("full", ["--no-por"]), ("dpor", []), ("cache", ["--state-cache", "--no-por"]),
               ("cache+sleep", ["--state-cache"])]


def measure_cache(mc, opts):
    """Exhaustive dfs of each fixture without reduction, with partial-order reduction and
    with the state cache, --jobs 1, capped at POR_CAP executions; one run each (the counts
    are deterministic); returns rows of executions, transitions (beyond replayed prefixes),
    states (those of them chosen among several threads), completeness and wall clock."""
    rows = []
    for n, a in CACHE_FIXTURES:
        if not os.access(fixture(n), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
        row = {"fixture": label_of(n, a)}
        for key, extra in CACHE_MODES:
            wall, rc, r = mc.check(["--strategy", "dfs", "--jobs", "1", "--quiet-program",
                                    "--max-executions", str(POR_CAP)] + extra,
                                   fixture(n), a, timeout=600)
            if rc != 0 or r is None or r.get("findings"):
                raise HarnessError("dfs %s on %s: exit %d" % (key, label_of(n, a), rc))
            row[key] = {"executions": r["executions"], "states": r.get("states"),
                        "transitions": r.get("transitions"),
                        "complete": r.get("complete"), "wall_s": wall,
                        "state_cache": r.get("state_cache")}
        rows.append(row)
    return rows


def print_cache(rows, opts):
    print("Exhaustive dfs: no reduction, partial-order reduction, state cache (--jobs 1, one run)")
    cols = "  %-26s" + " %20s %7s" * len(CACHE_MODES)
    head = []
    for key, _ in CACHE_MODES:
        head += [key + " ex/trans/states", "s"]
    print(cols % tuple(["fixture"] + head))
    for r in rows:
        cells = [r["fixture"]]
        for key, _ in CACHE_MODES:
            m = r[key]
            cells += ["%d/%s/%s%s" % (m["executions"], m["transitions"], m["states"],
                                      "" if m["complete"] else "+"),
                      "%.2f" % m["wall_s"]]
        print(cols % tuple(cells))
    print("  command: mcheck --strategy dfs [--no-por] [--state-cache] --jobs 1 --quiet-program "
          "--max-executions %d -- FIXTURE ARGS; trans = transitions beyond replayed prefixes, "
          "states = those chosen among several threads; "
          "'+': search not complete (cap reached)" % POR_CAP)
    print()


# Incremental state hashing: bench_resident N touches N MiB before its threads run.
HASH_FIXTURES = [("bench_resident", [16]), ("bench_resident", [64])]
HASH_MODES = [("incremental", {}), ("full", {"MCHECK_FULL_STATE_HASH": "1"})]


def measure_hashing(mc, opts):
    """Exhaustive dfs --state-cache --no-races of each hashing fixture with write tracking
    (incremental hashing) and with every point hashed in full, jobs_reps runs each (the
    order alternates); returns rows of median wall clock, executions and pages."""
    rows = []
    for n, a in HASH_FIXTURES:
        if not os.access(fixture(n), os.X_OK):
            raise HarnessError("%s is missing: run `make fixtures`" % fixture(n))
        row = {"fixture": label_of(n, a)}
        walls = {k: [] for k, _ in HASH_MODES}
        for rep in range(opts.jobs_reps):
            for key, env in (HASH_MODES if rep % 2 == 0 else HASH_MODES[::-1]):
                wall, rc, r = mc.check(["--strategy", "dfs", "--jobs", "1", "--state-cache",
                                        "--no-races", "--quiet-program"],
                                       fixture(n), a, timeout=600, env=env)
                # --no-races: the search exhausts the synchronisation order only.
                done = r is not None and r.get("coverage", {}).get("synchronisation_exhausted")
                if rc != 0 or r is None or r.get("findings") or not done:
                    raise HarnessError("dfs --state-cache %s on %s: exit %d"
                                       % (key, label_of(n, a), rc))
                walls[key].append(wall)
                sc = r["state_cache"]
                row[key] = {"executions": r["executions"], "states": r["states"],
                            "pages_hashed": sc["pages_hashed"],
                            "pages_reused": sc["pages_reused"]}
        for key, _ in HASH_MODES:
            row[key]["median_wall_s"] = median(walls[key])
        if row["incremental"]["states"] != row["full"]["states"]:
            raise HarnessError("%s: incremental and full hashing explored different states"
                               % row["fixture"])
        rows.append(row)
    return rows


def print_hashing(rows, opts):
    print("State hashing with write tracking (incremental) and without (full): dfs "
          "--state-cache --no-races, --jobs 1, median of %d runs" % opts.jobs_reps)
    cols = "  %-20s %7s %22s %9s %22s %9s %8s"
    print(cols % ("fixture", "execs", "incremental hashed/kept", "s", "full hashed/kept", "s",
                  "speed-up"))
    for r in rows:
        i, f = r["incremental"], r["full"]
        print(cols % (r["fixture"], i["executions"],
                      "%d/%d" % (i["pages_hashed"], i["pages_reused"]),
                      "%.2f" % i["median_wall_s"],
                      "%d/%d" % (f["pages_hashed"], f["pages_reused"]),
                      "%.2f" % f["median_wall_s"],
                      "%.2fx" % (f["median_wall_s"] / i["median_wall_s"])))
    print("  command: [MCHECK_FULL_STATE_HASH=1] mcheck --strategy dfs --jobs 1 --state-cache "
          "--no-races --quiet-program -- FIXTURE ARGS; hashed/kept: pages read and hashed / "
          "present pages whose hash was kept")
    print()


# ------------------------------------------------ stress testing against mcheck

CRASH_KINDS = ("assertion", "crash")
# Finding kinds a native run can show by itself; the others (api_misuse,
# data_race) are silent natively: only a checker sees them.
VISIBLE_KINDS = ("deadlock", "exit_status") + CRASH_KINDS


def shows_bug(kind, lang, outcome):
    """Whether one native run's outcome shows a bug of this kind; None when the
    kind cannot be seen natively (api_misuse, data_race)."""
    if kind not in VISIBLE_KINDS:
        return None
    if kind == "deadlock":
        return outcome == "hang"
    if outcome == "hang":
        return False
    if kind in CRASH_KINDS:
        return outcome < 0 or (lang == "rust" and outcome == 101)
    if kind == "exit_status":
        return outcome != 0
    return False


def outcome_name(o):
    if o == "hang":
        return "hang"
    if o < 0:
        try:
            return signal.Signals(-o).name
        except ValueError:
            return "signal %d" % -o
    return "exit %d" % o


def fmt_s(t):
    return "%.0f ms" % (t * 1e3) if t < 1 else "%.2f s" % t


def stress_candidates():
    """(entry, reason to skip or None) for each buggy entry of expected.json."""
    with open(os.path.join(ROOT, "tracee-fixtures", "expected.json")) as f:
        entries = json.load(f)
    out = []
    for e in entries:
        if e.get("verdict", "none") == "none":
            continue
        if e["verdict"] in ("timeout", "livelock"):
            out.append((e, "verdict %s: hangs natively" % e["verdict"]))
        elif e.get("options"):
            out.append((e, "needs mcheck options %s" % " ".join(e["options"])))
        elif not os.access(os.path.join(ROOT, "tracee-fixtures", e["binary"]), os.X_OK):
            out.append((e, "binary missing"))
        else:
            out.append((e, None))
    return out


def measure_stress(mc, opts):
    started = time.perf_counter()
    rows = []
    for e, skip in stress_candidates():
        prog = os.path.join(ROOT, "tracee-fixtures", e["binary"])
        row = {"fixture": e["name"], "kind": e["verdict"], "lang": e.get("lang"),
               "command": "mcheck --quiet-program --jobs 1 -- %s"
                          % " ".join([e["binary"]] + e["args"])}
        rows.append(row)
        if skip:
            row["skipped"] = skip
            continue
        spent = time.perf_counter() - started
        if opts.stress_budget - spent < 1.0:
            row["skipped"] = ("time budget: %.0f s of the %.0f s for this section spent"
                              % (spent, opts.stress_budget))
            continue
        # (a) mcheck, the default command with one job.
        walls, elapsed, idx, kinds = [], [], [], []
        for _ in range(opts.stress_mcheck_reps):
            left = opts.stress_budget - (time.perf_counter() - started)
            wall, rc, r = mc.check(["--quiet-program", "--jobs", "1"], prog, e["args"],
                                   timeout=max(1.0, min(opts.stress_mcheck_timeout, left)),
                                   give_up=True)
            if wall is None:
                break
            walls.append(wall)
            f = (r or {}).get("findings") or []
            elapsed.append(r["elapsed_seconds"] if r else None)
            idx.append(f[0].get("execution") if f else None)
            kinds.append(f[0].get("kind") if f else None)
            if wall > 1.0:
                break     # a slow search is not repeated: keeps the section's time bounded
        if not walls:
            row["skipped"] = ("mcheck did not finish within %g s (interrupted)"
                              % max(1.0, min(opts.stress_mcheck_timeout, left)))
            continue
        row["mcheck_wall_s"] = median(walls)
        row["mcheck_wall_s_samples"] = walls
        row["mcheck_elapsed_s"] = median([x for x in elapsed if x is not None] or [0])
        row["mcheck_execution"] = idx[0]
        row["mcheck_executions_run"] = r["executions"] if r else None
        row["mcheck_execution_samples"] = idx
        row["mcheck_kind"] = kinds[0]
        row["mcheck_found"] = all(k == e["verdict"] for k in kinds)
        # (b) the native program, run again and again for a window of wall clock.
        # Silent kinds get the fixed window: runs are counted, nothing can be seen.
        window = min(opts.stress_cap, max(opts.stress_window,
                                          opts.stress_factor * row["mcheck_wall_s"]
                                          if e["verdict"] in VISIBLE_KINDS else 0))
        # The last run of a window may hang for hang_after more seconds.
        left = opts.stress_budget - (time.perf_counter() - started) - opts.hang_after
        if left < min(window, 1.0):
            row["skipped"] = ("time budget: no native window left after mcheck's %s"
                              % fmt_s(row["mcheck_wall_s"]))
            continue
        if left < window:
            row["window_cut_by_budget"] = True
            window = left
        cmd = [prog] + [str(a) for a in e["args"]]
        outcomes, hits = [], 0
        t0 = time.perf_counter()
        stopped_early = False
        while time.perf_counter() - t0 < window:
            n = len(outcomes)
            if (e["verdict"] in VISIBLE_KINDS and hits == n
                    and (n >= opts.probe_runs or (n >= 3 and time.perf_counter() - t0 >= 1.0))):
                stopped_early = True      # the bug has shown on every run so far
                break
            _w, o = native_outcome(cmd, opts.hang_after)
            outcomes.append(o)
            if shows_bug(e["verdict"], e.get("lang"), o):
                hits += 1
        took = time.perf_counter() - t0
        hist = {}
        for o in outcomes:
            hist[outcome_name(o)] = hist.get(outcome_name(o), 0) + 1
        n = len(outcomes)
        row.update({"native_window_s": window, "native_seconds": took,
                    "window_cut_by_budget": row.get("window_cut_by_budget", False),
                    "native_stopped_early": stopped_early,
                    "native_runs": n, "native_outcomes": hist})
        if e["verdict"] not in VISIBLE_KINDS:
            row["native_hits"] = None
            row["class"] = "silent"
            odd = n - hist.get("exit 0", 0)
            row["verdict"] = ("silent natively (%d runs in %.1f s%s); mcheck %s"
                              % (n, took, ", %d ended otherwise than exit 0" % odd if odd
                                 else ", all exit 0", fmt_s(row["mcheck_wall_s"])))
        else:
            row["native_hits"] = hits
            always = n > 0 and hits >= opts.always_fraction * n
            row["class"] = "always" if always else ("found" if hits else "missed")
            row["native_seconds_per_hit"] = took / hits if hits else None
            row["verdict"] = "%snative %d/%d in %.1f s; mcheck %s" % (
                "always: " if always else "", hits, n, took, fmt_s(row["mcheck_wall_s"]))
        if row["window_cut_by_budget"]:
            row["verdict"] += " (window cut short by the time budget)"
        if not row["mcheck_found"]:
            row["verdict"] += (" (but mcheck found nothing in %s executions)"
                               % row["mcheck_executions_run"] if kinds == [None] * len(kinds)
                               else " (but mcheck reported %s, expected %s)"
                               % ("/".join(sorted(set(str(k) for k in kinds))), e["verdict"]))
    return {"rows": rows, "seconds": time.perf_counter() - started}


def print_stress(st, opts):
    print("Stress testing vs mcheck on the buggy fixtures (mcheck --quiet-program --jobs 1, "
          "default portfolio, seed 0;")
    print("  native: the program run again and again for max(%g s, %g x mcheck's time), "
          "at most %g s; a run not done after %g s is killed and counts as a hang)"
          % (opts.stress_window, opts.stress_factor, opts.stress_cap, opts.hang_after))
    cols = "  %-22s %-11s %9s %5s %7s %7s %8s  %s"
    print(cols % ("fixture", "kind", "mcheck ms", "exec", "native", "hits", "s/hit", "verdict"))
    for r in st["rows"]:
        if "skipped" in r:
            print(cols % (r["fixture"], r["kind"], "-", "-", "-", "-", "-",
                          "skipped: " + r["skipped"]))
            continue
        hits = r["native_hits"]
        print(cols % (r["fixture"], r["kind"], "%.1f" % (r["mcheck_wall_s"] * 1e3),
                      r["mcheck_execution"] or "-", r["native_runs"],
                      "silent" if hits is None else hits,
                      "%.2f" % r["native_seconds_per_hit"] if r.get("native_seconds_per_hit")
                      else "-", r["verdict"]))
    done = [r for r in st["rows"] if "skipped" not in r]
    by = {}
    for r in done:
        by.setdefault(r["class"], []).append(r["fixture"])
    print("  mcheck ms: wall clock of the whole mcheck process, which stops at its first finding "
          "(median of %d runs, 1 when it takes over 1 s);" % opts.stress_mcheck_reps)
    print("  exec: the execution that found it; native: runs in the window; hits: runs that "
          "showed the bug; s/hit: window / hits")
    print("  always (bug on >= %.0f%% of native runs): %s" % (
        100 * opts.always_fraction, ", ".join(by.get("always", [])) or "none"))
    print("  found natively in the window, but not every run: %s"
          % (", ".join(by.get("found", [])) or "none"))
    print("  missed natively in the window: %s" % (", ".join(by.get("missed", [])) or "none"))
    notfound = [r["fixture"] for r in done if not r["mcheck_found"]]
    if notfound:
        print("  NOTE: mcheck did not report the expected kind for: %s" % ", ".join(notfound))
    print("  silent natively (api_misuse, data_race): %s" % (", ".join(by.get("silent", [])) or "none"))
    print("  section time %.0f s" % st["seconds"])
    print()


# ---------------------------------------------------------------------- main

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def out(cmd):
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return p.stdout.decode(errors="replace").strip()

    return {
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cpu": cpu,
        "mcheck": out([MCHECK, "--version"]),
        "git_commit": out(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]) or None,
        "src_modified_since_commit": bool(out(["git", "-C", ROOT, "status", "--porcelain",
                                               "--", "src"])),
        "loadavg_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
    }


def main():
    global MCHECK
    ap = argparse.ArgumentParser(
        description="mcheck benchmarks: cost per scheduling point and per execution.")
    ap.add_argument("--reps", type=int, default=11,
                    help="repetitions of each per-point measurement (default 11)")
    ap.add_argument("--n", type=int, default=20000,
                    help="loop iterations of the large runs under mcheck (default 20000)")
    ap.add_argument("--native-n", type=int, default=1000000,
                    help="loop iterations of the native per-operation runs (default 1000000)")
    ap.add_argument("--executions", type=int, default=300,
                    help="executions per mcheck run, whole-execution benchmark (default 300)")
    ap.add_argument("--exec-reps", type=int, default=5,
                    help="mcheck runs of the whole-execution benchmark (default 5)")
    ap.add_argument("--native-runs", type=int, default=300,
                    help="native runs of the whole-execution benchmark (default 300)")
    ap.add_argument("--no-perf", action="store_true",
                    help="skip counting the tracer's syscalls per point with perf trace")
    ap.add_argument("--rate-executions", type=int, default=200,
                    help="executions per mcheck run, executions-per-second benchmark "
                         "(default 200)")
    ap.add_argument("--rate-reps", type=int, default=5,
                    help="mcheck runs per fixture, executions-per-second benchmark (default 5)")
    ap.add_argument("--rate-native-runs", type=int, default=200,
                    help="native runs per fixture, executions-per-second benchmark "
                         "(default 200)")
    ap.add_argument("--jobs-reps", type=int, default=3,
                    help="runs of each search with --jobs 1 and --jobs 2 (default 3)")
    ap.add_argument("--jobs-random-executions", type=int, default=400,
                    help="executions of the random search timed with 1 and 2 jobs (default 400)")
    ap.add_argument("--stress-window", type=float, default=2.0,
                    help="native stress-testing window per buggy fixture, seconds (default 2)")
    ap.add_argument("--stress-factor", type=float, default=20.0,
                    help="... or this many times mcheck's time, if longer (default 20)")
    ap.add_argument("--stress-cap", type=float, default=5.0,
                    help="longest native window per fixture, seconds (default 5)")
    ap.add_argument("--stress-budget", type=float, default=120.0,
                    help="time budget of the whole stress-testing section; fixtures that "
                         "would exceed it are skipped and said so (default 120 s)")
    ap.add_argument("--stress-mcheck-reps", type=int, default=3,
                    help="mcheck runs per buggy fixture (default 3)")
    ap.add_argument("--stress-mcheck-timeout", type=float, default=20.0,
                    help="an mcheck run on a buggy fixture still going after this many "
                         "seconds is interrupted and the fixture skipped (default 20)")
    ap.add_argument("--hang-after", type=float, default=1.0,
                    help="a native run not finished after this many seconds is killed and "
                         "counted as a hang (default 1)")
    ap.add_argument("--probe-runs", type=int, default=10,
                    help="native runs after which a fixture whose bug has shown on every run "
                         "has its window cut short (default 10)")
    ap.add_argument("--always-fraction", type=float, default=0.9,
                    help="share of native runs showing the bug for 'always': stress testing "
                         "finds it too (default 0.9)")
    ap.add_argument("--fair-unfair-executions", type=int, default=2000,
                    help="fair: budget of the --no-fair dfs runs (default 2000)")
    ap.add_argument("--fair-unfair-max-steps", type=int, default=200,
                    help="fair: --max-steps of the --no-fair dfs runs (default 200)")
    ap.add_argument("--audit-executions", type=int, default=100,
                    help="audit: max_executions of each target of the manifest (default 100)")
    ap.add_argument("--deep-seeds", type=int, default=5,
                    help="seeds per randomised strategy in section deep (default: 5)")
    ap.add_argument("--deep-budget", type=int, default=3000,
                    help="--max-executions of each run in section deep (default: 3000)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated subset of %s (default: all)" % ",".join(SECTIONS))
    ap.add_argument("--mcheck", default=MCHECK,
                    help="the mcheck binary to measure (default target/release/mcheck)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-results.json"),
                    help="where to write the JSON results")
    opts = ap.parse_args()
    if min(opts.reps, opts.n, opts.native_n, opts.executions, opts.exec_reps,
           opts.native_runs, opts.rate_executions, opts.rate_reps, opts.rate_native_runs,
           opts.jobs_reps, opts.jobs_random_executions, opts.stress_mcheck_reps,
           opts.probe_runs, opts.deep_seeds, opts.deep_budget) < 1:
        ap.error("counts must be positive")
    if min(opts.stress_window, opts.stress_cap, opts.stress_budget, opts.hang_after) <= 0:
        ap.error("times must be positive")
    sections = [x for x in opts.sections.split(",") if x]
    if not sections or any(x not in SECTIONS for x in sections):
        ap.error("--sections: choose from %s" % ",".join(SECTIONS))

    MCHECK = os.path.abspath(opts.mcheck)
    if not os.access(MCHECK, os.X_OK):
        raise HarnessError("%s is missing: run `cargo build --release` (or `make bench`)"
                           % MCHECK)
    started = time.perf_counter()
    notes = check_fixtures() if {"points", "whole"} & set(sections) else []
    tmpdir = tempfile.mkdtemp(prefix="mcheck-bench-")
    # Run a private copy: others may rebuild target/release/mcheck meanwhile.
    built = MCHECK
    MCHECK = os.path.join(tmpdir, "mcheck")
    shutil.copy2(built, MCHECK)
    info = machine_info()
    info["mcheck_path"] = built
    # git_commit and src_modified_since_commit describe the repository; they
    # say which build was measured only when that is target/release/mcheck.
    info["mcheck_is_repo_build"] = os.path.abspath(built) == os.path.join(
        ROOT, "target", "release", "mcheck")
    info["mcheck_sha256"] = sha256_of(MCHECK)
    info["mcheck_built_at"] = time.strftime("%Y-%m-%d %H:%M:%S",
                                            time.localtime(os.path.getmtime(built)))
    mc = Mcheck(tmpdir)

    print("mcheck benchmarks: %s, %s, kernel %s, %d CPUs, load %.2f"
          % (info["mcheck"], info["cpu"], info["kernel"], info["nproc"],
             info["loadavg_at_start"]))
    print("  %d repetitions, N = %d under mcheck, N = %d natively; medians reported%s"
          % (opts.reps, opts.n, opts.native_n,
             "; mcheck --jobs 1 unless said otherwise" if mc.has_jobs else ""))
    print("  sections: %s; mcheck binary built %s, sha256 %s (a private copy is run)"
          % (", ".join(sections), info["mcheck_built_at"], info["mcheck_sha256"][:16]))
    print("  repository at %s%s; measuring %s" % (
        info["git_commit"], " with uncommitted changes in src/"
        if info["src_modified_since_commit"] else "", os.path.relpath(built)))
    for n in notes:
        print("  check: " + n)
    print()
    rates = jobs = stress = fair = por = cache = hashing = audit = refine = bpor = None
    deep = None
    jobs_failed, jobs_notes = [], []

    section_seconds = {}
    try:
        t = time.perf_counter()
        if "points" in sections or "whole" in sections:
            raw, native_raw, whole, variants, one_exec, native, native_marked, syscalls = \
                measure_points_and_whole(mc, opts, sections, tmpdir)
            section_seconds["points+whole"] = time.perf_counter() - t
        if "rate" in sections:
            progress("executions per second on small fixtures")
            t = time.perf_counter()
            rates = measure_rates(mc, opts)
            section_seconds["rate"] = time.perf_counter() - t
        if "jobs" in sections:
            progress("1 job vs 2 jobs")
            t = time.perf_counter()
            jobs, jobs_failed, jobs_notes = measure_jobs(mc, opts)
            section_seconds["jobs"] = time.perf_counter() - t
        if "por" in sections:
            progress("dfs with and without partial-order reduction")
            t = time.perf_counter()
            por = measure_por(mc, opts)
            section_seconds["por"] = time.perf_counter() - t
        if "bpor" in sections:
            progress("icb with and without bounded partial-order reduction")
            t = time.perf_counter()
            bpor = measure_bpor(mc, opts)
            section_seconds["bpor"] = time.perf_counter() - t
        if "refine" in sections:
            progress("race-directed refinement")
            t = time.perf_counter()
            refine = measure_refine(mc, opts)
            section_seconds["refine"] = time.perf_counter() - t
        if "deep" in sections:
            progress("executions to deep bugs per strategy")
            t = time.perf_counter()
            deep = measure_deep(mc, opts)
            section_seconds["deep"] = time.perf_counter() - t
        if "cache" in sections:
            progress("dfs with and without state caching")
            t = time.perf_counter()
            cache = measure_cache(mc, opts)
            hashing = measure_hashing(mc, opts)
            section_seconds["cache"] = time.perf_counter() - t
        if "stress" in sections:
            progress("stress testing vs mcheck on the buggy fixtures")
            t = time.perf_counter()
            stress = measure_stress(mc, opts)
            section_seconds["stress"] = time.perf_counter() - t
        if "audit" in sections:
            progress("mcheck audit with 1 and 2 jobs")
            t = time.perf_counter()
            audit = measure_audit(opts, tmpdir)
            section_seconds["audit"] = time.perf_counter() - t
        if "fair" in sections:
            progress("dfs on spin waits with and without fairness")
            t = time.perf_counter()
            fair = measure_fair(mc, opts)
            section_seconds["fair"] = time.perf_counter() - t
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    # ----------------------------------------------------------------- report
    results = {"machine": info, "parameters": {k: v for k, v in vars(opts).items()
                                               if k != "out"},
               "sections": sections,
               "mcheck_has_jobs_option": mc.has_jobs, "points": [], "whole_execution": {}}
    misses = []
    if "points" in sections:
        report_points(results, misses, raw, native_raw, syscalls, opts)
    if "whole" in sections:
        report_whole(results, mc, whole, variants, one_exec, native, native_marked, opts)
    if rates is not None:
        print_rates(rates, opts)
        results["executions_per_second"] = rates
    if por is not None:
        print_por(por, opts)
        results["partial_order_reduction"] = por
    if bpor is not None:
        print_bpor(bpor, opts)
        results["bounded_partial_order_reduction"] = bpor
    if refine is not None:
        print_refine(refine, opts)
        results["race_refinement"] = refine
    if deep is not None:
        print_deep(deep, opts)
        results["deep_bugs"] = deep
    if cache is not None:
        print_cache(cache, opts)
        results["state_cache"] = cache
    if hashing is not None:
        print_hashing(hashing, opts)
        results["incremental_hashing"] = hashing
    if jobs is not None:
        print_jobs(jobs, jobs_failed, jobs_notes, opts)
        results["jobs_speedup"] = {"searches": jobs, "checks_failed": jobs_failed,
                                   "notes": jobs_notes}
    if stress is not None:
        print_stress(stress, opts)
        results["stress_vs_mcheck"] = stress
    if fair is not None:
        print_fair(fair, opts)
        results["fair_dfs"] = fair
    if audit is not None:
        print_audit(audit, opts)
        results["audit_throughput"] = audit
    total = time.perf_counter() - started
    results["harness_seconds"] = total
    results["section_seconds"] = section_seconds
    results["machine"]["loadavg_at_end"] = os.getloadavg()[0]
    results["targets_missed"] = misses
    results["checks_failed"] = jobs_failed
    if "points" in sections:
        print("Targets (<= %g us per syscall-type point, <= %g us per breakpoint-type point): %s"
              % (TARGET_SYSCALL_US, TARGET_BREAKPOINT_US,
                 "MISSED by " + ", ".join(misses) + " (benchmarks inform; exit status stays 0)"
                 if misses else "all met"))
    print("Harness time %.0f s (%s); load average %.2f at start, %.2f at end; JSON written to %s"
          % (total, ", ".join("%s %.0f s" % kv for kv in section_seconds.items()),
             info["loadavg_at_start"], results["machine"]["loadavg_at_end"],
             os.path.relpath(opts.out)))

    os.makedirs(os.path.dirname(opts.out), exist_ok=True)
    with open(opts.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    if jobs_failed:
        print("bench: error: %s" % "; ".join(jobs_failed), file=sys.stderr)
        return 2
    return 0


def progress(what):
    sys.stdout.flush()
    print("  ... %s" % what, file=sys.stderr, flush=True)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def measure_points_and_whole(mc, opts, sections, tmpdir):
    """Sections "points" (1, 2) and "whole" (3).  Returns the raw samples."""
    raw = native_raw = whole = variants = one_exec = native = native_marked = None
    syscalls = None
    # Warm-up: page cache, CPU frequency, first-run effects.
    for _l, name, _p, _k, _t in POINT_BENCHES:
        mc.run(fixture(name), [opts.n // 10], 1, marks=True)
    mc.run(fixture(WHOLE), [], 20)

    if "points" in sections:
        progress("cost per scheduling point")
        # ---- 1 and 2: per-point costs, every fixture in every repetition
        raw = {b[1]: {"loop_us": [], "report_us": [], "loop0_s": [], "loopN_s": [],
                      "report0_s": [], "reportN_s": []} for b in POINT_BENCHES}
        for rep in range(opts.reps):
            k = rep % len(POINT_BENCHES)
            for _label, name, per_iter, _kind, _target in POINT_BENCHES[k:] + POINT_BENCHES[:k]:
                pair = [0, opts.n] if rep % 2 == 0 else [opts.n, 0]
                res = {arg: mc.run(fixture(name), [arg], 1, marks=True) for arg in pair}
                r0, rn = res[0], res[opts.n]
                points = opts.n * per_iter
                d = raw[name]
                d["loop0_s"].append(r0.loop)
                d["loopN_s"].append(rn.loop)
                d["report0_s"].append(r0.report["elapsed_seconds"])
                d["reportN_s"].append(rn.report["elapsed_seconds"])
                d["loop_us"].append((rn.loop - r0.loop) / points * 1e6)
                d["report_us"].append((rn.report["elapsed_seconds"]
                                       - r0.report["elapsed_seconds"]) / points * 1e6)

        # Native cost of the same operations, same method (for the slowdown).
        native_raw = {b[1]: [] for b in POINT_BENCHES}
        for rep in range(opts.reps):
            for _label, name, per_iter, _kind, _target in POINT_BENCHES:
                t0 = run_native(fixture(name), [0], marks=True).loop
                tn = run_native(fixture(name), [opts.native_n], marks=True).loop
                native_raw[name].append((tn - t0) / (opts.native_n * per_iter) * 1e6)

    if "whole" in sections:
        progress("whole executions")
        # ---- 3: whole executions.  Per execution = time from the end of the program's
        # work in one execution to its end in the next ('E' marks; executions from the
        # fork snapshot taken at the first thread creation do not run main's start
        # again), i.e. everything mcheck does per execution; cross-check:
        # elapsed_seconds / executions.  Variants rotate so that noise hits them alike.
        prog = fixture(WHOLE)
        variants = [("jobs1", {"jobs": 1})]
        if mc.has_random:
            variants.append(("random_jobs1", {"jobs": 1, "strategy": "random"}))
        if mc.has_jobs:
            variants.append(("default_jobs", {"jobs": None}))
        whole = {v: {"marks_us": [], "report_us": [], "main_us": [], "strategy": None,
                     "executions": None} for v, _ in variants}
        for _ in range(opts.exec_reps):
            for v, kw in variants:
                r = mc.run(prog, [], opts.executions, marks=True, exact=False, **kw)
                n_exec = r.report["executions"]
                if len(r.ends()) != n_exec:
                    raise HarnessError("%s: %d executions but %d ends of the work"
                                       % (WHOLE, n_exec, len(r.ends())))
                w = whole[v]
                if r.per_end() is not None:
                    w["marks_us"].append(r.per_end() * 1e6)
                w["report_us"].append(r.report["elapsed_seconds"] / n_exec * 1e6)
                w["main_us"].extend(x * 1e6 for x in r.mains())
                w["strategy"] = r.report.get("strategy")
                w["executions"] = n_exec
        one_exec = [mc.run(prog, [], 1) for _ in range(opts.reps)]
        native = [run_native(prog, []) for _ in range(opts.native_runs)]
        native_marked = [run_native(prog, [], marks=True)
                         for _ in range(min(100, opts.native_runs))]

    if "points" in sections and not opts.no_perf:
        progress("tracer syscalls per point (perf trace)")
        syscalls = tracer_syscalls_per_point(mc, min(opts.n, 2000), tmpdir)
    return raw, native_raw, whole, variants, one_exec, native, native_marked, syscalls


def report_points(results, misses, raw, native_raw, syscalls, opts):
    print("Cost per scheduling point: (t_N - t_0) / points, mcheck --max-executions 1")
    cols = "%-38s %6s %9s %13s %10s %9s %8s %6s %9s %5s"
    hdr = cols % ("point type", "points", "median us", "min-max us", "report us",
                  "native us", "slowdown", "target", "of target", "")
    print(hdr)
    print("-" * len(hdr))
    for label, name, per_iter, kind, target in POINT_BENCHES:
        d = raw[name]
        med = median(d["loop_us"])
        rep_med = median(d["report_us"])
        nat = median(native_raw[name])
        verdict = "PASS" if med <= target else "MISS"
        if verdict == "MISS":
            misses.append(label)
        slowdown = med / nat if nat > 0 else None
        print(cols % (
            label, opts.n * per_iter, "%.2f" % med,
            "%.2f-%.2f" % (min(d["loop_us"]), max(d["loop_us"])), "%.2f" % rep_med,
            "%.4f" % nat, "%.0fx" % slowdown if slowdown else "-", "%g us" % target,
            "%.0f%%" % (100 * med / target), verdict))
        entry = {
            "name": label, "fixture": name, "kind": kind,
            "points_per_iteration": per_iter, "n": opts.n, "points": opts.n * per_iter,
            "median_us_per_point": med,
            "min_us_per_point": min(d["loop_us"]), "max_us_per_point": max(d["loop_us"]),
            "samples_us_per_point": d["loop_us"],
            "median_us_per_point_from_report": rep_med,
            "samples_us_per_point_from_report": d["report_us"],
            "median_loop_s_n0": median(d["loop0_s"]), "median_loop_s_n": median(d["loopN_s"]),
            "median_report_elapsed_s_n0": median(d["report0_s"]),
            "median_report_elapsed_s_n": median(d["reportN_s"]),
            "native_us_per_operation": nat,
            "slowdown_vs_native": slowdown,
            "target_us": target, "ratio_to_target": med / target, "verdict": verdict,
        }
        if syscalls is not None:
            entry["tracer_syscalls_per_point"] = syscalls.get(name)
        results["points"].append(entry)
    print("  median us: from the loop marks; report us: from elapsed_seconds (cross-check)")
    rep0 = median([x for b in POINT_BENCHES for x in raw[b[1]]["report0_s"]])
    loop0 = median([x for b in POINT_BENCHES for x in raw[b[1]]["loop0_s"]])
    print("  one N=0 execution: elapsed_seconds %.1f ms (median), empty loop %.1f us"
          % (rep0 * 1e3, loop0 * 1e6))
    if rep0 > 0.02:
        print("  NOTE: elapsed_seconds of a trivial 1-execution run is %.0f ms: mcheck's own "
              "overhead around the execution (e.g. polling granularity) is included there, "
              "so the report column is coarse." % (rep0 * 1e3))
    print()

    if syscalls is not None:
        print("What one point costs the tracer (perf trace -s on mcheck's threads, "
              "differential, per point)")
        for label, name, _p, _k, _t in POINT_BENCHES:
            per = syscalls.get(name) or {}
            stops = per.get("wait4", 0) + per.get("waitid", 0)
            detail = ", ".join("%s %g" % kv for kv in sorted(per.items(), key=lambda kv: -kv[1]))
            print("  %-38s %4.1f syscalls, %3.1f ptrace stops: %s"
                  % (label, sum(per.values()), stops, detail))
        print()


def report_whole(results, mc, whole, variants, one_exec, native, native_marked, opts):
    nat = median([r.wall for r in native])
    nat_main = median([r.loop for r in native_marked]) * 1e6
    ow = median([r.wall for r in one_exec])
    oe = median([r.report["elapsed_seconds"] for r in one_exec])
    print("One whole execution of tracee-fixtures/build/%s (2 threads, 5 lock/unlock each)"
          % WHOLE)
    print("  %-58s %12s %12s %12s %9s" % ("", "per exec us", "report us", "main() us",
                                         "vs native"))
    names = {"jobs1": "mcheck, %s strategy, --jobs 1",
             "random_jobs1": "mcheck, %s strategy, --jobs 1",
             "default_jobs": "mcheck, %s strategy, default --jobs (throughput)"}
    if not mc.has_jobs:
        names["jobs1"] = "mcheck, %s strategy"
    wres = {}
    for v, _kw in variants:
        w = whole[v]
        pe = median(w["marks_us"]) if w["marks_us"] else median(w["report_us"])
        main_us = median(w["main_us"]) if w["main_us"] and v != "default_jobs" else None
        print("  %-58s %12.1f %12.1f %12s %8.2fx" % (
            names[v] % w["strategy"], pe, median(w["report_us"]),
            "%.1f" % main_us if main_us is not None else "-", pe / (nat * 1e6)))
        wres[v] = {"strategy": w["strategy"], "executions_per_run": w["executions"],
                   "us_per_execution": pe, "us_per_execution_samples": w["marks_us"],
                   "us_per_execution_from_report": median(w["report_us"]),
                   "us_per_execution_from_report_samples": w["report_us"],
                   "median_main_us": main_us, "ratio_to_native": pe / (nat * 1e6)}
    print("  %-58s %12.1f %12s %12.1f %8.2fx" % ("native fork+exec (median of %d runs)"
                                                 % opts.native_runs, nat * 1e6, "-",
                                                 nat_main, 1.0))
    print("  %-58s %12.1f %12.1f %12s %8.2fx" % ("whole mcheck process, --max-executions 1",
                                                 ow * 1e6, oe * 1e6, "-", ow / nat))
    print("  per exec: start of main to start of main in the next execution (native: process"
          " wall clock);")
    print("  report: elapsed_seconds / executions; main(): first to last line of main,"
          " one execution")
    results["whole_execution"] = {
        "fixture": WHOLE,
        "mcheck": wres,
        "native_us_per_run": nat * 1e6,
        "native_min_us": min(r.wall for r in native) * 1e6,
        "native_max_us": max(r.wall for r in native) * 1e6,
        "native_main_us": nat_main,
        "mcheck_one_execution_process_wall_us": ow * 1e6,
        "mcheck_one_execution_elapsed_us": oe * 1e6,
        "ratio_one_execution_process_to_native": ow / nat,
    }
    print()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        print("bench: error: %s" % e, file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
