//! The kernel as a source of blocking. A trapped call that may wait (`read` of a pipe,
//! `epoll_wait`, `sigwait`, `wait4`...) is first checked from the tracer side: descriptors
//! are polled through copies taken with `pidfd_getfd`, signals are read from
//! `/proc/PID/task/TID/status`, children from `/proc/PID/task/*/children`. A call that would
//! return at once runs natively, within the step that made it. A call that would wait leaves
//! its thread stopped at the seccomp stop, blocked in the model on an [`Op::Kernel`]; at every
//! later scheduling point the executor checks it again, and once it is ready the thread is
//! enabled, and running it lets the call run natively (it returns at once). A call with a
//! timeout may also time out (a choice of the search): its result is then made by the
//! tracer, side effects included (`poll`'s revents, `select`'s sets). No thread ever sleeps
//! in the kernel, so only one thread runs at a time and every wake-up is a decision.
//!
//! Everything the kernel holds for the program is one object ([`ObjectKind::Kernel`]) for
//! partial-order reduction and for the race detector: a kernel call that communicates
//! (any wait, a signal sent, I/O on a descriptor that is not a regular file) is dependent
//! with every other one and acquires and releases that object.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;

use super::kernel_calls::{self, KernelAction, KernelCall, TimedOut, Timeout, Wait};
use crate::model::{Completion, Model, Op, ThreadId};
use crate::run::process::Process;
use crate::tracee::fds::{Descriptors, FdKind};
use crate::tracee::{procfs, Pid};

/// The largest write a pipe takes at once when it has room (one pipe buffer page): POLLOUT
/// means a free page, so a write up to this size never waits.
const PIPE_BUF: u64 = 4096;

/// What the executor keeps about kernel waits in one execution (saved with snapshots).
#[derive(Clone, Default)]
pub(in crate::run) struct KernelWaits {
    /// The waiting call of each thread blocked in the kernel model.
    calls: BTreeMap<ThreadId, KernelCall>,
    /// The program did I/O on a pipe, socket or similar descriptor: a fork copy would share
    /// that object with its template.
    shares_descriptors: bool,
    /// The descriptors of the processes (opened on first use; a fork copy opens its own).
    descriptors: Vec<(Pid, Arc<Descriptors>)>,
    /// The pids the program ran as in the executions its snapshots were taken from (see
    /// `own_pid_now`).
    former_pids: Vec<i32>,
}

impl KernelWaits {
    /// What a snapshot of process `pid` keeps: a copy of the snapshot still holds that pid
    /// wherever the program saved it.
    pub fn saved(&self, pid: Pid) -> KernelWaits {
        let mut k = self.clone();
        if !k.former_pids.contains(&pid.as_raw()) {
            k.former_pids.push(pid.as_raw());
        }
        k
    }

    /// Whether the program did I/O on a pipe, socket or similar descriptor (a fork copy
    /// would share that object with its template).
    pub fn shares_descriptors(&self) -> bool {
        self.shares_descriptors
    }
}

/// What a trapped call at its seccomp stop comes to.
pub(in crate::run) struct KernelStop {
    /// It passes something through the kernel to or from another thread: the step touches
    /// the kernel object, and the race detector sees an acquire and a release of it.
    pub communicated: bool,
    /// What happens to the call.
    pub then: KernelThen,
}

/// What happens to a trapped kernel call.
pub(in crate::run) enum KernelThen {
    /// It runs natively, within the step that made it (it returns at once).
    RunOn,
    /// The tracer placed its whole write into a pipe: it returns this at once.
    Return(i64),
    /// It would wait: a scheduling point with this operation.
    Wait(Op),
}

/// What a look at a waiting call found.
#[derive(Clone, Copy, Debug, Default)]
struct Look {
    /// It would return at once.
    ready: bool,
    /// It passes something through the kernel to or from another thread (not only a
    /// regular file).
    communicates: bool,
}

