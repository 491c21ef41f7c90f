#!/usr/bin/env bash
# mcheck benchmarks (going back under `replay --gdb`: bench/gdb_replay.py): cost per scheduling point (syscall-type, breakpoint-type), per
# recorded memory access, real programs against helgrind,
# and per whole execution, executions per second on small fixtures against
# native runs, the speed-up from 1 to 2 jobs, and stress testing against
# mcheck on the buggy fixtures, measured side by side with medians over
# repetitions.  `make bench` builds target/release/mcheck and the fixtures,
# then runs this script.  Options are passed on to bench/bench.py (--help).
# Last, the race detector alone (no tracee): examples/detector_bench.rs, ns per
# recorded access and ms per 64 MiB range, new shadow memory vs the old per-byte map.
# Writes target/bench-results.json.  Exits 0 whether or not the targets are
# met; 2 when the harness itself cannot run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ ! -x target/release/mcheck ]]; then
    echo "bench: target/release/mcheck is missing: run 'make bench' (or 'cargo build --release')" >&2
    exit 2
fi
for f in bench_yield bench_mutex bench_atomic bench_two_threads bench_tiny bench_slow_init bench_table_init \
         bench_sync_prefix bench_resident; do
    if [[ ! -x tracee-fixtures/build/$f ]]; then
        echo "bench: tracee-fixtures/build/$f is missing: run 'make bench' (or 'make fixtures')" >&2
        exit 2
    fi
done
command -v python3 >/dev/null || { echo "bench: python3 is required" >&2; exit 2; }

python3 bench/bench.py "$@"
python3 bench/races.py
python3 bench/snapshots.py
python3 bench/gdb_replay.py
# The detector alone: built here since `cargo build --release` does not build examples.
"${CARGO:-cargo}" run --quiet --release --example detector_bench
python3 bench/real_programs.py
# The reduction oracle at larger sizes (docs/architecture.md, "The reduction oracle"): every
# reduced search against unreduced dfs, and bounded POR bound by bound, on random programs.
echo "== reduction oracle (minutes) =="
"${CARGO:-cargo}" test --quiet --release --lib explore::oracle::whole_oracle_large -- --ignored --nocapture 2>&1 \
    | grep -E '^seed 14 size 4|test result'
MCHECK_ORACLE_PROGRAMS=exits "${CARGO:-cargo}" test --quiet --release --lib explore::oracle::bounded_por_oracle_large -- --ignored --nocapture 2>&1 \
    | grep -E '^total|test result'
