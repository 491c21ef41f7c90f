//! One execution: launch the program, then alternate "the strategy picks an enabled thread,
//! the model executes its operation, the thread runs natively to its next scheduling point"
//! until the program ends or something goes wrong. Every exit path kills and reaps the
//! whole process tree.

use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::capture::{failure_message, StderrCapture};
use super::determinism::Determinism;
use super::happens_before;
use super::hooks::Hook;
use super::hooks::{merge_aliases, Convention, HookContext};
use super::livelock::{Window, WindowStep};
use super::plan::{role_of, Alloc, MemFn, Role};
use super::process::{BreakpointKind, Process, StopPlace, TracedThread};
use super::races::{PendingReturn, ReturnAction};
use super::snapshot::{self, Restored, SavedPoint};
use super::state_hash;
use super::syscalls::{self, ClockCall, SyscallAction, TimeSource};
use super::worker_state::WorkerState;
use crate::binary::{ElfFile, ErrnoTls};
use crate::detect::race::RaceDetector;
use crate::explore::{Decision, Divergence, FairFilter, Point, Scheduler};
use crate::model::{
    Completion, Footprint, MemoryView, Model, ModelFinding, ObjectKind, Op, ThreadId,
};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::tracee::procfs;
use crate::tracee::seccomp::nr;
use crate::tracee::spawn::{spawn_traced, StdioSetup};
use crate::tracee::{events, regs, Event, WaitOutcome};

/// How to run the program.
#[derive(Clone, Debug)]
pub struct ExecutionConfig {
    /// The program (absolute path).
    pub program: PathBuf,
    /// Its arguments (argv[1..]).
    pub args: Vec<OsString>,
    /// Its environment (mcheck adds `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
    pub env: Vec<(OsString, OsString)>,
    /// Hide the program's stdout and stderr.
    pub quiet_program: bool,
    /// The exit status that is not a finding.
    pub expect_exit: i32,
    /// Longest a thread may run without reaching a scheduling point.
    pub execution_timeout: Duration,
    /// Most scheduling decisions in one execution (None: unbounded).
    pub max_steps: Option<u64>,
    /// Record a readable trace of every step (replay).
    pub trace: bool,
    /// Stop after this many decisions (replay --until).
    pub stop_after: Option<u64>,
    /// Trap rdtsc/rdtscp (only needed when the program's own code reads the counter; the
    /// trap makes every ptrace stop dearer on VMs).
    pub trap_rdtsc: bool,
    /// Detect data races.
    pub races: bool,
    /// Make accesses to addresses found racy earlier scheduling points.
    pub preempt_on_races: bool,
    /// Extra libraries to trace (path substrings).
    pub trace_lib: Vec<String>,
    /// Libraries not to trace (path substrings).
    pub no_trace_lib: Vec<String>,
    /// Accesses whose stacks to capture (a second run of a schedule that found races).
    pub stack_requests: Vec<EarlierAccess>,
    /// Start executions from a fork snapshot taken at the first thread creation.
    pub snapshots: bool,
    /// Most resident memory a worker's snapshots may hold.
    pub snapshot_memory: u64,
    /// Filter the enabled threads through the fair scheduler's priority relation
    /// (`explore::fair`) before the strategy chooses.
    pub fair: bool,
    /// States are hashed at points (`--state-cache`): fork copies of a program with much
    /// memory are write-tracked from their start (`state_hash`).
    pub state_cache: bool,
}

impl ExecutionConfig {
    /// Whether `program` reads the time-stamp counter itself, so that it must be trapped.
    pub fn program_reads_tsc(program: &std::path::Path) -> bool {
        ElfFile::load(program).is_ok_and(|e| crate::binary::reads_time_stamp_counter(&e))
    }
}

/// How one execution ended.
#[derive(Debug, Default)]
pub struct ExecutionOutcome {
    /// The finding that ended the execution, if any (seed and execution index not yet set).
    pub finding: Option<Finding>,
    /// Data races found in the execution (each pair of instructions once).
    pub races: Vec<Finding>,
    /// Scheduling decisions taken.
    pub steps: u64,
    /// Preemptive switches among them.
    pub preemptions: u64,
    /// The execution hit `max_steps` without ending.
    pub step_limit_hit: bool,
    /// Threads created (including main).
    pub threads: usize,
    /// Every scheduling decision, in order (the schedule).
    pub decisions: Vec<Decision>,
    /// Indexes (in `decisions`) of the decisions taken among more than one thread.
    pub choice_steps: Vec<u32>,
    /// The strategy could not follow its plan (replay): the execution was abandoned.
    pub divergence: Option<Divergence>,
    /// The readable trace, when asked for.
    pub trace: Vec<TraceStep>,
    /// Stopped at `stop_after` decisions (replay --until).
    pub stopped_early: bool,
    /// Memory accesses traced (race detection).
    pub traced_accesses: u64,
    /// The earlier access of each race in `races`, by index.
    pub race_origins: Vec<(usize, EarlierAccess)>,
    /// Stacks captured for `ExecutionConfig::stack_requests`.
    pub captured_stacks: Vec<(EarlierAccess, Vec<crate::report::Frame>)>,
    /// Ended at a state visited before (`--state-cache`): its subtree was pruned.
    pub pruned: bool,
    /// How the process ended, when it did ("exit status 0", "killed by SIGSEGV").
    pub exit: Option<String>,
    /// A hash of what the program wrote to stderr in this execution.
    pub output_digest: u64,
    /// Memory pages hashed anew and pages whose hash was kept, at hashed points.
    pub hashed_pages: (u64, u64),
}

/// An access identified across runs of one schedule: thread, instruction and the thread's
/// epoch (its clock only moves at releases, so the same loop iteration's stack is found).
pub type EarlierAccess = (ThreadId, u64, u32);

/// One step of a readable trace.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceStep {
    /// 1-based step number.
    pub step: u64,
    /// The thread that ran.
    pub thread: ThreadId,
    /// The operation it performed.
    pub op: &'static str,
    /// The object, by name.
    pub object: Option<String>,
    /// Where it was called from.
    pub location: Option<crate::report::Frame>,
}