impl KernelWaits {
    /// A trapped call at its seccomp stop in thread `t` of `p`: None when it is not a
    /// kernel call, else what it comes to. `in_stretch`: `t` is in a thread creation's
    /// stretch (a parent after its clone, a new thread before its first point), where
    /// nothing may be ordered against another thread without a scheduling point: a call
    /// that passes something through the kernel becomes one, even when it is ready.
    pub fn classify(
        &mut self,
        p: &mut Process,
        t: ThreadId,
        nr: i64,
        args: [u64; 6],
        in_stretch: bool,
    ) -> Result<Option<KernelStop>> {
        let mem = &p.mem;
        let read = |addr: u64, len: usize| {
            let mut b = vec![0u8; len];
            mem.read(addr, &mut b).ok().map(|_| b)
        };
        let Some(action) = kernel_calls::decode(nr, args, &read) else {
            return Ok(None);
        };
        if matches!(action, KernelAction::Signal) {
            self.own_pid_now(p, t, nr, args)?;
        }
        let call = match action {
            KernelAction::Signal if in_stretch => {
                // The send becomes a point of its own.
                let call = KernelCall::immediate(kernel_calls::name_of(nr));
                let op = Op::Kernel {
                    call: call.name,
                    timeout: None,
                };
                self.calls.insert(t, call);
                return Ok(Some(KernelStop {
                    communicated: false,
                    then: KernelThen::Wait(op),
                }));
            }
            KernelAction::Signal => {
                return Ok(Some(KernelStop {
                    communicated: true,
                    then: KernelThen::RunOn,
                }))
            }
            KernelAction::Wait(call) => call,
        };
        if call.write_len.is_some()
            && matches!(&call.wait, Wait::Fds(fds) if fds.iter().all(|&(fd, _)| (fd == 1 || fd == 2) && !tree_pipe(p, t, fd)))
        {
            // Output on stdout and stderr is read by the user (or by mcheck): let it go, as
            // the outside drains it. Not a pipe to another process of the tree (`sh -c
            // 'pigz -c f | wc -c'`): that reader runs only when the model lets it, so a
            // full pipe is a wait like any other.
            return Ok(Some(KernelStop {
                communicated: false,
                then: KernelThen::RunOn,
            }));
        }
        let mut call = call;
        self.push_pipe_write(p, t, &mut call);
        let look = self.look(p, t, &call);
        if look.communicates && matches!(call.wait, Wait::Fds(_)) {
            self.shares_descriptors = true;
        }
        let communicated = look.communicates && !in_stretch;
        if look.ready && call.written > 0 && !in_stretch {
            // The tracer placed the whole write: the call returns at once with its length.
            return Ok(Some(KernelStop {
                communicated,
                then: KernelThen::Return(call.written as i64),
            }));
        }
        if look.ready && !in_stretch {
            return Ok(Some(KernelStop {
                communicated,
                then: KernelThen::RunOn,
            }));
        }
        let op = Op::Kernel {
            call: call.name,
            timeout: match call.timeout {
                Timeout::After(ns) => Some(ns),
                _ => None,
            },
        };
        self.calls.insert(t, call);
        Ok(Some(KernelStop {
            communicated,
            then: KernelThen::Wait(op),
        }))
    }

    /// Looks again at every call the model has blocked in the kernel and tells the model
    /// which are ready (at every scheduling point: another thread may have written to the
    /// pipe, sent the signal, ended the child...).
    pub fn recheck(&mut self, p: &Process, model: &mut Model) {
        let waiting: Vec<(ThreadId, KernelCall)> = self
            .calls
            .iter()
            .filter(|(&t, _)| matches!(model.pending(t), Some(Op::Kernel { .. })))
            .map(|(&t, c)| (t, c.clone()))
            .collect();
        // Writes the tracer moves into pipes first (they may make reads ready), then every
        // look, in thread order: the same state gives the same answers.
        for (t, call) in &waiting {
            let mut call = call.clone();
            // Also a write that found the pipe full and placed nothing yet.
            if call.write_buf.is_some() {
                self.push_pipe_write(p, *t, &mut call);
                self.calls.insert(*t, call);
            }
        }
        for (t, _) in waiting {
            let call = self.calls[&t].clone();
            let ready = self.look(p, t, &call).ready;
            model.set_kernel_ready(t, ready);
        }
    }

