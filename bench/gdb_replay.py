#!/usr/bin/env python3
"""Going back in `mcheck replay --gdb` against a forward replay (Python 3 standard library).

    python3 bench/gdb_replay.py       # also run by `make bench` (bench/run.sh)

For each fixture: find its bug once, then, medians over --reps repetitions,
  - plain replay: wall time of plain `mcheck replay SCHEDULE` (the whole execution);
  - inside one gdb session, timed by gdb's Python (gdb's start-up is not counted):
    - continue: from main to the first stop (the finding, or a race's later access);
    - reverse-continue to the last lock: from there, with a breakpoint on
      pthread_mutex_lock (the fixture's own function for some), back to its last hit;
    - reverse-continue over it all: from there, with a breakpoint at `main` instead,
      back over the whole execution (scans re-execute the path looking for the last hit,
      at the start of main, and one more execution goes there);
    - goto end / goto 0: `monitor goto LAST` forward to the last decision, then
      `monitor goto 0` back to the first.
Each gdb session runs twice: going back from fork snapshots (the default pacing) and with
`--gdb-snapshot-every 0`, from the program's start (the figures "off → snapshots").
Then a real program, CPython's lost update (the script of tests/it/real_programs.rs; skipped
without /usr/bin/python3), once with patched access sites (the default) and once with
every access site on a breakpoint (MCHECK_PATCH=off), its breakpoint on Py_BytesMain
(python3 is stripped; main is not exported).
Prints a markdown table; writes target/gdb-replay-results.json. Exit 0 whatever the
figures; 2 when the harness cannot measure (no gdb).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench import FIXTURES, MCHECK, median

# Fixture, and the function whose last call before the finding reverse-continue goes to.
FIXTURE_NAMES = [("abba_O0", "pthread_mutex_lock"), ("race_counter", "bump"),
                 ("order_null_deref", "pthread_mutex_lock"),
                 ("turns_last_assert", "record")]

PYTHON = "/usr/bin/python3"
# The script tests/it/real_programs.rs checks: four threads, counter = f(counter).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                       "lost_update.py")) as _script:
    LOST_UPDATE = _script.read()


def find_schedule(argv, out, extra=()):
    subprocess.run([MCHECK, "--quiet-program", "--progress", "never", *extra, "--out", out,
                    "--", *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    files = sorted(f for f in os.listdir(out) if f.endswith(".json")) if os.path.isdir(out) else []
    return os.path.join(out, files[0]) if files else None


def steps_of(schedule):
    with open(schedule) as f:
        return len(json.load(f)["decisions"])


def gdb_session(prog, schedule, last, where="main", recent="pthread_mutex_lock", env=None,
                snapshots=True):
    every = [] if snapshots else ["--gdb-snapshot-every", "0"]
    mc = subprocess.Popen([MCHECK, "replay", "--quiet-program", "--gdb", *every, schedule],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env)
    address = None
    for line in mc.stderr:
        m = re.search(r"target remote ([^']+)'", line)
        if m:
            address = m.group(1)
            break
    if address is None:
        mc.kill()
        mc.wait()
        return None
    script = [
        "set sysroot /", "set remotetimeout 900", f"target remote {address}",
        "python import time; t = [time.time()]",
        "continue",
        "python t.append(time.time())",
        f"break {recent}",
        "reverse-continue",
        "python t.append(time.time())",
        "delete",
        f"break {where}",
        "reverse-continue",
        "python t.append(time.time())",
        f"monitor goto {last}",
        "python t.append(time.time())",
        "monitor goto 0",
        "python t.append(time.time())",
        "python print('TIMES ' + ' '.join('%f' % (b - a) for a, b in zip(t, t[1:])))",
        "kill",
    ]
    cmd = ["gdb", "-batch", "-nx"]
    for c in script:
        cmd += ["-ex", c]
    out = subprocess.run(cmd + [prog], capture_output=True, text=True, timeout=900).stdout
    try:
        mc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        mc.kill()
        mc.wait()
    m = re.search(r"TIMES ([0-9.]+) ([0-9.]+) ([0-9.]+) ([0-9.]+) ([0-9.]+)", out)
    if not m:
        return None
    return tuple(float(g) for g in m.groups())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    opts = ap.parse_args()
    if shutil.which("gdb") is None:
        print("gdb_replay: gdb is not installed", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(name, [os.path.join(FIXTURES, name)], "main", recent, None, opts.reps, ())
                 for name, recent in FIXTURE_NAMES]
        if os.access(PYTHON, os.X_OK):
            script = os.path.join(tmp, "python", "lost_update.py")
            os.makedirs(os.path.dirname(script))
            with open(script, "w") as f:
                f.write(LOST_UPDATE)
            search = ("--seed", "1", "--execution-timeout", "120", "--time-limit", "200")
            off = dict(os.environ, MCHECK_PATCH="off")
            cases.append(("python3 lost update", [PYTHON, script], "Py_BytesMain",
                          "pthread_mutex_lock", None, 3, search))
            cases.append(("same, MCHECK_PATCH=off", [PYTHON, script], "Py_BytesMain",
                          "pthread_mutex_lock", off, 1, search))
        found = {}
        for name, argv, where, recent, env, reps, extra in cases:
            key = tuple(argv)
            if key not in found:
                found[key] = find_schedule(argv, os.path.join(tmp, "out-" + str(len(found))),
                                           extra)
            schedule = found[key]
            if schedule is None:
                continue
            last = steps_of(schedule)
            fwd, timed, plain = [], [], []
            for _ in range(reps):
                t = time.time()
                subprocess.run([MCHECK, "replay", "--quiet-program", schedule],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=600, env=env)
                fwd.append(time.time() - t)
                # Side by side: from snapshots, then from the start.
                for snapshots, into in ((True, timed), (False, plain)):
                    s = gdb_session(argv[0], schedule, last, where, recent, env, snapshots)
                    if s:
                        into.append(s)
            col = lambda runs, i: median([s[i] for s in runs]) if runs else None
            names = ["continue", "reverse_continue_recent", "reverse_continue", "goto_end",
                     "goto_0"]
            row = {"fixture": name, "steps": last, "replay_s": median(fwd)}
            for i, n in enumerate(names):
                row[f"gdb_{n}_s"] = col(timed, i)
                row[f"gdb_{n}_no_snapshots_s"] = col(plain, i)
            rows.append(row)
    print("\n### Going back under gdb vs a forward replay (medians, seconds; "
          "no snapshots → snapshots)\n")
    print("| fixture | steps | plain replay | gdb: continue to the finding | "
          "gdb: reverse-continue to the last lock | gdb: reverse-continue over it all | "
          "gdb: goto end | gdb: goto 0 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"
    pair = lambda r, n: f"{fmt(r[f'gdb_{n}_no_snapshots_s'])} → {fmt(r[f'gdb_{n}_s'])}"
    for r in rows:
        print(f"| {r['fixture']} | {r['steps']} | {fmt(r['replay_s'])} | "
              f"{pair(r, 'continue')} | {pair(r, 'reverse_continue_recent')} | "
              f"{pair(r, 'reverse_continue')} | {pair(r, 'goto_end')} | "
              f"{pair(r, 'goto_0')} |")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "target", "gdb-replay-results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
