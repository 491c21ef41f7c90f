//! The instrumentation part: what mcheck puts into the program's code and why. Once the
//! libraries are mapped: breakpoints on the threading API (libgomp's locks included), atomic and PAUSE instructions,
//! allocators, modelled libc calls, Rust's panic entry and the dynamic loader's rendezvous;
//! from the first thread creation on: the memory-access sites of the code under test,
//! patched to log into the access log (`patching.rs`; the sites and what patching them keeps
//! are `sites.rs`). The code as changed is
//! [`code::CodeEdits`]; the per-file plans (`plan.rs`, computed once per worker) say what
//! each file gets. It calls the process part (memory, registers, injected system calls).

pub(super) mod chunks;
pub(super) mod code;
pub(super) mod gomp;
pub(super) mod hooks;
pub(super) mod memo;
pub(super) mod patching;
pub(super) mod plan;
pub(super) mod scan_cache;
pub(super) mod sites;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::Result;

use self::code::{BreakpointKind, CodeEdits};
use self::gomp::is_gomp;
use self::hooks::{merge_aliases, Hook};
use self::plan::{role_of, Alloc, ModulePlan, PlanCache, Role};
use self::sites::Recording;
use crate::binary::{ElfFile, ErrnoTls};
use crate::model::ThreadId;
use crate::run::process::stacks::Symbols;
use crate::run::process::Process;

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
    /// Record accesses through patched code where possible (else every access site keeps
    /// a breakpoint; `MCHECK_PATCH=off` sets this off).
    pub patch: bool,
    /// Check for heap errors (use after free, double and invalid free): frees stay on
    /// breakpoints and freed blocks are held in quarantine.
    pub heap_checks: bool,
    /// Most freed blocks held in quarantine (0: none held).
    pub quarantine_blocks: usize,
}

/// The instrumentation of one execution (kept with snapshots).
#[derive(Clone, Default)]
pub(in crate::run) struct Instrumentation {
    /// Access recording: started or not, files waiting for the first thread.
    rec: Recording,
    /// Start addresses of the mapped files already instrumented.
    instrumented: HashSet<u64>,
    /// Address ranges known to hold atomics in this process (runtime addresses).
    atomic_ranges: Vec<std::ops::Range<u64>>,
    /// Threads moved out of generated code in this execution (signals, interrupts).
    moved_out: u64,
}

/// What instrumenting reads and changes besides its own state.
pub(in crate::run) struct Ctx<'a> {
    /// The process (memory, registers, injected calls).
    pub p: &'a mut Process,
    /// Its code as mcheck changed it.
    pub code: &'a mut CodeEdits,
    /// What to instrument.
    pub cfg: &'a InstrumentConfig,
    /// The program (which files are its own).
    pub program: &'a Path,
    /// The worker's per-file plans.
    pub plans: &'a mut PlanCache,
    /// The worker's instrumentations of a first thread creation, to do again.
    pub memos: &'a mut memo::RecordingMemos,
    /// The worker's symbols (the module map).
    pub symbols: &'a mut Symbols,
    /// Sites this execution needs a real stop at (kept on breakpoints).
    pub stop_sites: &'a HashSet<u64>,
}

impl Instrumentation {
    /// Address ranges known to hold atomics (from DWARF).
    pub fn atomic_ranges(&self) -> &[std::ops::Range<u64>] {
        &self.atomic_ranges
    }

    /// Whether accesses are recorded yet (the program created a thread).
    pub fn recording(&self) -> bool {
        self.rec.started
    }

    /// What a snapshot keeps (the count of threads moved out is per execution).
    pub fn saved(&self) -> Instrumentation {
        Instrumentation {
            moved_out: 0,
            ..self.clone()
        }
    }

    /// Threads moved out of generated code in this execution.
    pub fn moved_out(&self) -> u64 {
        self.moved_out
    }
}