/// What running a thread to its next stop produced.
pub(super) enum RunResult {
    /// The thread is at a new scheduling point.
    Point,
    /// The thread exited.
    ThreadExited,
    /// The whole process ended.
    ProcessEnded(ProcessEnd),
    /// A finding (boxed: findings are large).
    Found(Box<Finding>),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum ProcessEnd {
    Exited(i32),
    Killed(Signal),
    Vanished,
}

/// Runs one execution of the program under `sched`: from a copy of the worker's fork
/// snapshot when there is one for this configuration, else from exec.
pub fn run_execution(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    worker: &mut WorkerState,
) -> Result<ExecutionOutcome> {
    if worker.capture.is_none() {
        worker.capture = Some(StderrCapture::start(!cfg.quiet_program)?);
    }
    let key = snapshot::key(cfg);
    // A tree search replays a known prefix: start from the deepest branch snapshot on it,
    // else from the startup snapshot, else from exec.
    let planned: Option<Vec<ThreadId>> = sched.planned_prefix().map(<[ThreadId]>::to_vec);
    let mut restored = None;
    if cfg.snapshots {
        if let Some(planned) = &planned {
            let atomics = worker.atomic_addresses.len();
            worker.snapshots.prune_branches(&key, planned, atomics);
            restored = worker
                .snapshots
                .fork_branch(&key, planned, cfg.state_cache)?;
        }
        if restored.is_none() {
            restored = worker.snapshots.fork_startup(&key, cfg.state_cache)?;
        }
    }
    let branch_key = (cfg.snapshots && planned.is_some()).then(|| key.clone());
    // The deepest branch snapshot on this execution's path (the one it starts from, if any).
    let branch_depth = planned
        .as_ref()
        .map_or(0, |p| worker.snapshots.deepest_branch_on(&key, p));
    let result = match restored {
        Some(r) => {
            let mut exec = Execution::restored(cfg, worker, r);
            exec.branch_key = branch_key;
            exec.branch_depth = branch_depth;
            exec.record_points = exec.branch_key.is_some();
            let prefix = std::mem::take(&mut exec.restored_prefix);
            let result = exec.run(sched, Some(prefix));
            exec.kill_all();
            result
        }
        None => {
            let process = launch(cfg, worker)?;
            let mut exec = Execution::fresh(cfg, worker, process);
            exec.branch_key = branch_key;
            exec.branch_depth = branch_depth;
            if cfg.snapshots && exec.worker.snapshots.wanted(&key) {
                exec.snapshot_key = Some(key.clone());
                exec.inherited_fds = procfs::descriptors(exec.p.pid);
                exec.snapshot_at_main = exec.worker.snapshots.threadless(&key);
            }
            // Points are kept only for a snapshot this execution may take.
            exec.record_points = exec.branch_key.is_some() || exec.snapshot_key.is_some();
            let result = exec.run(sched, None);
            if exec.snapshot_key.is_some() && exec.model.thread_count() == 1 {
                // No thread was created, so no snapshot taken: the next execution takes it
                // at main.
                exec.worker.snapshots.mark_threadless(&key);
            }
            exec.kill_all();
            result
        }
    };
    if cfg.snapshots {
        worker.snapshots.check_after_execution(&key);
    }
    let stderr = worker
        .capture
        .as_ref()
        .map(StderrCapture::finish_execution)
        .unwrap_or_default();
    let mut outcome = result?;
    outcome.output_digest = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        stderr.hash(&mut h);
        h.finish()
    };
    if let Some(f) = &mut outcome.finding {
        if f.kind == FindingKind::Assertion {
            if let Some(msg) = failure_message(&stderr) {
                if f.message.starts_with("the program") {
                    let cause = std::mem::replace(&mut f.message, msg);
                    f.details.insert(0, format!("({cause})"));
                } else {
                    f.details.insert(0, format!("the program printed: {msg}"));
                }
            }
        }
    }
    Ok(outcome)
}

/// Starts the program under ptrace, stopped at its exec.
fn launch(cfg: &ExecutionConfig, worker: &WorkerState) -> Result<Process> {
    let stderr_fd = match &worker.capture {
        Some(c) => Some(c.writer()?),
        None => None,
    };
    let stdout = if cfg.quiet_program {
        Some(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")?
                .into(),
        )
    } else {
        None
    };
    let path = CString::new(cfg.program.as_os_str().as_bytes())?;
    let mut argv = vec![path.clone()];
    for a in &cfg.args {
        argv.push(CString::new(a.as_bytes())?);
    }
    let envp = environment(&cfg.env)?;
    let pid = spawn_traced(
        &path,
        &argv,
        &envp,
        StdioSetup {
            trap_rdtsc: cfg.trap_rdtsc,
            stdout,
            stderr: stderr_fd,
        },
    )
    .context("launching the program under ptrace")?;
    match Process::new(pid) {
        Ok(p) => Ok(p),
        Err(e) => {
            let _ = kill(pid, Signal::SIGKILL);
            reap_all(pid, &Default::default());
            Err(e).context("opening the program's memory")
        }
    }
}

impl<'a> Execution<'a> {
    /// An execution of a freshly launched process.
    fn fresh(cfg: &'a ExecutionConfig, worker: &'a mut WorkerState, p: Process) -> Self {
        Execution {
            cfg,
            p,
            model: Model::new(),
            worker,
            races: cfg.races.then(RaceDetector::new),
            returns: Default::default(),
            atomic_ranges: Vec::new(),
            race_findings: Vec::new(),
            recent_pcs: Default::default(),
            traced_accesses: 0,
            instrumented: Default::default(),
            stack_requests: cfg.stack_requests.clone(),
            captured_stacks: Vec::new(),
            race_origins: Vec::new(),
            group_exiting: false,
            pending_clone: None,
            resumed_at: Instant::now(),
            interrupt_sent: false,
            steps: 0,
            preemptions: 0,
            killed: false,
            panic: None,
            decisions: Vec::new(),
            choice_steps: Vec::new(),
            creation_stretch: Default::default(),
            memory_hasher: state_hash::MemoryHasher::new(None),
            trace: Vec::new(),
            window: Default::default(),
            fair: cfg.fair.then(FairFilter::new),
            det: Determinism::default(),
            snapshot_key: None,
            points: Vec::new(),
            record_points: false,
            points_overflowed: false,
            restored_prefix: Vec::new(),
            resume_main: false,
            syscall_insn: 0,
            branch_key: None,
            branch_depth: 0,
            inherited_fds: Vec::new(),
            snapshot_at_main: false,
            segment: Footprint::default(),
        }
    }

    /// An execution continuing from a copy of a snapshot.
    fn restored(cfg: &'a ExecutionConfig, worker: &'a mut WorkerState, mut r: Restored) -> Self {
        let s = r.state;
        Execution {
            cfg,
            p: r.process,
            model: s.model,
            worker,
            races: s.races,
            returns: s.returns,
            atomic_ranges: s.atomic_ranges,
            race_findings: s.race_findings,
            recent_pcs: s.recent_pcs,
            traced_accesses: s.traced_accesses,
            instrumented: s.instrumented,
            stack_requests: cfg.stack_requests.clone(),
            captured_stacks: Vec::new(),
            race_origins: s.race_origins,
            group_exiting: false,
            pending_clone: None,
            resumed_at: Instant::now(),
            interrupt_sent: false,
            steps: s.steps,
            preemptions: s.preemptions,
            killed: false,
            panic: s.panic,
            decisions: s.decisions,
            choice_steps: s.choice_steps,
            creation_stretch: Default::default(),
            memory_hasher: state_hash::MemoryHasher::new(r.memory.take()),
            trace: s.trace,
            window: s.window,
            fair: s.fair,
            det: s.det,
            snapshot_key: None,
            points: r.prefix.clone(),
            record_points: false,
            points_overflowed: false,
            restored_prefix: r.prefix,
            resume_main: r.resume_main,
            syscall_insn: s.syscall_insn,
            branch_key: None,
            branch_depth: 0,
            inherited_fds: Vec::new(),
            snapshot_at_main: false,
            segment: s.segment,
        }
    }
}

/// The program's environment: the configured one, with rseq disabled for determinism.
fn environment(vars: &[(OsString, OsString)]) -> Result<Vec<CString>> {
    let mut env: Vec<CString> = Vec::new();
    let mut tunables = String::from("glibc.pthread.rseq=0");
    for (k, v) in vars {
        if k == "GLIBC_TUNABLES" {
            tunables = format!("{}:{tunables}", v.to_string_lossy());
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            env.push(c);
        }
    }
    env.push(CString::new(format!("GLIBC_TUNABLES={tunables}"))?);
    Ok(env)
}

