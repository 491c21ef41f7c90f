//! What an execution did, decision by decision ([`History`]): the schedule, its
//! preemptions, the early timeouts, the readable trace (replay), the fair scheduler's
//! priority relation, and the window of the last decisions that tells a livelock.
//!
//! Livelocks: at `--max-steps`, telling a program that makes no progress under a fair
//! schedule from an execution cut short because its schedule was unfair, and describing the
//! cycle of operations it keeps repeating.
//!
//! The executor keeps the last [`WINDOW`] decisions. The execution is a livelock when the
//! more recent half of the window is fair — every thread enabled in it also ran in it (the
//! older half may hold the start of threads that were starved since) — and, with the fair
//! filter on (`explore::fair`), some thread yielded in it: the filter makes every schedule
//! fair to yielding threads, so such a program would run forever under any fair scheduler.
//! A window without any yield is a spin on atomics or plain memory that only an unfair
//! schedule keeps going (a thread that never reaches a scheduling point at all is the
//! `timeout` finding); it is cut short and counted, not reported. With `--no-fair` a fair
//! window is enough, as before the filter existed.

use imbl::Vector;

use super::process::report::{finding, Reporter};
use crate::explore::{Decision, FairFilter};
use crate::model::{Site, ThreadId};
use crate::report::{CycleStep, Finding, FindingKind, ThreadReport};

/// Decisions kept to judge whether an execution that hit `--max-steps` is a livelock.
pub(super) const WINDOW: usize = 1000;

/// How many times a cycle must repeat at the end of the window.
const REPEATS: usize = 4;

/// Longest cycle looked for.
const MAX_PERIOD: usize = WINDOW / REPEATS;

/// One scheduling decision, as the livelock judgement needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WindowStep {
    /// The threads that could run (before the fair filter).
    pub enabled: Vec<ThreadId>,
    /// The thread that ran.
    pub thread: ThreadId,
    /// Its operation.
    pub op: &'static str,
    /// Where the operation was called from.
    pub site: Site,
    /// `site` is the instruction itself (an atomic or PAUSE breakpoint), not a return
    /// address.
    pub site_is_pc: bool,
    /// The operation yields (sched_yield, pause, sleep, futex wait with a timeout).
    pub yields: bool,
}

/// The last [`WINDOW`] decisions of an execution (Clone: a snapshot keeps it, sharing the
/// steps instead of copying them).
#[derive(Clone, Debug, Default)]
pub(super) struct Window {
    steps: Vector<WindowStep>,
}

impl Window {
    /// Records a decision, forgetting the oldest beyond [`WINDOW`].
    pub fn push(&mut self, step: WindowStep) {
        self.steps.push_back(step);
        if self.steps.len() > WINDOW {
            self.steps.pop_front();
        }
    }

    /// Whether the window shows a livelock (see the module doc); `fair`: the fair filter
    /// chose the schedule.
    pub fn is_livelock(&self, fair: bool) -> bool {
        let n = self.steps.len();
        if fair {
            // The filter made the schedule fair to yielding threads: the recent half must
            // only show that no thread is starved without yields, and that threads yield.
            return self.all_enabled_ran(n / 2) && self.steps.iter().skip(n / 2).any(|s| s.yields);
        }
        // Unfiltered, a search may have starved a thread for most of the execution and let
        // it run only at the end: ask for a cycle in which every enabled thread takes part.
        self.period()
            .is_some_and(|p| self.all_enabled_ran(n - REPEATS * p))
    }

    /// Whether every thread enabled in the steps from `from` on also ran in them.
    fn all_enabled_ran(&self, from: usize) -> bool {
        let mut enabled = std::collections::BTreeSet::new();
        let mut ran = std::collections::BTreeSet::new();
        for s in self.steps.iter().skip(from) {
            enabled.extend(s.enabled.iter().copied());
            ran.insert(s.thread);
        }
        !ran.is_empty() && enabled.is_subset(&ran)
    }

    /// The length of the shortest sequence the window ends with and repeats [`REPEATS`]
    /// times (same threads, operations and call sites).
    fn period(&self) -> Option<usize> {
        let n = self.steps.len();
        let same = |a: &WindowStep, b: &WindowStep| {
            a.thread == b.thread && a.op == b.op && a.site == b.site
        };
        (1..=MAX_PERIOD.min(n / REPEATS)).find(|&period| {
            let start = n - REPEATS * period;
            (start + period..n).all(|i| same(&self.steps[i], &self.steps[i - period]))
        })
    }

    /// The repeating sequence the window ends with (see [`Self::period`]), or its last
    /// eight decisions when there is none.
    pub fn cycle(&self) -> Vec<&WindowStep> {
        let n = self.steps.len();
        let len = self.period().unwrap_or(8.min(n));
        self.steps.iter().skip(n - len).collect()
    }
}

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

