//! mcheck's integration tests, in one binary: each module was its own test binary, each
//! linking the whole crate (one link instead of twenty). Every module runs the
//! real `mcheck` binary on real programs; `tests/fixture_verdicts.rs` stays a binary of its
//! own, because it takes the whole machine for its fixture runs (the test binaries run one
//! after another). Run one module with `cargo test --release --test it MODULE::`.

#[path = "../common/mod.rs"]
mod common;

mod access_recording;
mod audit;
mod bad_input;
mod cpus;
mod files;
mod interrupts;
mod library_stacks;
mod limits;
mod no_leftovers;
mod output_oracle;
mod process_tree;
mod races;
mod real_programs;
mod replay;
mod replay_gdb;
mod snapshots;
mod state_cache;
mod step_limit;
mod strategies;
mod test_suites;