pub(super) struct Execution<'a> {
    pub(super) cfg: &'a ExecutionConfig,
    pub(super) p: Process,
    pub(super) model: Model,
    pub(super) worker: &'a mut WorkerState,
    /// The race detector (None with --no-races).
    pub(super) races: Option<RaceDetector>,
    /// Return breakpoints waiting, by address.
    pub(super) returns: HashMap<u64, Vec<PendingReturn>>,
    /// Address ranges known to hold atomics in this process (runtime addresses).
    pub(super) atomic_ranges: Vec<std::ops::Range<u64>>,
    /// Data races found so far.
    pub(super) race_findings: Vec<Finding>,
    /// The last access pcs seen (tells progress from spinning).
    pub(super) recent_pcs: std::collections::VecDeque<u64>,
    /// Memory accesses traced in this execution.
    pub(super) traced_accesses: u64,
    /// Start addresses of the mapped files already instrumented.
    pub(super) instrumented: std::collections::HashSet<u64>,
    /// Accesses whose stack to capture, as (thread, pc, epoch) (earlier sides of races
    /// found by a previous run of the same schedule).
    pub(super) stack_requests: Vec<EarlierAccess>,
    /// Stacks captured for `stack_requests`.
    pub(super) captured_stacks: Vec<(EarlierAccess, Vec<crate::report::Frame>)>,
    /// The earlier access of each race finding, by index in `race_findings`.
    pub(super) race_origins: Vec<(usize, EarlierAccess)>,
    pub(super) group_exiting: bool,
    /// (flags, child_tid, tls) of the clone the running thread is making.
    pub(super) pending_clone: Option<(u64, u64, u64)>,
    pub(super) resumed_at: Instant,
    pub(super) interrupt_sent: bool,
    pub(super) steps: u64,
    pub(super) preemptions: u64,
    pub(super) killed: bool,
    /// The first thread that started a Rust panic, with its stack.
    pub(super) panic: Option<ThreadReport>,
    pub(super) decisions: Vec<Decision>,
    /// Indexes of the decisions taken among more than one thread.
    pub(super) choice_steps: Vec<u32>,
    /// What incremental state hashing keeps between points (`--state-cache`).
    pub(super) memory_hasher: state_hash::MemoryHasher,
    /// Threads running a stretch that is not a decision of its own (`on_clone`): a parent
    /// from its clone to its next point, a new thread from its start to its first one.
    /// Empty at every scheduling point.
    pub(super) creation_stretch: std::collections::BTreeSet<ThreadId>,
    pub(super) trace: Vec<TraceStep>,
    /// The last decisions, to tell a livelock from an unfair schedule at `--max-steps`.
    pub(super) window: Window,
    /// The fair scheduler's priority relation (None with `--no-fair`).
    pub(super) fair: Option<FairFilter>,
    pub(super) det: Determinism,
    /// Set while this execution should fork the startup snapshot at its first thread
    /// creation (the key of its configuration).
    pub(super) snapshot_key: Option<String>,
    /// Every point so far with its decision, saved with a snapshot (kept only while
    /// `record_points`: this execution may take one).
    pub(super) points: Vec<SavedPoint>,
    pub(super) record_points: bool,
    /// More points than a snapshot keeps were made.
    pub(super) points_overflowed: bool,
    /// The decisions a restored execution skipped, to show the strategy.
    pub(super) restored_prefix: Vec<SavedPoint>,
    /// A restored startup copy resumes its main thread first.
    pub(super) resume_main: bool,
    /// Address of a `syscall` instruction in the program (for injected syscalls).
    pub(super) syscall_insn: u64,
    /// Set when this execution may take branch snapshots (a tree search): the
    /// configuration's key.
    pub(super) branch_key: Option<String>,
    /// Decisions before the deepest branch snapshot on this execution's path.
    pub(super) branch_depth: usize,
    /// The descriptors the program was started with (while a snapshot is wanted).
    pub(super) inherited_fds: Vec<(i32, String)>,
    /// Take the startup snapshot at `main` (an earlier execution created no thread).
    pub(super) snapshot_at_main: bool,
    /// What the running thread touched since its step began, beyond its operation (atomic
    /// locations accessed with plain instructions, libc-internal lock operations).
    pub(super) segment: Footprint,
}

const CLONE_THREAD: u64 = 0x0001_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
const CLONE_SETTLS: u64 = 0x0008_0000;

