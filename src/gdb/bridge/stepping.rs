//! Counting and stepping: going back over system calls and hooks (a step the executor
//! must make, counted as one instruction), counting steps back to the moment gdb asked
//! for, the anchors of each thread at scheduling points, and gdb's Ctrl-C.

use super::*;

impl Bridge {
    /// Steps `thread` over its instruction, which only the executor executes, by letting
    /// the replay run on until the thread is back at one of `to` (see [`Over`]).
    pub(super) fn start_over(
        &mut self,
        view: &mut dyn ProgramView,
        thread: ThreadId,
        to: &[Boundary],
    ) -> Resume {
        let mut inserted = Vec::new();
        for b in to {
            if !self.active_bps.contains(&b.addr) && !inserted.contains(&b.addr) {
                view.set_breakpoint(b.addr);
                inserted.push(b.addr);
            }
        }
        self.over = Some(Over {
            thread,
            to: to.to_vec(),
            inserted,
        });
        Resume::Continue
    }

    /// Ends a step over: its breakpoints go (gdb's own stay).
    pub(super) fn end_over(&mut self, view: &mut dyn ProgramView) {
        let Some(over) = self.over.take() else {
            return;
        };
        for a in over.inserted {
            if !self.active_bps.contains(&a) {
                view.clear_breakpoint(a);
            }
        }
    }

    /// Whether `ev` is the end of the step over: its thread back at one of its boundaries.
    pub(super) fn over_reached(&self, view: &mut dyn ProgramView, ev: &DebugEvent) -> bool {
        let (Some(over), DebugEvent::Breakpoint { thread, addr }) = (&self.over, ev) else {
            return false;
        };
        *thread == over.thread
            && (view.registers(*thread))
                .is_some_and(|r| (over.to.iter()).any(|b| b.addr == *addr && b.sp == r.rsp))
    }

    /// A step back counting from its anchor: `steps` instructions of its thread executed
    /// so far. When the thread's registers are those of the present stop, the step back is
    /// re-executed one instruction short of it; otherwise the thread steps on (or, when it
    /// cannot, the step back is refused).
    pub(super) fn count_steps(
        &mut self,
        view: &mut dyn ProgramView,
        back: StepBack,
        steps: u64,
    ) -> Resume {
        let t = back.thread;
        let here = view.registers(t).map(|r| regs_key(&r)) == Some(back.target);
        let plan = if here && steps == 0 {
            // The present stop is at the anchor itself: step from the one before, or, when
            // the thread did not move in the whole last segment, from the stop before it.
            let mut earlier = back.clone();
            let stepped_from = if earlier.anchors.pop() == Some(0) {
                back.back_from_stop_before()
            } else {
                // Before the first anchor: the decision whose operation mcheck ran.
                let at_point = || back.point.map(|n| back.at_point(n));
                earlier.count_from_last_anchor().or_else(at_point)
            };
            stepped_from.unwrap_or_else(|| {
                back.refused(cannot_go_back(
                    t,
                    "the instruction before is one that only mcheck executes (a scheduling point or a hook)",
                ))
            })
        } else if here {
            back.stepped_back(steps - 1)
        } else if steps >= MAX_STEPS_BACK {
            back.refused(cannot_go_back(
                t,
                &format!("it ran more than {MAX_STEPS_BACK} instructions since the last of mcheck's breakpoints it passed"),
            ))
        } else {
            self.counting = Some((back, steps));
            return Resume::Step(t);
        };
        self.counting = None;
        lock(&self.session).restart = Some(plan);
        Resume::Kill
    }