impl Instrumentation {
    /// Puts breakpoints on the threading API, atomic and PAUSE instructions of the code
    /// under test, once libraries are mapped (at the entry point, and after each change of
    /// the link map, through thread `t`); memory-access sites, allocators and modelled libc
    /// calls are instrumented from the first thread creation on (`patching.rs`). The
    /// per-file plans are computed once per worker.
    pub fn install(&mut self, ctx: &mut Ctx<'_>, t: ThreadId, main_snapshot: bool) -> Result<()> {
        ctx.symbols.refresh(ctx.p.pid.as_raw());
        let modules = ctx.symbols.modules().clone();
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
                    ctx.code.add_breakpoints(&ctx.p.mem, &addrs, |_| {
                        Some(BreakpointKind::LinkMapChanged)
                    })?;
                }
                continue;
            }
            let role = role_of(
                &m.path,
                ctx.program,
                &ctx.cfg.trace_lib,
                &ctx.cfg.no_trace_lib,
            );
            if role == Role::System {
                if ctx.cfg.races || is_gomp(&m.path) {
                    if let Some(plan) = ctx.plans.get(&m.path, role, ctx.cfg.races) {
                        add_hooks(ctx, &plan, m.bias)?;
                        if ctx.cfg.races
                            && (!plan.library_atomics.is_empty() || !plan.library_plain.is_empty())
                        {
                            self.add_access_module(ctx, t, plan, m.bias)?;
                        }
                    }
                }
                continue;
            }
            let Some(plan) = ctx.plans.get(&m.path, role, ctx.cfg.races) else {
                continue;
            };
            let bias = m.bias;
            add_hooks(ctx, &plan, bias)?;
            if role == Role::Program && main_snapshot {
                // The startup snapshot of a program that created no thread goes at main.
                if let Ok(elf) = ElfFile::load(&m.path) {
                    let mains: Vec<u64> = elf
                        .function_addresses("main")
                        .into_iter()
                        .map(|a| a + bias)
                        .collect();
                    ctx.code
                        .add_breakpoints(&ctx.p.mem, &mains, |_| Some(BreakpointKind::Main))?;
                }
            }
            if ctx.p.errno_tp_offset.is_none() {
                ctx.p.errno_tp_offset = match plan.errno {
                    Some(ErrnoTls::Constant(c)) => Some(c),
                    Some(ErrnoTls::GotSlot(s)) => {
                        ctx.p.mem.read_u64(s + bias).ok().map(|v| v as i64)
                    }
                    None => None,
                };
            }
            let panics: Vec<u64> = plan.panics.iter().map(|a| a + bias).collect();
            ctx.code
                .add_breakpoints(&ctx.p.mem, &panics, |_| Some(BreakpointKind::Panic))?;
            let atomics: HashMap<u64, usize> = plan
                .atomics
                .iter()
                .enumerate()
                .map(|(i, insn)| (insn.ip() + bias, i))
                .collect();
            let addrs: Vec<u64> = atomics.keys().copied().collect();
            ctx.code.add_breakpoints(&ctx.p.mem, &addrs, |a| {
                atomics.get(&a).map(|&index| BreakpointKind::Atomic {
                    plan: plan.clone(),
                    index,
                    bias,
                })
            })?;
            let pauses: Vec<u64> = plan.pauses.iter().map(|a| a + bias).collect();
            ctx.code
                .add_breakpoints(&ctx.p.mem, &pauses, |_| Some(BreakpointKind::Pause))?;
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
            ctx.code.add_breakpoints(&ctx.p.mem, &addrs, |a| {
                allocs.get(&a).map(|&k| BreakpointKind::Alloc(k))
            })?;
            if ctx.cfg.races {
                self.add_access_module(ctx, t, plan.clone(), bias)?;
            }
        }
        Ok(())
    }
}

/// Puts breakpoints at the entries of the hooked functions of a file loaded at `bias`
/// (functions that share an address get one merged hook).
fn add_hooks(ctx: &mut Ctx<'_>, plan: &ModulePlan, bias: u64) -> Result<()> {
    let mut hooks: HashMap<u64, Hook> = HashMap::new();
    for &(a, h) in &plan.hooks {
        let h = h.rebased(bias);
        hooks
            .entry(a + bias)
            .and_modify(|old| *old = merge_aliases(*old, h))
            .or_insert(h);
    }
    let addrs: Vec<u64> = hooks.keys().copied().collect();
    ctx.code.add_breakpoints(&ctx.p.mem, &addrs, |a| {
        hooks.get(&a).map(|&h| BreakpointKind::Hook(h))
    })?;
    Ok(())
}

/// Whether `p` is the dynamic loader (ld-linux).
fn is_dynamic_loader(p: &std::path::Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ld-linux") || n.starts_with("ld64.so"))
}