    /// Thread `t` was chosen to perform its pending operation with result `c`: when it is a
    /// kernel wait, the call now runs natively (ready) or times out, its result made by the
    /// tracer. Returns the completion still to apply to the thread.
    pub fn finish(&mut self, p: &mut Process, t: ThreadId, c: Completion) -> Result<Completion> {
        let Some(call) = self.calls.remove(&t) else {
            return Ok(c);
        };
        if call.written > 0 && c == Completion::Native {
            // The tracer moved the write into the pipe: the call returns what it placed.
            p.load_regs(t)?;
            p.finish_syscall(t, call.written as i64)?;
            return Ok(c);
        }
        if c != Completion::Error(crate::model::errno::ETIMEDOUT) {
            return Ok(c);
        }
        p.load_regs(t)?;
        let value = match &call.timed_out {
            TimedOut::Poll { revents } => {
                for &a in revents {
                    p.mem.write(a, &[0, 0])?;
                }
                0
            }
            TimedOut::Select { sets, remaining } => {
                for &(a, len) in sets {
                    p.mem.write(a, &vec![0u8; len])?;
                }
                if *remaining != 0 {
                    p.mem.write(*remaining, &[0u8; 16])?;
                }
                0
            }
            TimedOut::Zero => 0,
            TimedOut::Again => -(libc::EAGAIN as i64),
        };
        p.finish_syscall(t, value)?;
        Ok(Completion::Native)
    }

    /// Whether the executor should wait for the world outside the program before declaring
    /// a deadlock: some thread waits in the kernel for something another process, a
    /// terminal or the network could still bring.
    pub fn waits_for_outside(&self, p: &Process, model: &Model) -> bool {
        (self.waiting_threads(model).into_iter()).any(|t| self.is_external(p, t, &self.calls[&t]))
    }

    /// The threads blocked in a kernel wait, in id order.
    pub fn waiting_threads(&self, model: &Model) -> Vec<ThreadId> {
        self.calls
            .keys()
            .copied()
            .filter(|&t| matches!(model.pending(t), Some(Op::Kernel { .. })))
            .collect()
    }

    /// What thread `t` waits for in the kernel, for reports ("read(fd 3: pipe:[123])").
    pub fn describe(&self, pid: Pid, t: ThreadId) -> Option<String> {
        let call = self.calls.get(&t)?;
        let fd = |fd: i32| format!("fd {fd}: {}", procfs::descriptor_target(pid, fd));
        let what = match &call.wait {
            Wait::Fds(fds) => fds
                .iter()
                .map(|&(f, _)| fd(f))
                .collect::<Vec<_>>()
                .join(", "),
            Wait::Signals(set) => format!("signals {}", signal_names(*set)),
            Wait::Child(-1) => "any child".to_string(),
            Wait::Child(p) => format!("child {p}"),
            Wait::Interrupt => "a signal".to_string(),
            Wait::Nothing => String::new(),
        };
        Some(format!("{}({what})", call.name))
    }

    /// A signal sent by a fork copy to the pid its program saved before the snapshot (lbzip2
    /// keeps `getpid()` and signals its main thread with `kill`): fork copies get pids of
    /// their own, so that pid names a template or a process already gone (ESRCH, and lbzip2
    /// aborts). The call, at its seccomp stop, is pointed at the copy's own pid instead, as
    /// glibc's cached tids are patched. Thread ids saved by the program are not translated.
    fn own_pid_now(&self, p: &mut Process, t: ThreadId, nr: i64, args: [u64; 6]) -> Result<()> {
        use crate::tracee::seccomp::nr;
        let takes_pid = matches!(
            nr,
            nr::KILL | nr::TGKILL | nr::RT_SIGQUEUEINFO | nr::RT_TGSIGQUEUEINFO
        );
        let target = args[0] as i32;
        let me = p.pid.as_raw();
        if !takes_pid || target == me || !self.former_pids.contains(&target) {
            return Ok(());
        }
        let mut r = p.load_regs(t)?;
        r.rdi = me as u64;
        p.set_regs(t, r)?;
        Ok(())
    }

    fn descriptors(&mut self, pid: Pid) -> Option<Arc<Descriptors>> {
        if let Some((_, d)) = self.descriptors.iter().find(|(p, _)| *p == pid) {
            return Some(d.clone());
        }
        let d = Arc::new(Descriptors::open(pid).ok()?);
        self.descriptors.push((pid, d.clone()));
        Some(d)
    }