impl Execution<'_> {
    /// Runs the execution to its end: from exec, or from a snapshot copy whose skipped
    /// decisions (`restored`) are first shown to the strategy again.
    fn run(
        &mut self,
        sched: &mut dyn Scheduler,
        restored: Option<Vec<SavedPoint>>,
    ) -> Result<ExecutionOutcome> {
        let mut current: Option<ThreadId> = None;
        match &restored {
            None => {
                let rsp = self.p.load_regs(0)?.rsp;
                self.det
                    .patch_auxv(&self.p.mem, rsp)
                    .context("making the execution deterministic (auxv)")?;
                let entry = auxv_entry(self.p.pid)?;
                self.p
                    .add_breakpoints(&[entry], |_| Some(BreakpointKind::Entry))?;
            }
            Some(prefix) => {
                for saved in prefix {
                    match sched.choose(&saved.point()) {
                        Ok(t) if t == saved.chosen => {
                            current = Some(t);
                            if let Some(touched) = &saved.ran {
                                sched.ran(touched);
                            }
                        }
                        Ok(t) => {
                            let mut out = self.outcome(None);
                            out.divergence = Some(Divergence {
                                step: saved.step,
                                reason: format!(
                                    "the strategy chose T{t} where only T{} could run",
                                    saved.chosen
                                ),
                            });
                            return Ok(out);
                        }
                        Err(d) => {
                            let mut out = self.outcome(None);
                            out.divergence = Some(d);
                            return Ok(out);
                        }
                    }
                }
            }
        }
        if restored.is_none() || self.resume_main {
            let first = self.resume_and_run(0)?;
            let mut done = self.settle(0, first)?;
            if done.is_none() {
                done = self.start_new_threads()?;
            }
            if restored.as_ref().is_some_and(|p| !p.is_empty()) {
                // The step the startup snapshot interrupted has ended: report it as the
                // loop below does for every step.
                let touched = std::mem::take(&mut self.segment);
                if let Some(p) = self.points.last_mut() {
                    p.ran = Some(touched.clone());
                }
                sched.ran(&touched);
            }
            if let Some(done) = done {
                return Ok(done);
            }
        }
        loop {
            let enabled = self.model.enabled_threads();
            if enabled.is_empty() {
                if self.model.all_finished() {
                    let end = self.wait_process_end()?;
                    return Ok(self.ended(end));
                }
                if self.model.fire_next_timeout() {
                    continue;
                }
                let f = self.model_finding(self.model.global_deadlock());
                return Ok(self.outcome(Some(f)));
            }
            if self.cfg.max_steps.is_some_and(|m| self.steps >= m) {
                let finding = self.livelock_finding();
                let mut out = self.outcome(finding);
                out.step_limit_hit = true;
                return Ok(out);
            }
            if sched.wants_state(self.steps as usize) {
                let tracer_state = self.tracer_state();
                let h = state_hash::state_hash(
                    &self.p,
                    tracer_state,
                    &mut self.memory_hasher,
                    self.syscall_insn,
                )?;
                if sched.visit_state(self.steps as usize, h) {
                    let mut out = self.outcome(None);
                    out.pruned = true;
                    return Ok(out);
                }
            }
            if enabled.len() > 1 && sched.may_backtrack_to(self.steps as usize) {
                self.maybe_branch_snapshot()?;
            }
            let schedulable = match self.fair.as_mut() {
                Some(f) => f.schedulable(&enabled),
                None => enabled.clone(),
            };
            let ops: Vec<&'static str> = schedulable
                .iter()
                .map(|&u| self.model.pending(u).map_or("?", Op::name))
                .collect();
            let current_yields = current.is_some_and(|c| {
                matches!(self.model.pending(c), Some(Op::Yield | Op::Sleep { .. }))
            });
            let footprints: Vec<Footprint> = schedulable
                .iter()
                .map(|&u| {
                    self.model
                        .pending(u)
                        .map_or_else(Footprint::everything, Op::footprint)
                })
                .collect();
            // Threads that cannot be chosen here: blocked ones, and enabled ones the fair
            // filter holds back.
            let held_back = enabled.iter().filter(|u| !schedulable.contains(u)).copied();
            let blocked: Vec<(ThreadId, Footprint)> = (self.model.blocked_threads().into_iter())
                .chain(held_back)
                .filter_map(|u| Some((u, self.model.pending(u)?.footprint())))
                .collect();
            let point = Point {
                enabled: &schedulable,
                ops: &ops,
                footprints: &footprints,
                blocked: &blocked,
                current,
                current_yields,
                step: self.steps as usize,
            };
            let t = match sched.choose(&point) {
                Ok(t) => t,
                Err(d) => {
                    let mut out = self.outcome(None);
                    out.divergence = Some(d);
                    return Ok(out);
                }
            };
            if point.is_preemption(t) {
                self.preemptions += 1;
            }
            if self.record_points {
                if self.points.len() < snapshot::MAX_PREFIX_POINTS {
                    self.points.push(SavedPoint::new(&point, t));
                } else {
                    self.points_overflowed = true;
                }
            }
            let op = ops[schedulable.iter().position(|&u| u == t).unwrap_or(0)];
            let yields = self.model.pending(t).is_some_and(Op::yields_for_fairness);
            let site = self.model.pending_site(t);
            if let Some(f) = self.fair.as_mut() {
                let state = yields.then(|| yield_state(&self.model, site));
                f.chose(t, &enabled, state);
            }
            self.window.push(WindowStep {
                enabled: enabled.clone(),
                thread: t,
                op,
                site,
                site_is_pc: self.p.threads[t].place == StopPlace::Breakpoint(site),
                yields,
            });
            if self.cfg.trace {
                self.trace_step(t, op);
            }
            if schedulable.len() > 1 {
                self.choice_steps.push(self.decisions.len() as u32);
            }
            self.decisions.push(Decision {
                thread: t,
                op: op.to_string(),
            });
            self.steps += 1;
            current = Some(t);
            if self.cfg.stop_after.is_some_and(|n| self.steps >= n) {
                let mut out = self.outcome(None);
                out.stopped_early = true;
                return Ok(out);
            }
            let completion = match self.execute_op(t) {
                Ok(c) => c,
                Err(f) => {
                    let f = self.model_finding(f);
                    return Ok(self.outcome(Some(f)));
                }
            };
            if completion == Completion::Blocked {
                continue;
            }
            if let Some(f) = self.complete(t, completion)? {
                return Ok(self.outcome(Some(f)));
            }
            let r = self.resume_and_run(t)?;
            let mut done = self.settle(t, r)?;
            if done.is_none() {
                // Threads the step created start within it: what they touch is its footprint.
                done = self.start_new_threads()?;
            }
            let touched = std::mem::take(&mut self.segment);
            if let Some(p) = self.points.last_mut().filter(|_| self.record_points) {
                p.ran = Some(touched.clone());
            }
            sched.ran(&touched);
            if let Some(done) = done {
                return Ok(done);
            }
        }
    }

    fn outcome(&mut self, finding: Option<Finding>) -> ExecutionOutcome {
        // Addresses found racy become scheduling points from the next execution on (never
        // within this one, so that its schedule replays with the same points).
        if let Some(d) = &self.races {
            self.worker
                .racy_addresses
                .extend(d.racy_addresses().iter().copied());
        }
        let mut finding = finding;
        if let Some(f) = &mut finding {
            f.preemptions = self.preemptions;
            f.steps = self.steps;
        }
        ExecutionOutcome {
            finding,
            steps: self.steps,
            preemptions: self.preemptions,
            step_limit_hit: false,
            threads: self.model.thread_count(),
            races: std::mem::take(&mut self.race_findings),
            decisions: std::mem::take(&mut self.decisions),
            choice_steps: std::mem::take(&mut self.choice_steps),
            divergence: None,
            trace: std::mem::take(&mut self.trace),
            stopped_early: false,
            traced_accesses: self.traced_accesses,
            race_origins: std::mem::take(&mut self.race_origins),
            captured_stacks: std::mem::take(&mut self.captured_stacks),
            pruned: false,
            exit: None,
            output_digest: 0,
            hashed_pages: (
                self.memory_hasher.pages_hashed,
                self.memory_hasher.pages_reused,
            ),
        }
    }

    /// The outcome of an execution whose process ended with `end`.
    fn ended(&mut self, end: ProcessEnd) -> ExecutionOutcome {
        let mut out = self.outcome(self.exit_finding(end));
        out.exit = match end {
            ProcessEnd::Exited(code) => Some(format!("exit status {code}")),
            ProcessEnd::Killed(sig) => Some(format!("killed by {sig:?}")),
            ProcessEnd::Vanished => None,
        };
        out
    }

    /// What the tracer holds of the program's state, hashed (for `--state-cache`): the
    /// model's synchronisation state, virtual time and pending operations, and the fair
    /// scheduler's state.
    fn tracer_state(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        self.model.sync_fingerprint().hash(&mut h);
        self.model.now().hash(&mut h);
        for t in 0..self.model.thread_count() {
            self.model.pending(t).map(Op::name).hash(&mut h);
            self.model.pending_site(t).hash(&mut h);
        }
        self.fair
            .as_ref()
            .map(FairFilter::state_fingerprint)
            .hash(&mut h);
        h.finish()
    }

    /// Records one step of the readable trace (replay): thread, operation, object, line.
    fn trace_step(&mut self, t: ThreadId, op: &'static str) {
        let object = self
            .model
            .pending(t)
            .and_then(Op::object)
            .filter(|o| o.kind != ObjectKind::Atomic || o.addr != 0)
            .map(|o| self.object_desc(o.kind, o.addr));
        let site = self.model.pending_site(t);
        let location = (site != 0).then(|| self.worker.symbols.call_site(site));
        self.trace.push(TraceStep {
            step: self.steps + 1,
            thread: t,
            op,
            object,
            location,
        });
    }

    /// Handles the result of running `t`; Some when the execution is over.
    fn settle(&mut self, t: ThreadId, r: RunResult) -> Result<Option<ExecutionOutcome>> {
        match r {
            RunResult::Point => Ok(None),
            RunResult::ThreadExited => match self.thread_exited(t) {
                Ok(()) => Ok(None),
                Err(f) => {
                    let f = self.model_finding(f);
                    Ok(Some(self.outcome(Some(f))))
                }
            },
            RunResult::ProcessEnded(end) => Ok(Some(self.ended(end))),
            RunResult::Found(f) => Ok(Some(self.outcome(Some(*f)))),
        }
    }

    /// Thread `t` exited: the race detector keeps its clock, the model its holdings.
    fn thread_exited(&mut self, t: ThreadId) -> std::result::Result<(), ModelFinding> {
        self.creation_stretch.remove(&t);
        if let Some(d) = self.races.as_mut() {
            d.thread_exited(t);
        }
        self.model.thread_exited(t)
    }

    /// Applies a completed operation's result to thread `t`'s registers. A fault while
    /// stepping over a native instruction becomes a finding.
    fn complete(&mut self, t: ThreadId, c: Completion) -> Result<Option<Finding>> {
        let place = self.p.threads[t].place;
        match place {
            StopPlace::Breakpoint(addr) => {
                let kind = self.p.bp_kinds.get(&addr).cloned();
                let convention = match &kind {
                    Some(BreakpointKind::Hook(h)) => h.convention(),
                    _ => Convention::Native,
                };
                match &kind {
                    Some(BreakpointKind::Atomic { plan, index, bias }) => {
                        let insn = &plan.atomics[*index];
                        let ea = self.p.effective_address(t, insn, *bias);
                        let size = insn.memory_size().size() as u64;
                        self.record_atomic(t, ea, size, addr);
                    }
                    Some(BreakpointKind::Access { plan, index, bias }) => {
                        let plan = plan.clone();
                        self.record_access(t, addr, &plan, *index, *bias);
                    }
                    Some(BreakpointKind::Hook(Hook::Once)) => {
                        let control = self.p.threads[t].regs.rdi;
                        if self.model.once_initialiser(control) == Some(t) {
                            self.on_return_of_call(t, ReturnAction::OnceDone { control })?;
                        }
                    }
                    _ => {}
                }
                match (convention, c) {
                    (Convention::Native, _) | (_, Completion::Native) => {
                        if let Some(ev) = self.p.step_over_breakpoint(t)? {
                            return self.fault_during_step(t, ev);
                        }
                    }
                    (Convention::ErrorNumber, Completion::Return(v)) => {
                        self.p.return_from_call(t, v as u64)?
                    }
                    (Convention::ErrorNumber, Completion::Error(e)) => {
                        self.p.return_from_call(t, e as u64)?
                    }
                    (Convention::MinusOneErrno, Completion::Return(v)) => {
                        self.p.return_from_call(t, v as u64)?
                    }
                    (Convention::MinusOneErrno, Completion::Error(e)) => {
                        self.p.set_errno(t, e)?;
                        self.p.return_from_call(t, u64::MAX)?
                    }
                    (_, Completion::Blocked) => {}
                }
            }
            StopPlace::Syscall => match c {
                Completion::Return(v) => self.p.finish_syscall(t, v)?,
                Completion::Error(e) => self.p.finish_syscall(t, -(e as i64))?,
                Completion::Native | Completion::Blocked => {}
            },
            StopPlace::Event => {}
        }
        Ok(None)
    }

    fn fault_during_step(&mut self, t: ThreadId, ev: Event) -> Result<Option<Finding>> {
        match ev {
            Event::Signal(sig) => Ok(self.signal_finding(t, sig)),
            _ => Err(anyhow!(
                "unexpected event {ev:?} while stepping thread T{t}"
            )),
        }
    }

    /// Resumes thread `t` and runs it until it reaches a scheduling point or stops existing.
    fn resume_and_run(&mut self, t: ThreadId) -> Result<RunResult> {
        self.ensure_started(t)?;
        let th = &mut self.p.threads[t];
        let sig = th.pending_signal.take();
        let tid = th.tid;
        events::resume(tid, sig)?;
        self.resumed_at = Instant::now();
        self.interrupt_sent = false;
        loop {
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => {
                    self.check_timeout(tid)?;
                    continue;
                }
                WaitOutcome::NoChildren => {
                    return Ok(RunResult::ProcessEnded(ProcessEnd::Vanished))
                }
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
                continue;
            }
            let Some(&u) = self.p.by_tid.get(&pid) else {
                self.unknown_stop(pid, ev);
                continue;
            };
            if u != t {
                if let Some(end) = self.other_thread_event(u, ev)? {
                    return Ok(RunResult::ProcessEnded(end));
                }
                continue;
            }
            if let Some(r) = self.running_thread_event(t, ev)? {
                return Ok(r);
            }
        }
    }

    fn check_timeout(&mut self, tid: Pid) -> Result<()> {
        if !self.interrupt_sent && self.resumed_at.elapsed() > self.cfg.execution_timeout {
            events::interrupt(tid)?;
            self.interrupt_sent = true;
        }
        Ok(())
    }

    /// Consumes a new thread's first stop before it is resumed for the first time.
    pub(super) fn ensure_started(&mut self, t: ThreadId) -> Result<()> {
        if self.p.threads[t].started {
            return Ok(());
        }
        let tid = self.p.threads[t].tid;
        if self.p.early_stops.remove(&tid) {
            self.p.threads[t].started = true;
            return Ok(());
        }
        loop {
            match events::wait(Some(tid))? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => break,
                WaitOutcome::Event(_, Event::Stop(_)) | WaitOutcome::Event(_, Event::Signal(_)) => {
                    break
                }
                WaitOutcome::Event(_, _) => break,
            }
        }
        self.p.threads[t].started = true;
        Ok(())
    }

    /// Events of processes the program forked: they run free.
    fn pass_through(&mut self, pid: Pid, ev: Event) -> Result<()> {
        match ev {
            Event::Exited(_) | Event::Killed(_) => {
                self.p.foreign.remove(&pid);
            }
            Event::Fork(child) | Event::Vfork(child) | Event::Clone(child) => {
                self.adopt_foreign(child)?;
                events::resume(pid, None)?;
            }
            Event::Signal(Signal::SIGSEGV) if self.emulate_rdtsc_in(pid)? => {
                events::resume(pid, None)?
            }
            Event::Signal(sig) => events::resume(pid, Some(sig))?,
            _ => events::resume(pid, None)?,
        }
        Ok(())
    }

    fn adopt_foreign(&mut self, child: Pid) -> Result<()> {
        self.p.foreign.insert(child);
        if self.p.early_stops.remove(&child) {
            events::resume(child, None)?;
        }
        Ok(())
    }

    fn unknown_stop(&mut self, pid: Pid, ev: Event) {
        if matches!(ev, Event::Stop(_) | Event::Signal(Signal::SIGSTOP)) {
            self.p.early_stops.insert(pid);
        }
    }

    /// An event of a thread that is not the running one (group exit, first stops).
    fn other_thread_event(&mut self, u: ThreadId, ev: Event) -> Result<Option<ProcessEnd>> {
        let tid = self.p.threads[u].tid;
        match ev {
            Event::Stop(_) if !self.p.threads[u].started => self.p.threads[u].started = true,
            Event::Exiting(_) => {
                self.p.threads[u].gone = true;
                events::resume(tid, None)?;
            }
            Event::Exited(code) if tid == self.p.pid => return Ok(Some(ProcessEnd::Exited(code))),
            Event::Killed(sig) if tid == self.p.pid => return Ok(Some(ProcessEnd::Killed(sig))),
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[u].gone = true;
                if !self.model.is_finished(u) {
                    let _ = self.model.thread_exited(u);
                }
            }
            Event::Signal(sig) => self.p.threads[u].pending_signal = Some(sig),
            _ => {
                if self.group_exiting {
                    events::resume(tid, None)?;
                }
            }
        }
        Ok(None)
    }

    /// An event of the running thread; Some when it stopped running.
    fn running_thread_event(&mut self, t: ThreadId, ev: Event) -> Result<Option<RunResult>> {
        let tid = self.p.threads[t].tid;
        match ev {
            Event::Trap => self.on_trap(t),
            Event::Seccomp => self.on_seccomp(t),
            Event::Clone(child) => self.on_clone(t, child),
            Event::Fork(child) | Event::Vfork(child) => {
                self.adopt_foreign(child)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Exiting(status) => {
                self.p.threads[t].gone = true;
                if status & 0x7f != 0 {
                    // Death by a signal takes every thread with it.
                    self.group_exiting = true;
                }
                events::resume(tid, None)?;
                if self.group_exiting {
                    return Ok(None);
                }
                if tid != self.p.pid {
                    if let Some(end) = self.await_thread_gone(t)? {
                        return Ok(Some(RunResult::ProcessEnded(end)));
                    }
                    let ctid = self.p.threads[t].clear_tid;
                    if ctid != 0 {
                        self.model.wake_futex(ctid, u32::MAX);
                    }
                }
                Ok(Some(RunResult::ThreadExited))
            }
            Event::Exited(code) if tid == self.p.pid => {
                Ok(Some(RunResult::ProcessEnded(ProcessEnd::Exited(code))))
            }
            Event::Killed(sig) if tid == self.p.pid => {
                Ok(Some(RunResult::ProcessEnded(ProcessEnd::Killed(sig))))
            }
            // During a group exit only the end of the whole process matters.
            Event::Exited(_) | Event::Killed(_) if self.group_exiting => Ok(None),
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[t].gone = true;
                Ok(Some(RunResult::ThreadExited))
            }
            Event::Stop(_) => {
                if self.interrupt_sent {
                    return Ok(Some(RunResult::Found(Box::new(self.timeout_finding(t)?))));
                }
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Signal(Signal::SIGSEGV) if self.emulate_rdtsc(t)? => {
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Signal(sig) => {
                if let Some(f) = self.signal_finding(t, sig) {
                    return Ok(Some(RunResult::Found(Box::new(f))));
                }
                events::resume(tid, Some(sig))?;
                Ok(None)
            }
            Event::Exec => Ok(Some(RunResult::ProcessEnded(ProcessEnd::Vanished))),
            Event::VforkDone => {
                events::resume(tid, None)?;
                Ok(None)
            }
        }
    }

    /// Waits until exiting thread `t` is reaped, serving other events meanwhile.
    fn await_thread_gone(&mut self, t: ThreadId) -> Result<Option<ProcessEnd>> {
        let tid = self.p.threads[t].tid;
        loop {
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => return Ok(Some(ProcessEnd::Vanished)),
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if pid == tid && matches!(ev, Event::Exited(_) | Event::Killed(_)) {
                return Ok(None);
            }
            if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
            } else if let Some(&u) = self.p.by_tid.get(&pid) {
                if let Some(end) = self.other_thread_event(u, ev)? {
                    return Ok(Some(end));
                }
            } else {
                self.unknown_stop(pid, ev);
            }
        }
    }

    fn on_trap(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let addr = r.rip.wrapping_sub(1);
        if self.returns.contains_key(&addr) {
            if let Some(ran) = self.handle_return(t, addr, &r)? {
                return Ok(ran);
            }
        }
        let Some(kind) = self.p.bp_kinds.get(&addr).cloned() else {
            // Not ours: a SIGTRAP of the program's own.
            events::resume(self.p.threads[t].tid, Some(Signal::SIGTRAP))?;
            return Ok(None);
        };
        self.p.threads[t].place = StopPlace::Breakpoint(addr);
        let (op, site) = match kind {
            BreakpointKind::Entry => {
                self.p.bps.remove(&self.p.mem, addr)?;
                self.p.bp_kinds.remove(&addr);
                let mut r = r;
                r.rip = addr;
                regs::set(self.p.threads[t].tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                self.p.threads[t].handle = r.fs_base;
                self.install_hooks()?;
                (Op::Continue, 0)
            }
            BreakpointKind::Main => {
                self.p.bps.remove(&self.p.mem, addr)?;
                self.p.bp_kinds.remove(&addr);
                let mut r = r;
                r.rip = addr;
                let tid = self.p.threads[t].tid;
                regs::set(tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                if let Some(key) = self.snapshot_key.take() {
                    self.take_main_snapshot(t, &r, key)?;
                }
                events::resume(tid, None)?;
                return Ok(None);
            }
            BreakpointKind::Hook(h) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(0);
                let op = h.op(regs::call_args(&r), self);
                if self.is_glibc_internal(site) {
                    // glibc's own locking (ld.so's TLS lock at thread creation...) is part of
                    // an atomic libc call: apply it at once unless it has to wait.
                    return self.internal_call(t, op, site);
                }
                (op, site)
            }
            BreakpointKind::Atomic { plan, index, bias } => {
                let ea = self.p.effective_address(t, &plan.atomics[index], bias);
                (Op::Atomic { addr: ea }, addr)
            }
            BreakpointKind::Access { plan, index, bias } => {
                return self.on_access(t, addr, &plan, index, bias);
            }
            BreakpointKind::Pause => (Op::Yield, addr),
            BreakpointKind::Alloc(kind) => return self.on_allocator(t, kind),
            BreakpointKind::MemFn(f) => return self.on_mem_fn(t, f),
            BreakpointKind::LinkMapChanged => {
                self.install_hooks()?;
                return self.step_and_resume(t);
            }
            BreakpointKind::Panic => {
                if self.panic.is_none() {
                    self.panic = Some(self.thread_report(t, "panicked".into()));
                }
                return self.step_and_resume(t);
            }
        };
        self.point(t, op, site)
    }

    /// Whether a hooked function was called from inside glibc (libc.so or ld.so).
    fn is_glibc_internal(&self, site: u64) -> bool {
        self.worker.symbols.modules().find(site).is_some_and(|m| {
            let name = m.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libc.so") || name.starts_with("ld-linux")
        })
    }

    /// Performs an operation glibc makes internally without a scheduling decision, and lets
    /// the thread run on; only an operation that cannot proceed becomes a scheduling point.
    fn internal_call(&mut self, t: ThreadId, op: Op, site: u64) -> Result<Option<RunResult>> {
        self.segment.extend(&op.footprint());
        if let Err(f) = self.model.set_pending(t, op.clone(), site) {
            return Ok(Some(RunResult::Found(Box::new(self.model_finding(f)))));
        }
        if !self.model.is_enabled(t) {
            return Ok(Some(RunResult::Point));
        }
        match self.execute_op(t) {
            Err(f) => Ok(Some(RunResult::Found(Box::new(self.model_finding(f))))),
            Ok(Completion::Blocked) => Ok(Some(RunResult::Point)),
            Ok(c) => {
                if let Some(f) = self.complete(t, c)? {
                    return Ok(Some(RunResult::Found(Box::new(f))));
                }
                events::resume(self.p.threads[t].tid, None)?;
                Ok(None)
            }
        }
    }

    /// Executes `t`'s pending operation in the model and feeds its happens-before edges to
    /// the race detector.
    fn execute_op(&mut self, t: ThreadId) -> std::result::Result<Completion, ModelFinding> {
        let op = self.model.pending(t).cloned();
        if op == Some(Op::ExitGroup) {
            self.group_exiting = true;
        }
        let completion = {
            let mut view = MemView(&self.p);
            self.model.execute(t, &mut view)?
        };
        if let (Some(d), Some(op)) = (self.races.as_mut(), op) {
            happens_before::record(d, t, &op, completion);
            if let (
                Op::Join {
                    target: Some(u), ..
                },
                Completion::Native,
            ) = (&op, completion)
            {
                d.thread_joined(t, *u);
            }
        }
        Ok(completion)
    }

    /// Records that `t` reached a scheduling point.
    pub(super) fn point(&mut self, t: ThreadId, op: Op, site: u64) -> Result<Option<RunResult>> {
        self.creation_stretch.remove(&t);
        match self.model.set_pending(t, op, site) {
            Ok(()) => Ok(Some(RunResult::Point)),
            Err(f) => Ok(Some(RunResult::Found(Box::new(self.model_finding(f))))),
        }
    }

    fn on_seccomp(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let tid = self.p.threads[t].tid;
        let nr = r.orig_rax as i64;
        let a = regs::syscall_args(&r);
        if self.syscall_insn == 0 && self.p.mem.read_u16(r.rip.wrapping_sub(2)).ok() == Some(0x050f)
        {
            self.syscall_insn = r.rip - 2;
        }
        if let Some(key) = self.snapshot_key.take() {
            let flags = match nr {
                nr::CLONE => a[0],
                nr::CLONE3 => self.p.mem.read_u64(a[0]).unwrap_or(0),
                _ => 0,
            };
            if flags & CLONE_THREAD == 0 {
                self.snapshot_key = Some(key);
            } else if self.take_startup_snapshot(t, &r, key)? {
                return Ok(None);
            }
        }
        self.p.threads[t].place = StopPlace::Syscall;
        match nr {
            nr::CLONE => self.pending_clone = Some((a[0], a[3], a[4])),
            nr::CLONE3 => {
                let flags = self.p.mem.read_u64(a[0]).unwrap_or(0);
                let ctid = self.p.mem.read_u64(a[0] + 16).unwrap_or(0);
                let tls = self.p.mem.read_u64(a[0] + 56).unwrap_or(0);
                self.pending_clone = Some((flags, ctid, tls));
            }
            nr::SET_TID_ADDRESS => self.p.threads[t].clear_tid = a[0],
            nr::SIGALTSTACK if a[0] != 0 => {
                let mut ss = [0u8; 24];
                if self.p.mem.read(a[0], &mut ss).is_ok() {
                    let flags = i32::from_le_bytes(ss[8..12].try_into().expect("4 bytes"));
                    self.p.threads[t].altstack = (flags & libc::SS_DISABLE == 0).then_some(ss);
                }
            }
            nr::EXIT_GROUP if self.others_live(t) => {
                // Other threads could still run first: ending the process is a decision.
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                return self.point(t, Op::ExitGroup, site);
            }
            nr::EXIT_GROUP => self.group_exiting = true,
            _ => {}
        }
        match syscalls::decode(nr, a, self) {
            SyscallAction::Point(op) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                self.point(t, op, site)
            }
            SyscallAction::Emulate(v) => {
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Native => {
                self.p.threads[t].place = StopPlace::Event;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Clock(call) => {
                let v = self.answer_clock(call);
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Random { buf, len } => {
                let len = len.min(1 << 20) as usize;
                let bytes = self.det.random_bytes(len);
                let v = match self.p.mem.write(buf, &bytes) {
                    Ok(()) => len as i64,
                    Err(_) => -(libc::EFAULT as i64),
                };
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
        }
    }

    /// Answers a time query from the virtual clock, writing the result where asked.
    fn answer_clock(&mut self, call: ClockCall) -> i64 {
        let now = self.model.now();
        let write = |mem: &crate::tracee::memory::Memory, out: u64, a: u64, b: u64| {
            if out == 0 {
                return true;
            }
            let mut bytes = a.to_le_bytes().to_vec();
            bytes.extend_from_slice(&b.to_le_bytes());
            mem.write(out, &bytes).is_ok()
        };
        let ok = |fine: bool, v: i64| if fine { v } else { -(libc::EFAULT as i64) };
        match call {
            ClockCall::Gettime { clock, out } => {
                let ns = self.det.clock_ns(clock, now);
                ok(
                    write(&self.p.mem, out, ns / 1_000_000_000, ns % 1_000_000_000),
                    0,
                )
            }
            ClockCall::Gettimeofday { out } => {
                let ns = self.det.clock_ns(libc::CLOCK_REALTIME, now);
                ok(
                    write(
                        &self.p.mem,
                        out,
                        ns / 1_000_000_000,
                        ns % 1_000_000_000 / 1_000,
                    ),
                    0,
                )
            }
            ClockCall::Time { out } => {
                let secs = self.det.clock_ns(libc::CLOCK_REALTIME, now) / 1_000_000_000;
                let fine = out == 0 || self.p.mem.write(out, &secs.to_le_bytes()).is_ok();
                ok(fine, secs as i64)
            }
        }
    }

    /// Emulates rdtsc/rdtscp in thread `t`, which fault under PR_TSC_SIGSEGV; true when it
    /// was one.
    fn emulate_rdtsc(&mut self, t: ThreadId) -> Result<bool> {
        let tid = self.p.threads[t].tid;
        let done = self.emulate_rdtsc_in(tid)?;
        if done {
            self.p.load_regs(t)?;
        }
        Ok(done)
    }

    /// Emulates rdtsc/rdtscp for any stopped tracee (forked children inherit the trap).
    fn emulate_rdtsc_in(&mut self, tid: Pid) -> Result<bool> {
        let mut r = regs::get(tid)?;
        let Ok(word) = nix::sys::ptrace::read(tid, r.rip as nix::sys::ptrace::AddressType) else {
            return Ok(false);
        };
        let b = (word as u64).to_le_bytes();
        let len = match [b[0], b[1], b[2]] {
            [0x0f, 0x31, _] => 2,
            [0x0f, 0x01, 0xf9] => 3,
            _ => return Ok(false),
        };
        let tsc = self.det.tsc(self.model.now());
        r.rax = tsc & 0xffff_ffff;
        r.rdx = tsc >> 32;
        if len == 3 {
            r.rcx = 0;
        }
        r.rip += len;
        regs::set(tid, r)?;
        Ok(true)
    }

    fn on_clone(&mut self, t: ThreadId, child: Pid) -> Result<Option<RunResult>> {
        let (flags, ctid, tls) = self.pending_clone.take().unwrap_or((CLONE_THREAD, 0, 0));
        let parent_tid = self.p.threads[t].tid;
        if flags & CLONE_THREAD == 0 {
            self.adopt_foreign(child)?;
            events::resume(parent_tid, None)?;
            return Ok(None);
        }
        let id = self.model.add_thread();
        let started = self.p.early_stops.remove(&child);
        let clear_tid = if flags & CLONE_CHILD_CLEARTID != 0 {
            ctid
        } else {
            0
        };
        let handle = if flags & CLONE_SETTLS != 0 { tls } else { 0 };
        self.p
            .threads
            .push(TracedThread::new(child, started, clear_tid, handle));
        self.p.by_tid.insert(child, id);
        if let Some(d) = self.races.as_mut() {
            d.thread_created(t, id);
        }
        debug_assert_eq!(self.p.threads.len(), id + 1);
        if !self.eager_starts() {
            // Without race detection nothing tells what the parent and the new thread do
            // before their next operations: the parent's step after the clone and the new
            // thread's start are decisions of their own. Out of the clone event, to the
            // syscall's exit, so that the parent can be copied into a snapshot.
            if let Some(sig) = events::finish_syscall_in_event(parent_tid)? {
                self.p.threads[t].pending_signal = Some(sig);
            }
            self.p.threads[t].place = StopPlace::Event;
            return self.point(t, Op::Continue, 0);
        }
        // Creating a thread is not a scheduling point: the parent runs on to its next
        // operation, and the new thread starts right after (`start_new_threads`). Until
        // then, what either does that another thread could order itself against without a
        // data race (an access the binary says is atomic; exit_group, a point anyway while
        // other threads live) becomes a scheduling point. What is left commutes with every
        // other thread's steps up to data races, which the detector reports whatever the
        // order; glibc-internal locking stays part of its libc call, as in every step.
        self.creation_stretch.insert(t);
        events::resume(parent_tid, None)?;
        Ok(None)
    }

    /// Whether thread creation runs the parent on and starts the new thread within the
    /// creating step: only with race detection, which traces the accesses that end such a
    /// stretch.
    fn eager_starts(&self) -> bool {
        self.races.is_some()
    }

    /// Runs every thread that has not started yet up to its first operation, in creation
    /// order, as part of the step that created it (no scheduling decision: see `on_clone`).
    /// Threads those create in turn start by a decision of their own, so that a chain of
    /// thread creations still counts against `--max-steps`. Some when the execution ended
    /// on the way.
    fn start_new_threads(&mut self) -> Result<Option<ExecutionOutcome>> {
        if !self.eager_starts() {
            return Ok(None);
        }
        let new: Vec<ThreadId> = (0..self.model.thread_count())
            .filter(|&u| matches!(self.model.pending(u), Some(Op::Start)))
            .collect();
        for u in new {
            let completion = match self.execute_op(u) {
                Ok(c) => c,
                Err(f) => {
                    let f = self.model_finding(f);
                    return Ok(Some(self.outcome(Some(f))));
                }
            };
            if let Some(f) = self.complete(u, completion)? {
                return Ok(Some(self.outcome(Some(f))));
            }
            self.creation_stretch.insert(u);
            let r = self.resume_and_run(u)?;
            if let Some(done) = self.settle(u, r)? {
                return Ok(Some(done));
            }
            if self.model.is_finished(u) {
                // Gone within the step: a join of it depends on this step.
                self.segment.touch_exit(u);
            }
        }
        Ok(None)
    }

    /// Whether a thread other than `t` has not finished.
    fn others_live(&self, t: ThreadId) -> bool {
        (0..self.model.thread_count()).any(|u| u != t && !self.model.is_finished(u))
    }

    /// Puts breakpoints on the threading API, atomic and memory-access instructions of the
    /// code under test, allocators and modelled libc calls, once libraries are mapped (at the
    /// entry point). The per-file plans are computed once per worker.
    fn install_hooks(&mut self) -> Result<()> {
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
                    self.p
                        .add_breakpoints(&addrs, |_| Some(BreakpointKind::LinkMapChanged))?;
                }
                continue;
            }
            let role = role_of(
                &m.path,
                &self.cfg.program,
                &self.cfg.trace_lib,
                &self.cfg.no_trace_lib,
            );
            if role == Role::System {
                continue;
            }
            let Some(plan) = self.worker.plans.get(&m.path, role, self.cfg.races) else {
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
            self.p
                .add_breakpoints(&addrs, |a| hooks.get(&a).map(|&h| BreakpointKind::Hook(h)))?;
            if role == Role::Program && self.snapshot_at_main && self.snapshot_key.is_some() {
                // The startup snapshot of a program that created no thread goes at main.
                if let Ok(elf) = ElfFile::load(&m.path) {
                    let mains: Vec<u64> = elf
                        .function_addresses("main")
                        .into_iter()
                        .map(|a| a + bias)
                        .collect();
                    self.p
                        .add_breakpoints(&mains, |_| Some(BreakpointKind::Main))?;
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
            self.p
                .add_breakpoints(&panics, |_| Some(BreakpointKind::Panic))?;
            let atomics: HashMap<u64, usize> = plan
                .atomics
                .iter()
                .enumerate()
                .map(|(i, insn)| (insn.ip() + bias, i))
                .collect();
            let addrs: Vec<u64> = atomics.keys().copied().collect();
            self.p.add_breakpoints(&addrs, |a| {
                atomics.get(&a).map(|&index| BreakpointKind::Atomic {
                    plan: plan.clone(),
                    index,
                    bias,
                })
            })?;
            let pauses: Vec<u64> = plan.pauses.iter().map(|a| a + bias).collect();
            self.p
                .add_breakpoints(&pauses, |_| Some(BreakpointKind::Pause))?;
            let allocs: HashMap<u64, Alloc> = plan
                .allocators
                .iter()
                .map(|&(a, k)| (a + bias, k))
                .collect();
            let addrs: Vec<u64> = allocs.keys().copied().collect();
            self.p.add_breakpoints(&addrs, |a| {
                allocs.get(&a).map(|&k| BreakpointKind::Alloc(k))
            })?;
            let mem_fns: HashMap<u64, MemFn> =
                plan.mem_fns.iter().map(|&(a, f)| (a + bias, f)).collect();
            let addrs: Vec<u64> = mem_fns.keys().copied().collect();
            self.p.add_breakpoints(&addrs, |a| {
                mem_fns.get(&a).map(|&f| BreakpointKind::MemFn(f))
            })?;
            let accesses: HashMap<u64, usize> = plan
                .accesses
                .iter()
                .enumerate()
                .map(|(i, (insn, _, _))| (insn.ip() + bias, i))
                .collect();
            let addrs: Vec<u64> = accesses.keys().copied().collect();
            self.p.add_breakpoints(&addrs, |a| {
                accesses.get(&a).map(|&index| BreakpointKind::Access {
                    plan: plan.clone(),
                    index,
                    bias,
                })
            })?;
            self.atomic_ranges.extend(
                plan.atomic_ranges
                    .iter()
                    .map(|r| r.start + bias..r.end + bias),
            );
        }
        Ok(())
    }

    /// Kills the process tree and reaps it.
    fn kill_all(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        let _ = kill(self.p.pid, Signal::SIGKILL);
        for &f in &self.p.foreign {
            let _ = kill(f, Signal::SIGKILL);
        }
        reap_all(self.p.pid, &self.p.foreign);
    }

    fn wait_process_end(&mut self) -> Result<ProcessEnd> {
        loop {
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => return Ok(ProcessEnd::Vanished),
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if pid == self.p.pid {
                match ev {
                    Event::Exited(c) => return Ok(ProcessEnd::Exited(c)),
                    Event::Killed(s) => return Ok(ProcessEnd::Killed(s)),
                    _ => events::resume(pid, None)?,
                }
            } else if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
            } else {
                events::resume(pid, None)?;
            }
        }
    }
}

/// The state a thread yields in, for the fair filter's notion of progress: the model's
/// synchronisation state and the yield's call site.
fn yield_state(model: &Model, site: u64) -> u64 {
    model.sync_fingerprint() ^ site.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Whether `p` is the dynamic loader (ld-linux).
fn is_dynamic_loader(p: &std::path::Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ld-linux") || n.starts_with("ld64.so"))
}

/// AT_ENTRY of the freshly exec'd process.
fn auxv_entry(pid: Pid) -> Result<u64> {
    let bytes = std::fs::read(format!("/proc/{pid}/auxv")).context("reading auxv")?;
    for pair in bytes.chunks_exact(16) {
        let key = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
        let val = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
        if key == libc::AT_ENTRY {
            return Ok(val);
        }
    }
    Err(anyhow!("no AT_ENTRY in the auxiliary vector"))
}

/// Reaps every child of this tracer thread, continuing exit stops until none is left.
fn reap_all(pid: Pid, foreign: &std::collections::HashSet<Pid>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    // Only this execution's processes: the worker's snapshot templates stay stopped.
    let mut left: std::collections::HashSet<Pid> = foreign.clone();
    left.insert(pid);
    loop {
        // A process reaped before (its end was seen during the execution) is gone for good;
        // a zombie still accepts signal 0 until it is reaped here.
        left.retain(|&p| kill(p, None).is_ok());
        if left.is_empty() {
            return;
        }
        match events::wait(None) {
            Ok(WaitOutcome::Event(pid, Event::Exited(_) | Event::Killed(_))) => {
                left.remove(&pid);
            }
            Ok(WaitOutcome::Event(pid, _)) => {
                let _ = kill(pid, Signal::SIGKILL);
                let _ = events::resume(pid, None);
            }
            Ok(WaitOutcome::Interrupted) => {}
            Ok(WaitOutcome::NoChildren) | Err(_) => return,
        }
        if Instant::now() > deadline {
            for &f in foreign {
                let _ = kill(f, Signal::SIGKILL);
            }
            return;
        }
    }
}

struct MemView<'a>(&'a Process);

impl MemoryView for MemView<'_> {
    fn read_u32(&mut self, addr: u64) -> Option<u32> {
        self.0.mem.read_u32(addr).ok()
    }
    fn write_u32(&mut self, addr: u64, value: u32) -> bool {
        self.0.mem.write_u32(addr, value).is_ok()
    }
}

impl HookContext for Execution<'_> {
    fn read_u32(&self, addr: u64) -> Option<u32> {
        self.p.mem.read_u32(addr).ok()
    }
    fn relative_timeout(&self, ts: u64, clock: libc::clockid_t) -> u64 {
        self.timespec_ns(ts)
            .map_or(0, |abs| abs.saturating_sub(self.clock_now_ns(clock)))
    }
    fn thread_of_handle(&self, handle: u64) -> Option<ThreadId> {
        if handle == 0 {
            return None;
        }
        // glibc reuses the stack and TCB (hence the pthread_t) of a finished thread for a
        // new one: the newest thread with this handle is the one meant.
        self.p.threads.iter().rposition(|t| t.handle == handle)
    }
    fn knows_mutex(&self, m: u64) -> bool {
        self.model.knows_mutex(m)
    }
    fn spin_held(&self, s: u64) -> bool {
        self.model.spin_held(s)
    }
}

impl TimeSource for Execution<'_> {
    fn timespec_ns(&self, addr: u64) -> Option<u64> {
        if addr == 0 {
            return None;
        }
        let sec = self.p.mem.read_u64(addr).ok()?;
        let nsec = self.p.mem.read_u64(addr + 8).ok()?;
        Some(sec.saturating_mul(1_000_000_000).saturating_add(nsec))
    }
    fn clock_now_ns(&self, clock: libc::clockid_t) -> u64 {
        self.det.peek_ns(clock, self.model.now())
    }
}
