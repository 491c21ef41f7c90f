#!/bin/sh
# OpenMP race benchmarks under mcheck (or helgrind), as measured in docs/openmp.md.
#
# DataRaceBench (github.com/LLNL/dataracebench, micro-benchmarks/*.c): build the programs
# first, in a directory holding the sources and signaling.h (the ones without `omp target`,
# `omp teams` or `omp simd`):
#   for f in $(grep -L "omp target\|omp simd\|omp teams" DRB*.c); do
#     gcc -fopenmp -O0 -g -w -I. -o bin/${f%.c} $f -lm; done
# The OpenMP fixtures: tracee-fixtures/build/omp_* (after `make fixtures`).
#
# usage: dataracebench.sh TOOL OUT [PROGRAM...]
#   TOOL     mcheck's path, or `helgrind` (valgrind --tool=helgrind, one run)
#   PROGRAM  the binaries (default: bin/DRB*, from that directory)
# OUT gets one line per program: its name, its truth (racy / free, from the name: `-yes`
# and `_race` are racy, `-no` and `_ok` race-free) and the verdict: race / none / cut
# (25 s) / other:KIND. A program counts as positive when a race is reported (helgrind: in
# the program's own source file). The totals and precision / recall go to stdout.
# mcheck runs as the default command of the measurements: 2 OpenMP threads, one job,
# seed 1, 200 executions at most.
T=$1; OUT=$2; shift 2
[ $# -eq 0 ] && set -- bin/DRB*
: > "$OUT"
for b in "$@"; do
  n=$(basename "$b")
  case $n in *-yes|*_race) truth=racy ;; *-no|*_ok) truth=free ;; *) truth=unknown ;; esac
  if [ "$T" = helgrind ]; then
    out=$(OMP_NUM_THREADS=2 timeout -s TERM 25 valgrind --tool=helgrind "$b" 2>&1 >/dev/null < /dev/null)
    st=$?
    if printf '%s\n' "$out" | grep -A3 'Possible data race' | grep -E '^==[0-9]+==    at ' | grep -q "($n\.c:"; then v=race
    elif [ $st -eq 124 ]; then v=cut
    else v=none; fi
  else
    out=$(OMP_NUM_THREADS=2 timeout -s TERM 25 "$T" --jobs 1 --quiet-program --progress never --seed 1 --max-executions 200 -- "$b" 2>&1 < /dev/null)
    if printf '%s\n' "$out" | grep -q '^mcheck: data_race'; then v=race
    elif printf '%s\n' "$out" | grep -qE '^mcheck: (timeout|deadlock|livelock|crash|assertion|exit_status|api_misuse)'; then v=other:$(printf '%s\n' "$out" | grep -oE '^mcheck: (timeout|deadlock|livelock|crash|assertion|exit_status|api_misuse)' | head -1 | cut -d' ' -f2)
    elif printf '%s\n' "$out" | grep -q 'interrupted by SIGTERM'; then v=cut
    else v=none; fi
  fi
  echo "$n $truth $v" >> "$OUT"
done
awk '{ p = ($3 == "race") }
     $2 == "racy" { if (p) tp++; else fn++ }
     $2 == "free" { if (p) fp++; else tn++ }
     END { printf "TP %d FP %d FN %d TN %d precision %.3f recall %.3f\n", tp, fp, fn, tn,
           (tp + fp) ? tp / (tp + fp) : 0, (tp + fn) ? tp / (tp + fn) : 0 }' "$OUT"
