//! gdb's `monitor` commands: `finding`, `schedule`, `goto STEP`, `next-point`, `snapshots`,
//! `help`.

use std::fmt::Write as _;

use gdbstub::outputln;
use gdbstub::target::ext::monitor_cmd::{ConsoleOutput, MonitorCmd};

use super::bridge::{Back, Goal, StopKind};
use super::target::ReplayTarget;

const HELP: &str = "mcheck monitor commands:
  monitor finding      mcheck's report of the finding (once the replay reached it)
  monitor schedule     the recorded interleaving, => marking the next decision
  monitor goto STEP    go to scheduling decision STEP (forward, or back by replaying again)
  monitor next-point   run the scheduled thread to the next scheduling decision
  monitor snapshots    the fork snapshots going back re-executes from
After goto and next-point, `maintenance flush register-cache` makes gdb read the threads anew.";

impl MonitorCmd for ReplayTarget {
    fn handle_monitor_cmd(
        &mut self,
        cmd: &[u8],
        mut out: ConsoleOutput<'_>,
    ) -> Result<(), Self::Error> {
        let cmd = String::from_utf8_lossy(cmd);
        let words: Vec<&str> = cmd.split_whitespace().collect();
        match words.as_slice() {
            ["finding"] => match &self.finding {
                Some(r) => outputln!(out, "{}", r.trim_end()),
                None => outputln!(
                    out,
                    "no finding yet: the replay is at step {} of {}",
                    self.position(),
                    self.schedule.len()
                ),
            },
            ["schedule"] => outputln!(out, "{}", self.format_schedule().trim_end()),
            ["goto", n] => match n.parse::<u64>() {
                Ok(n) => self.goto(n, &mut out),
                Err(_) => outputln!(out, "monitor goto: STEP is a decision number, not {n:?}"),
            },
            ["next-point"] => {
                let goal = Goal::NextPoint;
                self.run_and_say(goal, &mut out);
            }
            ["snapshots"] => {
                let log = self.snapshots.lock().map(|l| l.describe());
                outputln!(out, "{}", log.unwrap_or_default());
            }
            [] | ["help"] => outputln!(out, "{HELP}"),
            _ => outputln!(out, "unknown monitor command {cmd:?}\n{HELP}"),
        }
        Ok(())
    }
}

impl ReplayTarget {
    /// The schedule, one decision a line, with the next one marked.
    pub(super) fn format_schedule(&self) -> String {
        let at = self.position();
        let mut s = String::new();
        let _ = writeln!(s, "    {:>6}  {:<6} operation", "step", "thread");
        for (i, d) in self.schedule.iter().enumerate() {
            let mark = if i as u64 == at { "=>" } else { "  " };
            let _ = writeln!(
                s,
                "{mark}  {:>6}  {:<6} {}",
                i + 1,
                format!("T{}", d.thread),
                d.op
            );
        }
        if at >= self.schedule.len() as u64 {
            let _ = writeln!(s, "=>  (every recorded decision was taken)");
        }
        s
    }

    fn goto(&mut self, n: u64, out: &mut ConsoleOutput<'_>) {
        let at = self.position();
        if n == at {
            outputln!(out, "already at step {n}");
            return;
        }
        if n < at {
            // Back: the program is replayed again from its start up to decision n.
            let mut started = false;
            let said = match self.go_back(Back::Step(n), &mut || keep_alive(out, &mut started)) {
                Ok(stop) => format!("mcheck: replayed again up to step {}", stop.step),
                Err(_) => "mcheck: the replay has ended".to_string(),
            };
            end_keep_alive(out, started);
            self.say_console(out);
            outputln!(out, "{said}");
            if let Some(gone) = self.selected_gone() {
                outputln!(out, "{gone}");
            }
            return;
        }
        self.run_and_say(Goal::Step(n), out);
    }

    /// Shows the messages that came with the last stop.
    fn say_console(&mut self, out: &mut ConsoleOutput<'_>) {
        for text in std::mem::take(&mut self.console) {
            outputln!(out, "{text}");
        }
    }

    fn run_and_say(&mut self, goal: Goal, out: &mut ConsoleOutput<'_>) {
        let mut started = false;
        let stop = (self.run_to_next_stop(goal, &mut || keep_alive(out, &mut started))).cloned();
        end_keep_alive(out, started);
        self.say_console(out);
        match stop {
            Ok(stop) => {
                let step = stop.step;
                let what = match &stop.kind {
                    StopKind::Point(t) | StopKind::Initial(t) => {
                        format!("at scheduling decision {} (T{t} runs next)", step + 1)
                    }
                    StopKind::Breakpoint(t) => format!("T{t} at a breakpoint"),
                    StopKind::Watch(t, a, _) => format!("T{t} touched watched {a:#x}"),
                    StopKind::Stepped(t) => format!("T{t} stepped"),
                    StopKind::Finding(t, _) => format!("T{t} at the finding (monitor finding)"),
                    StopKind::Exited(c) => format!("the program exited with status {c}"),
                    StopKind::Killed(s) => format!("the program was killed by signal {s}"),
                    StopKind::Interrupted(t) => format!("T{t} interrupted"),
                    StopKind::Refused(t) => format!("T{t} could not step"),
                    StopKind::Begin(t) => format!("T{t} at the first stop"),
                };
                outputln!(out, "mcheck: stopped after step {step}: {what}");
                if let Some(gone) = self.selected_gone() {
                    outputln!(out, "{gone}");
                }
            }
            Err(_) => outputln!(out, "mcheck: the replay has ended"),
        }
    }
}

/// Said every second while a monitor command runs the program: gdb waits for a reply no
/// longer than `remotetimeout` (2 s by default), and a console packet counts as one.
fn keep_alive(out: &mut ConsoleOutput<'_>, started: &mut bool) {
    if *started {
        gdbstub::output!(out, ".");
    } else {
        gdbstub::output!(out, "mcheck: running the replay");
        *started = true;
    }
    out.flush();
}

/// Ends the line of [`keep_alive`]'s dots, if it began one.
fn end_keep_alive(out: &mut ConsoleOutput<'_>, started: bool) {
    if started {
        outputln!(out, "");
    }
}
