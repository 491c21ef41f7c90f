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
     under mcheck versus a native fork+exec of the same binary.

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

The runs of one repetition are made back to back (the order rotates between
repetitions) so that machine noise hits every fixture alike; the figures
reported are medians over repetitions.

Prints a table and writes the same figures as JSON (default:
target/bench-results.json).  Exit status: 0 whether targets are met or not;
2 when the harness itself cannot run (missing binary, mcheck failure, a
fixture that does not make the points it should).
"""

import argparse
import json
import os
import platform
import re
import shutil
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
        """Arrival times of the 'S' marks (one per execution of main)."""
        return [t for b, t in self.stamps if b == b"S"]

    def per_start(self):
        """Mean time from one 'S' mark to the next, or None with fewer than 2."""
        s = self.starts()
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
               "--quiet-program", "--json", report]
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


def run_native(prog, args, marks=False):
    return timed_run([prog] + [str(a) for a in args], marks)


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
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-results.json"),
                    help="where to write the JSON results")
    opts = ap.parse_args()
    if min(opts.reps, opts.n, opts.native_n, opts.executions, opts.exec_reps,
           opts.native_runs) < 1:
        ap.error("counts must be positive")

    if not os.access(MCHECK, os.X_OK):
        raise HarnessError("%s is missing: run `cargo build --release` (or `make bench`)"
                           % MCHECK)
    started = time.perf_counter()
    notes = check_fixtures()
    info = machine_info()
    tmpdir = tempfile.mkdtemp(prefix="mcheck-bench-")
    mc = Mcheck(tmpdir)

    print("mcheck benchmarks: %s, %s, kernel %s, %d CPUs, load %.2f"
          % (info["mcheck"], info["cpu"], info["kernel"], info["nproc"],
             info["loadavg_at_start"]))
    print("  %d repetitions, N = %d under mcheck, N = %d natively; medians reported%s"
          % (opts.reps, opts.n, opts.native_n,
             "; mcheck --jobs 1 unless said otherwise" if mc.has_jobs else ""))
    for n in notes:
        print("  check: " + n)
    print()

    try:
        # Warm-up: page cache, CPU frequency, first-run effects.
        for _l, name, _p, _k, _t in POINT_BENCHES:
            mc.run(fixture(name), [opts.n // 10], 1, marks=True)
        mc.run(fixture(WHOLE), [], 20)

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

        # ---- 3: whole executions.  Per execution = time from the start of main
        # in one execution to the start of main in the next ('S' marks), i.e.
        # everything mcheck does per execution; cross-check: elapsed_seconds /
        # executions.  Variants rotate so that noise hits them alike.
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
                if len(r.starts()) != n_exec:
                    raise HarnessError("%s: %d executions but %d starts of main"
                                       % (WHOLE, n_exec, len(r.starts())))
                w = whole[v]
                if r.per_start() is not None:
                    w["marks_us"].append(r.per_start() * 1e6)
                w["report_us"].append(r.report["elapsed_seconds"] / n_exec * 1e6)
                w["main_us"].extend(x * 1e6 for x in r.mains())
                w["strategy"] = r.report.get("strategy")
                w["executions"] = n_exec
        one_exec = [mc.run(prog, [], 1) for _ in range(opts.reps)]
        native = [run_native(prog, []) for _ in range(opts.native_runs)]
        native_marked = [run_native(prog, [], marks=True)
                         for _ in range(min(100, opts.native_runs))]

        syscalls = None if opts.no_perf else tracer_syscalls_per_point(mc, min(opts.n, 2000),
                                                                        tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    # ----------------------------------------------------------------- report
    results = {"machine": info, "parameters": {k: v for k, v in vars(opts).items()
                                               if k != "out"},
               "mcheck_has_jobs_option": mc.has_jobs, "points": [], "whole_execution": {}}
    misses = []

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
    total = time.perf_counter() - started
    results["harness_seconds"] = total
    results["machine"]["loadavg_at_end"] = os.getloadavg()[0]
    results["targets_missed"] = misses
    print("Targets (<= %g us per syscall-type point, <= %g us per breakpoint-type point): %s"
          % (TARGET_SYSCALL_US, TARGET_BREAKPOINT_US,
             "MISSED by " + ", ".join(misses) + " (benchmarks inform; exit status stays 0)"
             if misses else "all met"))
    print("Harness time %.0f s; load average %.2f at start, %.2f at end; JSON written to %s"
          % (total, info["loadavg_at_start"], results["machine"]["loadavg_at_end"],
             os.path.relpath(opts.out)))

    os.makedirs(os.path.dirname(opts.out), exist_ok=True)
    with open(opts.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        print("bench: error: %s" % e, file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