    /// Forgets the descriptors of process `pid`, which has ended or exec'd (a new image
    /// may have closed some on exec).
    pub fn forget_process(&mut self, pid: Pid) {
        self.descriptors.retain(|(p, _)| *p != pid);
    }

    /// A `write` of more than a pipe takes at once (more than a page, more than its room):
    /// moves as much of it as fits, a page at a time, from the program's buffer into the
    /// pipe, as the kernel does while the writer sleeps. The call is then finished by the
    /// tracer once all of it is in (see [`Session::finish_kernel_wait`]).
    fn push_pipe_write(&mut self, p: &Process, t: ThreadId, call: &mut KernelCall) {
        let (Some(buf), Some(len), Wait::Fds(fds)) = (call.write_buf, call.write_len, &call.wait)
        else {
            return;
        };
        let Some(&(fd, _)) = fds.first() else { return };
        let Some(d) = self.descriptors(p.pid_of(t)) else {
            return;
        };
        while call.written < len {
            let Ok(s) = d.look(fd, libc::POLLOUT) else {
                return;
            };
            if s.kind != FdKind::Pipe
                || s.nonblocking
                || s.revents & libc::POLLOUT == 0
                || s.revents & libc::POLLERR != 0
                || len <= PIPE_BUF
            {
                return;
            }
            let chunk = (len - call.written).min(PIPE_BUF) as usize;
            let mut data = vec![0u8; chunk];
            if p.mem_of(t).read(buf + call.written, &mut data).is_err() {
                return;
            }
            match d.write(fd, &data) {
                Ok(n) if n > 0 => call.written += n as u64,
                _ => return,
            }
        }
    }

    /// Whether `call` of thread `t` would return at once.
    fn look(&mut self, p: &Process, t: ThreadId, call: &KernelCall) -> Look {
        let mut look = Look::default();
        let mut blocked_mask = None;
        match &call.wait {
            Wait::Fds(fds) => {
                let Some(d) = self.descriptors(p.pid_of(t)) else {
                    // Without a view of the descriptors, let the call run.
                    look.ready = true;
                    return look;
                };
                let single = fds.len() == 1 && !is_multiplexer(call.name);
                for &(fd, events) in fds {
                    let Ok(s) = d.look(fd, events) else {
                        // A bad descriptor: the call fails at once.
                        look.ready = true;
                        continue;
                    };
                    if s.kind == FdKind::File {
                        look.ready = true;
                        continue;
                    }
                    // The standard streams are the user's (and mcheck's stderr pipe): what
                    // threads print there is no message to another thread, unless they
                    // are a pipe to another process of the tree.
                    look.communicates |= fd > 2 || tree_pipe(p, t, fd);
                    if single && s.nonblocking {
                        look.ready = true;
                        continue;
                    }
                    let mut ready = s.revents != 0;
                    if let (Some(len), FdKind::Pipe) = (call.write_len, s.kind) {
                        // A pipe write waits until all of it is in the pipe. A free page
                        // (POLLOUT) takes a page of data; a larger write is moved in by
                        // the tracer, and ready once all of it is in (or the reader is
                        // gone: the call then fails or returns what was placed).
                        if s.revents & libc::POLLERR == 0 && len > PIPE_BUF {
                            ready = call.written >= len;
                        }
                    }
                    look.ready |= ready;
                }
            }
            Wait::Signals(set) => {
                look.communicates = true;
                let (own, shared, blocked) = signal_state(p, t);
                look.ready = (own | shared) & set != 0;
                blocked_mask = Some(blocked);
            }
            Wait::Child(pid) => {
                look.communicates = true;
                let children = procfs::children(p.pid_of(t));
                let mine: Vec<&(Pid, bool)> = children
                    .iter()
                    .filter(|(c, _)| *pid <= 0 || c.as_raw() as i64 == *pid)
                    .collect();
                look.ready = mine.is_empty() || mine.iter().any(|(_, ended)| *ended);
            }
            Wait::Interrupt => look.communicates = true,
            Wait::Nothing => {
                look.communicates = true;
                look.ready = true;
            }
        }
        if call.timeout == Timeout::Zero {
            // A call that only looks never waits.
            look.ready = true;
        }
        if !look.ready {
            // A signal the thread does not block while it waits interrupts any wait.
            let (own, shared, blocked) = signal_state(p, t);
            let mask = call.mask.or(blocked_mask).unwrap_or(blocked);
            look.ready = (own | shared) & !mask != 0;
        }
        look
    }

