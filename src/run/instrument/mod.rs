//! Instrumentation of the mapped files: breakpoints on the threading API, atomic and PAUSE
//! instructions, memory accesses of the code under test, allocators, modelled libc calls,
//! Rust's panic entry and the dynamic loader's rendezvous.

pub(super) mod code;
pub(super) mod hooks;
pub(super) mod patching;
pub(super) mod plan;
pub(super) mod scan_cache;

use std::collections::HashMap;

/// What is instrumented and recorded, and where the program must stop.
#[derive(Clone, Debug)]
pub struct InstrumentConfig {
    /// Detect data races (memory accesses are recorded).
    pub races: bool,
    /// Make accesses to addresses found racy earlier scheduling points.
    pub preempt_on_races: bool,
    /// Extra libraries to trace (path substrings).
    pub trace_lib: Vec<String>,
    /// Libraries not to trace (path substrings).
    pub no_trace_lib: Vec<String>,
    /// Access sites kept on breakpoints although they could be patched (under gdb: the
    /// later accesses of the execution's races, so that the replay stops at them).
    pub stop_at_sites: Vec<u64>,
    /// Stacks of races are taken at calls of modelled memory functions: their hooks must
    /// stop (the thread must be at the call when its stack is taken), not log.
    pub stacks_in_calls: bool,
    /// Record accesses through patched code where possible (else every access site keeps
    /// a breakpoint; `MCHECK_PATCH=off` sets this off).
    pub patch: bool,
}

use anyhow::Result;

use self::code::BreakpointKind;
use self::hooks::{merge_aliases, Hook};
use self::plan::{role_of, Alloc, Role};
use crate::binary::{ElfFile, ErrnoTls};
use crate::run::execution::Execution;

impl Execution<'_> {
    /// Puts breakpoints on the threading API, atomic and PAUSE instructions of the code
    /// under test, once libraries are mapped (at the entry point, and after each change of
    /// the link map, through thread `t`); memory-access sites, allocators and modelled libc
    /// calls are instrumented from the first thread creation on (`patching.rs`). The
    /// per-file plans are computed once per worker.
    pub(super) fn install_hooks(&mut self, t: crate::model::ThreadId) -> Result<()> {
        self.worker.symbols.refresh(self.p.pid.as_raw());
        let modules = self.worker.symbols.modules().clone();
        for m in modules.modules() {
            if !self.instrumented.insert(m.start) {
                continue;
            }
            if is_dynamic_loader(&m.path) {
                // The r_debug rendezvous: ld.so calls _dl_debug_state after every change of
                // the link map (dlopen, dlclose); new libraries get instrumented there.
                if let Ok(elf) = ElfFile::load(&m.path) {
                    let addrs: Vec<u64> = elf
                        .function_addresses("_dl_debug_state")
                        .into_iter()
                        .map(|a| a + m.bias)
                        .collect();
                    self.code.add_breakpoints(&self.p.mem, &addrs, |_| {
                        Some(BreakpointKind::LinkMapChanged)
                    })?;
                }
                continue;
            }
            let role = role_of(
                &m.path,
                &self.cfg.program.path,
                &self.cfg.instrument.trace_lib,
                &self.cfg.instrument.no_trace_lib,
            );
            if role == Role::System {
                if self.cfg.instrument.races {
                    let plan = self.worker.plans.get(&m.path, role, true);
                    if let Some(plan) = plan.filter(|p| !p.library_atomics.is_empty()) {
                        self.add_access_module(t, plan, m.bias)?;
                    }
                }
                continue;
            }
            let Some(plan) = self
                .worker
                .plans
                .get(&m.path, role, self.cfg.instrument.races)
            else {
                continue;
            };
            let bias = m.bias;
            let mut hooks: HashMap<u64, Hook> = HashMap::new();
            for &(a, h) in &plan.hooks {
                hooks
                    .entry(a + bias)
                    .and_modify(|old| *old = merge_aliases(*old, h))
                    .or_insert(h);
            }
            let addrs: Vec<u64> = hooks.keys().copied().collect();
            self.code.add_breakpoints(&self.p.mem, &addrs, |a| {
                hooks.get(&a).map(|&h| BreakpointKind::Hook(h))
            })?;
            if role == Role::Program && self.snapshot_at_main && self.snapshot_key.is_some() {
                // The startup snapshot of a program that created no thread goes at main.
                if let Ok(elf) = ElfFile::load(&m.path) {
                    let mains: Vec<u64> = elf
                        .function_addresses("main")
                        .into_iter()
                        .map(|a| a + bias)
                        .collect();
                    self.code
                        .add_breakpoints(&self.p.mem, &mains, |_| Some(BreakpointKind::Main))?;
                }
            }
            if self.p.errno_tp_offset.is_none() {
                self.p.errno_tp_offset = match plan.errno {
                    Some(ErrnoTls::Constant(c)) => Some(c),
                    Some(ErrnoTls::GotSlot(s)) => {
                        self.p.mem.read_u64(s + bias).ok().map(|v| v as i64)
                    }
                    None => None,
                };
            }
            let panics: Vec<u64> = plan.panics.iter().map(|a| a + bias).collect();
            self.code
                .add_breakpoints(&self.p.mem, &panics, |_| Some(BreakpointKind::Panic))?;
            let atomics: HashMap<u64, usize> = plan
                .atomics
                .iter()
                .enumerate()
                .map(|(i, insn)| (insn.ip() + bias, i))
                .collect();
            let addrs: Vec<u64> = atomics.keys().copied().collect();
            self.code.add_breakpoints(&self.p.mem, &addrs, |a| {
                atomics.get(&a).map(|&index| BreakpointKind::Atomic {
                    plan: plan.clone(),
                    index,
                    bias,
                })
            })?;
            let pauses: Vec<u64> = plan.pauses.iter().map(|a| a + bias).collect();
            self.code
                .add_breakpoints(&self.p.mem, &pauses, |_| Some(BreakpointKind::Pause))?;
            self.atomic_ranges.extend(
                plan.atomic_ranges
                    .iter()
                    .map(|r| r.start + bias..r.end + bias),
            );
            let allocs: HashMap<u64, Alloc> = plan
                .allocators
                .iter()
                .map(|&(a, k)| (a + bias, k))
                .collect();
            let addrs: Vec<u64> = allocs.keys().copied().collect();
            self.code.add_breakpoints(&self.p.mem, &addrs, |a| {
                allocs.get(&a).map(|&k| BreakpointKind::Alloc(k))
            })?;
            if self.cfg.instrument.races {
                self.add_access_module(t, plan.clone(), bias)?;
            }
        }
        Ok(())
    }
}

/// Whether `p` is the dynamic loader (ld-linux).
fn is_dynamic_loader(p: &std::path::Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ld-linux") || n.starts_with("ld64.so"))
}