    /// An event while a step back counts its steps: a stepped instruction counts, and so
    /// does one that only the executor executes (a system call, a hook), which it performs
    /// as the replay does (a step over, [`Over`]): other threads run meanwhile when the
    /// schedule says so, and the thread found in its present state inside that instruction
    /// (waiting in its system call at the present stop) ends the count there. Anything
    /// else refuses the step back.
    pub(super) fn counted(&mut self, view: &mut dyn ProgramView, ev: &DebugEvent) -> Resume {
        let Some((back, steps)) = self.counting.take() else {
            return Resume::Continue;
        };
        let t = back.thread;
        let inside_here =
            self.over.is_some() && view.registers(t).map(|r| regs_key(&r)) == Some(back.target);
        let why = match ev {
            DebugEvent::Stepped {
                thread, moved: true, ..
            }
            | DebugEvent::Watch { thread, .. }
                if *thread == t =>
            {
                self.end_over(view);
                return self.count_steps(view, back, steps + 1);
            }
            DebugEvent::Stepped {
                thread,
                moved: false,
                over,
            } if *thread == t && !over.is_empty() && self.over.is_none() => {
                self.counting = Some((back, steps));
                return self.start_over(view, t, over);
            }
            _ if inside_here => {
                self.end_over(view);
                return self.count_steps(view, back, steps + 1);
            }
            // The schedule runs other threads while the thread is in its instruction.
            DebugEvent::Point { .. } if self.over.is_some() => {
                self.counting = Some((back, steps));
                return Resume::Continue;
            }
            DebugEvent::Breakpoint { thread, .. } if self.over.is_some() && *thread != t => {
                self.counting = Some((back, steps));
                return Resume::Continue;
            }
            DebugEvent::Stepped { moved: false, .. } => {
                "the instruction it is at on the way from the last of mcheck's breakpoints it passed is one that only mcheck executes and whose end it cannot tell"
            }
            _ => "on the way from the last of mcheck's breakpoints it passed, the replay stopped elsewhere (a signal, a data race, the end)",
        };
        self.end_over(view);
        lock(&self.session).restart = Some(back.refused(cannot_go_back(t, why)));
        Resume::Kill
    }

    /// A scheduling decision that does not stop, seen by a re-execution noting a step
    /// back's anchors: a step back steps from where its thread ran since the last decision,
    /// or from before the decision when the thread is still there in its present state.
    pub(super) fn anchors_at_point(
        &mut self,
        view: &mut dyn ProgramView,
        step: u64,
        thread: ThreadId,
    ) {
        let Some(Plan {
            then: Then::FindAnchors(back),
            segments,
            ..
        }) = &self.plan
        else {
            return;
        };
        if self.stop_index != segments.len() {
            return;
        }
        let t = back.thread;
        let unmoved = view.registers(t).map(|r| regs_key(&r)) == Some(back.target);
        if unmoved {
            // Still there at a later decision: the anchors before the first stay.
            let anchors = std::mem::take(&mut self.anchors);
            if !anchors.is_empty() || self.anchors_before_point.is_empty() {
                self.anchors_before_point = anchors;
            }
            return;
        }
        if view.in_system_call(t) {
            // The thread waits in a system call, which counting steps over (the decisions
            // in between with it): its anchors before the call stay. With none, going back
            // stops at this decision.
            if self.anchors.is_empty() && thread == t {
                self.anchor_point = Some(step);
            }
            return;
        }
        self.anchor_point = (thread == t).then_some(step);
        self.anchors_before_point.clear();
        self.anchors.clear();
    }

    /// Counts one interrupt poll of the running segment (`thread`: the thread at one of
    /// mcheck's breakpoints; None at a scheduling decision); whether to stop there.
    pub(super) fn poll(&mut self, thread: Option<ThreadId>) -> bool {
        if !self.started {
            return false;
        }
        self.polls += 1;
        match (&self.plan, &self.seg) {
            (Some(plan), Some(seg)) => {
                if let Then::FindAnchors(back) = &plan.then {
                    let last = self.stop_index == plan.segments.len();
                    if last && thread == Some(back.thread) {
                        self.anchors.push(self.polls);
                    }
                }
                seg.interrupt_at == Some(self.polls)
            }
            (Some(_), None) => false,
            (None, _) => self.interrupt.swap(false, Ordering::SeqCst),
        }
    }
}