/// What an execution did, decision by decision (kept with snapshots).
#[derive(Clone, Default)]
pub(super) struct History {
    /// Scheduling decisions taken.
    steps: u64,
    /// Preemptive switches among them.
    preemptions: u64,
    /// Every decision, in order (the schedule). Persistent, as the two below: a branch
    /// snapshot every few dozen decisions keeps the history, and a copy of 10^5 decisions
    /// each time made a long execution's cost per decision grow with its length.
    decisions: Vector<Decision>,
    /// Indexes of the decisions taken among more than one thread.
    choice_steps: Vector<u32>,
    /// The readable trace (replay).
    trace: Vec<TraceStep>,
    /// The last decisions, to tell a livelock from an unfair schedule at `--max-steps`.
    window: Window,
    /// The fair scheduler's priority relation (None with `--no-fair`).
    fair: Option<FairFilter>,
    /// Timeouts taken while another thread could run.
    early_timeouts: u32,
}

/// One decision, as the history records it.
pub(super) struct Decided<'a> {
    /// The thread chosen.
    pub thread: ThreadId,
    /// Its operation's name.
    pub op: &'static str,
    /// The threads that could run (before the fair filter).
    pub enabled: &'a [ThreadId],
    /// Chosen among more than one thread.
    pub choice: bool,
    /// A preemptive switch.
    pub preemption: bool,
    /// A timeout taken while another thread could run.
    pub early_timeout: bool,
    /// The thread yields for fairness, in this state (the fair filter's progress measure).
    pub yield_state: Option<u64>,
    /// Where its operation was called from, and whether that is the instruction itself.
    pub site: (Site, bool),
}

/// What an execution's history reports at its end.
pub(super) struct Record {
    /// Every decision, in order.
    pub decisions: Vec<Decision>,
    /// Indexes of the decisions taken among more than one thread.
    pub choice_steps: Vec<u32>,
    /// The readable trace.
    pub trace: Vec<TraceStep>,
}

impl History {
    /// The history of a new execution, with the fair filter when `fair`.
    pub fn new(fair: bool) -> History {
        History {
            fair: fair.then(FairFilter::new),
            ..History::default()
        }
    }

