//! Where the replay stops for gdb, and what gdb is told there: each moment the session
//! reports is turned into a stop (a breakpoint, a watchpoint, a step, a data race, the
//! end) or passed over, following the request gdb made (continue, step, reverse).

use super::*;

impl Bridge {
    /// Tells gdb about `stop`, then serves its requests until it resumes the replay. In a
    /// re-execution, the stops before the plan's last are passed silently, each resumed
    /// as gdb resumed it then.
    pub(super) fn stop(
        &mut self,
        view: &mut dyn ProgramView,
        mut kind: StopKind,
        report: Option<String>,
    ) -> Resume {
        self.end_over(view);
        self.started = true;
        let index = self.stop_index;
        self.stop_index += 1;
        if let Some(plan) = self.plan.take() {
            if let Some(seg) = plan.segments.get(index).cloned() {
                if index + 1 == plan.segments.len() && matches!(plan.then, Then::FindAnchors(_)) {
                    // The stop the last segment starts from is the first candidate.
                    self.anchors = vec![0];
                }
                self.plan = Some(plan);
                return self.run_segment(view, seg);
            }
            let mut session = lock(&self.session);
            match &plan.then {
                Then::Scanned(scan, window) => {
                    let path = Timeline {
                        until: plan.until,
                        path: plan.segments.clone(),
                    };
                    session.restart = Some(path.after_window(scan, *window, self.found));
                    return Resume::Kill;
                }
                Then::FindAnchors(back) => {
                    let mut back = back.clone();
                    back.anchors = std::mem::take(&mut self.anchors_before_point);
                    back.point = self.anchor_point.take();
                    back.anchors.append(&mut self.anchors);
                    let why = cannot_go_back(
                        back.thread,
                        "since its last scheduling decision it passed none of mcheck's breakpoints, where the replay could stop it and step it forward again",
                    );
                    session.restart = Some(match back.clone().count_from_last_anchor() {
                        Some(p) => p,
                        None => back.refused(why),
                    });
                    return Resume::Kill;
                }
                Then::CountFrom(back) => {
                    drop(session);
                    return self.count_steps(view, back.clone(), 0);
                }
                Then::Begin => {
                    kind = StopKind::Begin(kind.thread().unwrap_or(0));
                    self.said.push(
                        "mcheck: no hit of a breakpoint or watchpoint before this: at the first stop"
                            .into(),
                    );
                }
                Then::SteppedBack => kind = StopKind::Stepped(kind.thread().unwrap_or(0)),
                Then::Refused(why) => {
                    // The end of the history a step can reach: gdb's reverse-step stops
                    // there instead of asking again.
                    kind = StopKind::Begin(kind.thread().unwrap_or(0));
                    eprintln!("{why}");
                    self.said.push(why.clone());
                }
                Then::Stop => {}
            }
            session.timeline = Timeline {
                until: plan.until,
                path: plan.segments,
            };
        }
        let (bps, watches) = {
            let mut session = lock(&self.session);
            if matches!(kind, StopKind::Interrupted(_)) {
                if let Some(last) = session.timeline.path.last_mut() {
                    last.interrupt_at = Some(self.polls);
                }
            }
            (session.gdb_bps.clone(), session.gdb_watches.clone())
        };
        // gdb believes its breakpoints inserted until it takes them out.
        self.install(view, &bps, &watches);
        self.seg = None;
        self.interrupt.store(false, Ordering::SeqCst);
        let stop = Stop {
            kind,
            step: view.steps(),
            report,
            messages: std::mem::take(&mut self.said),
        };
        if self.stops.send(stop.clone()).is_err() {
            return Resume::Kill;
        }
        loop {
            let Ok(req) = self.requests.recv() else {
                return Resume::Kill;
            };
            let reply = match req {
                Request::Resume(goal) => {
                    let seg = Segment {
                        actions: std::mem::take(&mut self.actions),
                        goal,
                        bps: self.active_bps.clone(),
                        watches: self.active_watches.clone(),
                        skip: 0,
                        skip_from: None,
                        interrupt_at: None,
                        from_step: view.steps(),
                    };
                    lock(&self.session).timeline.path.push(seg.clone());
                    // Already applied: only the sets and the goal.
                    let mut seg = seg;
                    seg.actions.clear();
                    return self.run_segment(view, seg);
                }
                Request::Back(back) => {
                    let mut session = lock(&self.session);
                    let tl = &session.timeline;
                    let plan = match back {
                        Back::Step(n) => tl.goto_back(n),
                        Back::Continue => {
                            let scan = Scan {
                                bps: session.gdb_bps.clone(),
                                watches: session.gdb_watches.clone(),
                            };
                            if scan == Scan::default() || tl.path.is_empty() {
                                tl.back_to(0, Then::Begin)
                            } else {
                                tl.scan(scan)
                            }
                        }
                        // gdb's `bs` names the thread of its last `Hc`, not always the one
                        // it shows: the stopped thread is the one stepped back.
                        Back::Instruction(_) => match tl.one_instruction_back() {
                            Some(i) => tl.back_to(i, Then::SteppedBack),
                            None => {
                                let t = stop.kind.thread().unwrap_or(0);
                                let back = view.registers(t).and_then(|r| {
                                    StepBack {
                                        thread: t,
                                        target: regs_key(&r),
                                        present: tl.clone(),
                                        anchors: Vec::new(),
                                        point: None,
                                    }
                                    .find_anchors()
                                });
                                match back {
                                    Some(plan) => plan,
                                    None => {
                                        drop(session);
                                        // Refused: the same stop again, with the reason.
                                        let mut again = stop.clone();
                                        again.kind = StopKind::Begin(t);
                                        again.messages = vec![cannot_go_back(
                                            t,
                                            "this is the first stop of the replay",
                                        )];
                                        eprintln!("{}", again.messages[0]);
                                        if self.stops.send(again).is_err() {
                                            return Resume::Kill;
                                        }
                                        continue;
                                    }
                                }
                            }
                        },
                    };
                    session.restart = Some(plan);
                    return Resume::Kill;
                }
                Request::Threads => Reply::Threads(view.threads()),
                Request::Registers(t) => Reply::Registers(
                    view.registers(t)
                        .map(|r| Box::new(Regs::from_ptrace(&r, view.fp_registers(t).as_ref()))),
                ),
                Request::WriteRegisters(t, regs) => {
                    let ok = write_registers(view, t, &regs);
                    if ok {
                        self.actions.push(Action::Registers(t, regs));
                    }
                    Reply::Done(ok)
                }
                Request::Read(addr, len) => {
                    let mut buf = vec![0; len];
                    let n = view.read_memory(addr, &mut buf);
                    buf.truncate(n);
                    Reply::Bytes(buf)
                }
                Request::Auxv => Reply::Bytes(view.auxv()),
                Request::SetWatch(addr, len, what) => {
                    let ok = view.set_watch(what.hardware(addr, len));
                    if ok {
                        let w = (addr, len, what);
                        let mut session = lock(&self.session);
                        if !session.gdb_watches.contains(&w) {
                            session.gdb_watches.push(w);
                        }
                        if !self.active_watches.contains(&w) {
                            self.active_watches.push(w);
                        }
                    }
                    Reply::Done(ok)
                }
                Request::ClearWatch(addr, len, what) => {
                    let w = (addr, len, what);
                    lock(&self.session).gdb_watches.retain(|x| *x != w);
                    self.active_watches.retain(|x| *x != w);
                    Reply::Done(view.clear_watch(what.hardware(addr, len)))
                }
                Request::Write(addr, data) => {
                    let ok = view.write_memory(addr, &data);
                    if ok {
                        self.actions.push(Action::Memory(addr, data));
                    }
                    Reply::Done(ok)
                }
                Request::SetBreakpoint(addr) => {
                    lock(&self.session).gdb_bps.insert(addr);
                    self.active_bps.insert(addr);
                    Reply::Done(view.set_breakpoint(addr))
                }
                Request::ClearBreakpoint(addr) => {
                    lock(&self.session).gdb_bps.remove(&addr);
                    self.active_bps.remove(&addr);
                    Reply::Done(self.main_bp == Some(addr) || view.clear_breakpoint(addr))
                }
            };
            if self.replies.send(reply).is_err() {
                return Resume::Kill;
            }
        }
    }

    /// Stops at finding `f`, in `thread`.
    pub(super) fn finding_stop(
        &mut self,
        view: &mut dyn ProgramView,
        thread: ThreadId,
        f: &Finding,
    ) -> Resume {
        let report = self.report(f);
        if self.plan.is_none() {
            self.tell(format!(
                "mcheck: stopped at the finding: {} (monitor finding)",
                f.kind.name()
            ));
        }
        let kind = StopKind::Finding(thread, finding_signal(f));
        self.moment(view, kind, Some(report), true, false)
    }

    /// The report of `f`, as plain `mcheck replay` prints it.
    pub(super) fn report(&self, f: &Finding) -> String {
        human::format_finding(f, &self.again)
    }

    /// Says `text` on mcheck's stderr and in gdb's console (with the next stop).
    pub(super) fn tell(&mut self, text: String) {
        eprintln!("{text}");
        self.said.push(text);
    }
}