    /// Whether what `call` of thread `t` waits for could come from outside the program: a
    /// child process still running that mcheck does not follow, a descriptor that is not a
    /// pipe or eventfd of the process tree's own (a terminal, a socket, a timerfd, a pipe
    /// whose other end is elsewhere). The processes of the tree are the program: a wait for
    /// one of them is a wait for its threads, which the model sees.
    fn is_external(&self, p: &Process, t: ThreadId, call: &KernelCall) -> bool {
        let pid = p.pid_of(t);
        let tree: Vec<Pid> = p.procs.iter().filter(|q| q.live).map(|q| q.pid).collect();
        let children_run =
            (procfs::children(pid).iter()).any(|(c, ended)| !ended && !tree.contains(c));
        if children_run || !p.foreign.is_empty() {
            return true;
        }
        match &call.wait {
            Wait::Fds(fds) => fds.iter().any(|&(fd, _)| external_fd(pid, &tree, fd, 0)),
            Wait::Signals(_) | Wait::Interrupt | Wait::Child(_) | Wait::Nothing => false,
        }
    }
}

/// The signals pending for thread `t` of `p`: its own, the process's, and its mask.
fn signal_state(p: &Process, t: ThreadId) -> (u64, u64, u64) {
    procfs::signal_state(p.pid_of(t), p.threads[t].tid)
}

/// poll, select and epoll wait whatever their descriptors' O_NONBLOCK says.
fn is_multiplexer(name: &str) -> bool {
    matches!(
        name,
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait" | "epoll_pwait2"
    )
}

/// Whether standard stream `fd` of thread `t`'s process is a pipe whose both ends the
/// program's process tree holds (only looked at when the tree has several processes).
fn tree_pipe(p: &Process, t: ThreadId, fd: i32) -> bool {
    let tree: Vec<Pid> = p.procs.iter().filter(|q| q.live).map(|q| q.pid).collect();
    let pid = p.pid_of(t);
    tree.len() > 1
        && procfs::descriptor_target(pid, fd).starts_with("pipe:")
        && !external_fd(pid, &tree, fd, 0)
}

/// Whether descriptor `fd` of `pid` may be made ready by something outside the process
/// tree (the processes `tree`).
fn external_fd(pid: Pid, tree: &[Pid], fd: i32, depth: u32) -> bool {
    let target = procfs::descriptor_target(pid, fd);
    if target.starts_with("pipe:") {
        // Internal when the tree holds both ends.
        let ends: Vec<i32> = (tree.iter())
            .flat_map(|&q| {
                procfs::descriptors(q)
                    .into_iter()
                    .filter(|(_, t)| *t == target)
                    .filter_map(move |(f, _)| procfs::descriptor_flags(q, f))
            })
            .map(|flags| flags & libc::O_ACCMODE)
            .collect();
        let reads = ends
            .iter()
            .any(|&m| m == libc::O_RDONLY || m == libc::O_RDWR);
        let writes = ends
            .iter()
            .any(|&m| m == libc::O_WRONLY || m == libc::O_RDWR);
        return !(reads && writes);
    }
    match target.as_str() {
        "anon_inode:[eventfd]" | "anon_inode:[signalfd]" => false,
        "anon_inode:[eventpoll]" if depth < 4 => procfs::epoll_targets(pid, fd)
            .into_iter()
            .any(|f| external_fd(pid, tree, f, depth + 1)),
        _ => true,
    }
}

/// Signal numbers of a mask, for reports ("SIGUSR1 SIGTERM").
fn signal_names(mask: u64) -> String {
    let names: Vec<String> = (1..=64i32)
        .filter(|n| mask & (1u64 << (n - 1)) != 0)
        .map(|n| {
            nix::sys::signal::Signal::try_from(n)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {n}"))
        })
        .collect();
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(" ")
    }
}