    /// Decisions taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Preemptive switches so far.
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }

    /// Timeouts taken early so far.
    pub fn early_timeouts(&self) -> u32 {
        self.early_timeouts
    }

    /// The decisions so far.
    pub fn decisions(&self) -> &Vector<Decision> {
        &self.decisions
    }

    /// The threads of `enabled` the fair filter lets the strategy choose.
    pub fn schedulable(&mut self, enabled: &[ThreadId]) -> Vec<ThreadId> {
        match self.fair.as_mut() {
            Some(f) => f.schedulable(enabled),
            None => enabled.to_vec(),
        }
    }

    /// Records a decision.
    pub fn record(&mut self, d: Decided<'_>) {
        self.preemptions += d.preemption as u64;
        self.early_timeouts += d.early_timeout as u32;
        if let Some(f) = self.fair.as_mut() {
            f.chose(d.thread, d.enabled, d.yield_state);
        }
        self.window.push(WindowStep {
            enabled: d.enabled.to_vec(),
            thread: d.thread,
            op: d.op,
            site: d.site.0,
            site_is_pc: d.site.1,
            yields: d.yield_state.is_some(),
        });
        if d.choice {
            self.choice_steps.push_back(self.decisions.len() as u32);
        }
        self.decisions.push_back(Decision {
            thread: d.thread,
            op: d.op.into(),
        });
        self.steps += 1;
    }

    /// Adds a step to the readable trace.
    pub fn trace(&mut self, step: TraceStep) {
        self.trace.push(step);
    }

    /// The fair scheduler's state, for a state hash.
    pub fn fair_fingerprint(&self) -> Option<u64> {
        self.fair.as_ref().map(FairFilter::state_fingerprint)
    }

    /// Hands the record over at the end of the execution.
    pub fn finish(&mut self) -> Record {
        Record {
            decisions: std::mem::take(&mut self.decisions).into_iter().collect(),
            choice_steps: std::mem::take(&mut self.choice_steps).into_iter().collect(),
            trace: std::mem::take(&mut self.trace),
        }
    }

    /// At `--max-steps`: a livelock finding when the window says so, else None (the
    /// execution is cut short and counted). `finished` tells the threads that ended.
    pub fn livelock_finding(
        &self,
        rep: &mut Reporter<'_>,
        finished: impl Fn(ThreadId) -> bool,
    ) -> Option<Finding> {
        let fair = self.fair.is_some();
        if !self.window.is_livelock(fair) {
            return None;
        }
        let cycle: Vec<(ThreadId, &'static str, Site, bool)> = self
            .window
            .cycle()
            .into_iter()
            .map(|s| (s.thread, s.op, s.site, s.site_is_pc))
            .collect();
        let steps: Vec<CycleStep> = cycle
            .iter()
            .map(|&(thread, op, site, is_pc)| CycleStep {
                thread,
                op: op.to_string(),
                location: (site != 0).then(|| {
                    if is_pc {
                        rep.symbols.instruction_site(site)
                    } else {
                        rep.symbols.call_site(site)
                    }
                }),
            })
            .collect();
        let mut involved: Vec<ThreadId> = cycle.iter().map(|c| c.0).collect();
        involved.sort_unstable();
        involved.dedup();
        involved.retain(|&t| !finished(t));
        let threads: Vec<ThreadReport> = involved
            .iter()
            .map(|&t| {
                let ops: Vec<&str> = cycle.iter().filter(|c| c.0 == t).map(|c| c.1).collect();
                let state = format!("keeps repeating {}", ops.join(", "));
                rep.thread_report(t, state)
            })
            .collect();
        let names: Vec<String> = involved.iter().map(|t| format!("T{t}")).collect();
        let message = if fair {
            let what = match steps.len() {
                1 => "the same operation".to_string(),
                n => format!("the same {n} operations"),
            };
            format!(
                "no progress in {} scheduling decisions under a fair schedule: {} keep{} repeating {what} (a livelock, or a wait that can never end)",
                self.steps,
                names.join(", "),
                if names.len() == 1 { "s" } else { "" },
            )
        } else {
            format!(
                "possible livelock or non-termination: {} scheduling decisions, every thread that could run did run, without the program ending",
                self.steps
            )
        };
        let mut f = finding(FindingKind::Livelock, message, threads);
        f.details.push("the execution repeats forever:".to_string());
        for s in &steps {
            let at = s
                .location
                .as_ref()
                .map(|l| format!(" in {}", l.short()))
                .unwrap_or_default();
            f.details.push(format!("  T{} {}{at}", s.thread, s.op));
        }
        f.cycle = steps;
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(enabled: &[ThreadId], thread: ThreadId, op: &'static str, site: Site) -> WindowStep {
        WindowStep {
            enabled: enabled.to_vec(),
            thread,
            op,
            site,
            site_is_pc: false,
            yields: op == "yield",
        }
    }

    #[test]
    fn finds_the_shortest_repeating_cycle() {
        let mut w = Window::default();
        w.push(step(&[0], 0, "start", 1));
        for _ in 0..10 {
            w.push(step(&[1, 2], 1, "yield", 10));
            w.push(step(&[1, 2], 2, "atomic", 20));
        }
        let c: Vec<_> = w.cycle().into_iter().map(|s| (s.thread, s.op)).collect();
        assert_eq!(c, vec![(1, "yield"), (2, "atomic")]);
        assert!(w.is_livelock(true));
    }

    #[test]
    fn call_sites_tell_cycles_apart() {
        let mut w = Window::default();
        for i in 0..40 {
            w.push(step(&[1], 1, "yield", 10 + (i % 2)));
        }
        assert_eq!(w.cycle().len(), 2);
    }

    #[test]
    fn no_cycle_gives_the_last_eight() {
        let mut w = Window::default();
        for i in 0..20 {
            w.push(step(&[i], i, "atomic", 0));
        }
        assert_eq!(w.cycle().len(), 8);
    }

    #[test]
    fn a_starved_thread_means_an_unfair_schedule() {
        let mut w = Window::default();
        for _ in 0..20 {
            w.push(step(&[1, 2], 1, "yield", 10));
        }
        assert!(!w.is_livelock(true));
        assert!(!w.is_livelock(false));
    }

    #[test]
    fn without_yields_only_the_unfiltered_search_calls_it_a_livelock() {
        let mut w = Window::default();
        for i in 0..20 {
            w.push(step(&[1, 2], 1 + i % 2, "atomic", 10));
        }
        assert!(!w.is_livelock(true));
        assert!(w.is_livelock(false));
    }

    #[test]
    fn unfiltered_needs_a_cycle_every_enabled_thread_takes_part_in() {
        // A dfs schedule that starved T2 all along and let it run only at the very end.
        let mut w = Window::default();
        for _ in 0..60 {
            w.push(step(&[1, 2], 1, "yield", 10));
        }
        w.push(step(&[1, 2], 2, "atomic", 20));
        w.push(step(&[1], 1, "yield", 10));
        assert!(!w.is_livelock(false));
        assert!(w.is_livelock(true), "the filter vouches for fairness");
    }

    #[test]
    fn a_thread_that_ran_only_early_on_was_starved_since() {
        let mut w = Window::default();
        for _ in 0..10 {
            w.push(step(&[1, 2], 2, "atomic", 20));
        }
        for _ in 0..30 {
            w.push(step(&[1, 2], 1, "yield", 10));
        }
        assert!(!w.is_livelock(true));
        assert!(!w.is_livelock(false));
    }

    #[test]
    fn the_window_forgets_old_decisions() {
        let mut w = Window::default();
        w.push(step(&[1, 2], 1, "atomic", 10));
        for _ in 0..WINDOW {
            w.push(step(&[1], 1, "yield", 10));
        }
        assert!(w.is_livelock(true), "T2 was starved only before the window");
    }
}
