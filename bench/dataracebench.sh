#!/bin/sh
# DataRaceBench (github.com/LLNL/dataracebench, micro-benchmarks/*.c) under mcheck, as
# measured in docs/openmp.md. Build the programs first, in a directory holding the sources
# and signaling.h (the ones without `omp target`, `omp teams` or `omp simd`):
#   for f in $(grep -L "omp target\|omp simd\|omp teams" DRB*.c); do
#     gcc -fopenmp -O0 -g -w -I. -o bin/${f%.c} $f -lm; done
# usage (from that directory): dataracebench.sh MCHECK OUT
# OUT gets one line per program: its name and race / none / cut (25 s) / other:KIND.
M=$1; OUT=$2; : > $OUT
for b in bin/DRB*; do
  n=$(basename $b)
  out=$(OMP_NUM_THREADS=2 timeout -s TERM 25 $M --jobs 1 --quiet-program --progress never --seed 1 --max-executions 200 -- $b 2>&1 < /dev/null)
  if printf '%s\n' "$out" | grep -q '^mcheck: data_race'; then v=race
  elif printf '%s\n' "$out" | grep -qE '^mcheck: (timeout|deadlock|livelock|crash|assertion|exit_status|api_misuse)'; then v=other:$(printf '%s\n' "$out" | grep -oE '^mcheck: (timeout|deadlock|livelock|crash|assertion|exit_status|api_misuse)' | head -1 | cut -d' ' -f2)
  elif printf '%s\n' "$out" | grep -q 'interrupted by SIGTERM'; then v=cut
  else v=none; fi
  echo "$n $v" >> $OUT
done
