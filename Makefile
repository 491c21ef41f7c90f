# mcheck — build, fixtures, tests, demo and benchmarks.
#   make demo    check a bundled fixture with a deadlock, and audit a few (builds everything first)
#   make test    the whole test suite (what CI runs)
#   make bench   side-by-side performance figures (see docs/performance.md)

CARGO ?= cargo
MCHECK := target/release/mcheck
REAL_PROGRAM_PACKAGES := pigz xz-utils zstd pbzip2 lbzip2 coreutils ripgrep python3 \
  libglib2.0-dev libuv1-dev pkg-config gdb valgrind
# The other real programs `make bench` measures (bench/real_programs.py).
BENCH_PACKAGES := plzip p7zip-full git perl fd-find sqlite3 imagemagick ffmpeg nodejs

.PHONY: all build fixtures demo test lint bench clean deps

all: build fixtures

# Everything the build needs that a fresh Debian 12 machine may lack.
deps:
	@command -v cargo >/dev/null || { echo "cargo (rustup) is required"; exit 1; }
	@command -v clippy-driver >/dev/null && cargo fmt --version >/dev/null 2>&1 || \
	  rustup component add clippy rustfmt
	@command -v gcc >/dev/null && command -v g++ >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq gcc g++ make; }
	@test -f /usr/lib/x86_64-linux-gnu/libc.a || \
	  { apt-get update -qq && apt-get install -y -qq libc6-dev; }
	@# The debugger tests/it/replay_gdb.rs drives against `mcheck replay --gdb`.
	@command -v gdb >/dev/null || { apt-get update -qq && apt-get install -y -qq gdb; }
	@# xmllint validates the audit's junit.xml against tests/data/junit-10.xsd (tests/it/audit.rs).
	@command -v xmllint >/dev/null || { apt-get update -qq && apt-get install -y -qq libxml2-utils; }
	@# Python's jsonschema validates SARIF against tests/data/sarif-schema-2.1.0.json.
	@/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq python3-jsonschema; }
	@# libc's separate debug information (/usr/lib/debug): stacks name libc's functions with
	@# file:line (start_thread at pthread_create.c:442); tests/it/library_stacks.rs checks it.
	@dpkg -s libc6-dbg >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libc6-dbg; }
	@# GoogleTest (static library and headers) for the `mcheck test` fixture gtest_suite.
	@test -f /usr/lib/x86_64-linux-gnu/libgtest.a || \
	  { apt-get update -qq && apt-get install -y -qq libgtest-dev; }
	@# Real multi-threaded programs the tests run mcheck on, and the libraries of two fixtures.
	@missing=""; for p in $(REAL_PROGRAM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  test -z "$$missing" || { apt-get update -qq && apt-get install -y -qq $$missing; }

build: deps
	$(CARGO) build --release

fixtures: deps
	$(MAKE) -C tracee-fixtures

demo: build fixtures
	@echo "== mcheck on an ABBA deadlock (tracee-fixtures/src/c/abba.c) =="
	-$(MCHECK) --quiet-program -- tracee-fixtures/build/abba_O0
	@echo "== mcheck on a correct producer/consumer (C++) =="
	$(MCHECK) --quiet-program --max-executions 200 -- tracee-fixtures/build/cpp_prodcons_ok
	@echo "== mcheck audit of a few fixtures (tracee-fixtures/audit-demo.toml, docs/audits.md) =="
	-$(MCHECK) audit tracee-fixtures/audit-demo.toml --out mcheck-out/audit

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

# clippy's lints (those of `make lint`, warnings denied) run inside the test build itself:
# clippy-driver is the rustc of mcheck's own crates while cargo builds every target, so
# mcheck is compiled once, not once for clippy and again for the tests. (CLIPPY_ARGS is how
# cargo-clippy hands its arguments to clippy-driver.) Dependencies are built by plain rustc.
CLIPPY_IN_BUILD = RUSTC_WORKSPACE_WRAPPER="$$(command -v clippy-driver)" \
  CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# The fixtures are built while cargo builds the tests: rustc leaves a core idle for long
# stretches (one crate's front end is one thread), which gcc fills.
test: deps
	$(CARGO) fmt --check
	$(MAKE) -C tracee-fixtures & fixtures=$$!; \
	  $(CLIPPY_IN_BUILD) $(CARGO) test --release --no-run; built=$$?; \
	  wait $$fixtures && test $$built = 0
	$(CLIPPY_IN_BUILD) $(CARGO) test --release

bench: build fixtures
	@missing=""; for p in $(BENCH_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  test -z "$$missing" || { apt-get update -qq && apt-get install -y -qq $$missing; }
	bench/run.sh

clean:
	$(CARGO) clean
	$(MAKE) -C tracee-fixtures clean
