//! Unit tests of the model on synthetic operation sequences.

use std::collections::HashMap;

use super::*;

#[derive(Default)]
struct FakeMemory(HashMap<u64, u32>);

impl MemoryView for FakeMemory {
    fn read_u32(&mut self, addr: Addr) -> Option<u32> {
        Some(*self.0.get(&addr).unwrap_or(&0))
    }
    fn write_u32(&mut self, addr: Addr, value: u32) -> bool {
        self.0.insert(addr, value);
        true
    }
}

const M1: Addr = 0x1000;
const M2: Addr = 0x2000;

fn lock(m: Addr) -> Op {
    Op::MutexLock {
        m,
        attempt: Attempt::Block,
        kind: MutexType::Normal,
    }
}

/// Sets `op` pending for `t` and executes it at once.
fn run(model: &mut Model, mem: &mut FakeMemory, t: ThreadId, op: Op) -> Completion {
    model
        .set_pending(t, op, 0x42)
        .expect("no finding on set_pending");
    assert!(model.is_enabled(t), "thread {t} should be enabled");
    model.execute(t, mem).expect("no finding on execute")
}

#[test]
fn mutex_blocks_second_locker_until_unlock() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    assert_eq!(run(&mut m, &mut mem, 0, lock(M1)), Completion::Return(0));
    m.set_pending(t1, lock(M1), 7).unwrap();
    assert!(!m.is_enabled(t1));
    assert_eq!(m.enabled_threads(), Vec::<ThreadId>::new());
    assert_eq!(
        run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 }),
        Completion::Return(0)
    );
    assert!(m.is_enabled(t1));
}

#[test]
fn the_same_address_in_two_processes_is_two_mutexes() {
    // A parent and its forked child lock "the same" mutex: each its own copy.
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let child = m.add_thread();
    run(&mut m, &mut mem, 0, lock(M1));
    run(&mut m, &mut mem, child, Op::Start);
    let in_child = lock(M1).in_space(1);
    assert_eq!(
        run(&mut m, &mut mem, child, in_child),
        Completion::Return(0)
    );
    // Within each space the mutex is held: a second thread of the child waits for it.
    let third = m.add_thread();
    run(&mut m, &mut mem, third, Op::Start);
    m.set_pending(third, lock(M1).in_space(1), 0).unwrap();
    assert!(!m.is_enabled(third));
    assert_eq!(
        run(
            &mut m,
            &mut mem,
            child,
            Op::MutexUnlock { m: M1 }.in_space(1)
        ),
        Completion::Return(0)
    );
    assert!(m.is_enabled(third));
    // The parent still holds its own.
    assert!(matches!(
        m.set_pending(0, lock(M1), 0),
        Err(ModelFinding::Deadlock { .. })
    ));
}

#[test]
fn abba_is_a_local_deadlock_with_both_threads() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    run(&mut m, &mut mem, 0, lock(M1));
    run(&mut m, &mut mem, t1, lock(M2));
    m.set_pending(0, lock(M2), 1).unwrap();
    match m.set_pending(t1, lock(M1), 2) {
        Err(ModelFinding::Deadlock {
            local: true,
            blocked,
        }) => {
            let ids: Vec<_> = blocked.iter().map(|b| b.thread).collect();
            assert_eq!(ids, vec![t1, 0]);
            assert_eq!(blocked[0].holders[0].thread, 0);
            assert_eq!(blocked[0].object.addr, M1);
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn relocking_a_normal_mutex_deadlocks_but_errorcheck_returns_edeadlk() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    run(&mut m, &mut mem, 0, lock(M1));
    assert!(matches!(
        m.set_pending(0, lock(M1), 0),
        Err(ModelFinding::Deadlock { local: true, .. })
    ));
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    run(
        &mut m,
        &mut mem,
        0,
        Op::MutexInit {
            m: M1,
            kind: MutexType::ErrorCheck,
        },
    );
    run(&mut m, &mut mem, 0, lock(M1));
    assert_eq!(
        run(&mut m, &mut mem, 0, lock(M1)),
        Completion::Error(errno::EDEADLK)
    );
}

#[test]
fn recursive_mutex_counts() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    run(
        &mut m,
        &mut mem,
        0,
        Op::MutexInit {
            m: M1,
            kind: MutexType::Recursive,
        },
    );
    run(&mut m, &mut mem, 0, lock(M1));
    run(&mut m, &mut mem, 0, lock(M1));
    run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 });
    m.set_pending(t1, lock(M1), 0).unwrap();
    assert!(!m.is_enabled(t1));
    run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 });
    assert!(m.is_enabled(t1));
}

#[test]
fn nesting_depth_counts_the_owners_holds_only() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let nest = |attempt| Op::MutexLock {
        m: M1,
        attempt,
        kind: MutexType::Recursive,
    };
    run(&mut m, &mut mem, 0, nest(Attempt::Block));
    assert_eq!(
        run(&mut m, &mut mem, 0, nest(Attempt::Try)),
        Completion::Return(0)
    );
    assert_eq!(m.mutex_depth(M1, 0), 2);
    assert_eq!(m.mutex_depth(M1, t1), 0);
    assert_eq!(m.mutex_depth(M2, 0), 0);
    run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 });
    assert_eq!(m.mutex_depth(M1, 0), 1);
}

#[test]
fn a_trylock_of_a_held_mutex_is_known_to_fail_before_it_runs() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let try_lock = Op::MutexLock {
        m: M1,
        attempt: Attempt::Try,
        kind: MutexType::Normal,
    };
    m.set_pending(t1, try_lock.clone(), 0).unwrap();
    assert!(!m.pending_try_fails(t1), "a free mutex is taken");
    run(&mut m, &mut mem, 0, lock(M1));
    assert!(m.pending_try_fails(t1), "T0 holds it");
    assert_eq!(m.execute(t1, &mut mem), Ok(Completion::Error(libc::EBUSY)));
    m.set_pending(0, try_lock, 0).unwrap();
    assert!(
        m.pending_try_fails(0),
        "a normal mutex is not relocked by its owner"
    );
    m.set_pending(t1, lock(M1), 0).unwrap();
    assert!(!m.pending_try_fails(t1), "a blocking lock is no trylock");
}

#[test]
fn unlocking_an_unheld_mutex_is_misuse() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    m.set_pending(0, Op::MutexUnlock { m: M1 }, 0).unwrap();
    assert!(matches!(
        m.execute(0, &mut mem),
        Err(ModelFinding::Misuse { thread: 0, .. })
    ));
}

#[test]
fn destroying_a_locked_mutex_is_misuse() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    run(&mut m, &mut mem, 0, lock(M1));
    m.set_pending(0, Op::MutexDestroy { m: M1 }, 0).unwrap();
    assert!(matches!(
        m.execute(0, &mut mem),
        Err(ModelFinding::Misuse { .. })
    ));
}

#[test]
fn a_wait_on_a_lock_left_by_an_exited_owner_is_no_local_deadlock() {
    // T1 exits holding M1; T2 then waits on it while main can still run (and end the
    // program): no finding yet, the wait is an orphaned one.
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let t2 = m.add_thread();
    run(&mut m, &mut mem, t1, lock(M1));
    m.thread_exited(t1);
    m.set_pending(t2, lock(M1), 0).unwrap();
    assert!(!m.is_enabled(t2));
    let orphaned = m.orphaned_waits();
    assert_eq!(orphaned.len(), 1);
    assert_eq!(orphaned[0].thread, t2);
    assert!(orphaned[0].holders[0].exited);
}

#[test]
fn a_lock_left_by_an_exited_owner_deadlocks_once_no_thread_can_run() {
    // The same, and then main waits on it too: no thread can run, the global deadlock
    // names both waiters and the exited holder.
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let t2 = m.add_thread();
    run(&mut m, &mut mem, t1, lock(M1));
    m.thread_exited(t1);
    m.set_pending(t2, lock(M1), 0).unwrap();
    m.set_pending(0, lock(M1), 0).unwrap();
    assert!(m.enabled_threads().is_empty() && !m.all_finished());
    match m.global_deadlock() {
        ModelFinding::Deadlock {
            local: false,
            blocked,
        } => {
            assert_eq!(blocked.len(), 2);
            assert!(blocked
                .iter()
                .all(|b| b.holders[0].exited && b.holders[0].thread == t1));
        }
        other => panic!("expected a global deadlock, got {other:?}"),
    }
}

#[test]
fn exiting_while_holding_a_waited_lock_is_no_finding_by_itself() {
    // T2 waits first, then the owner exits: the exit makes no finding.
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let t2 = m.add_thread();
    run(&mut m, &mut mem, t1, lock(M1));
    m.set_pending(t2, lock(M1), 0).unwrap();
    assert!(m.orphaned_waits().is_empty(), "the owner still runs");
    m.thread_exited(t1);
    assert_eq!(m.orphaned_waits().len(), 1);
}

#[test]
fn condvar_wait_releases_and_reacquires_the_mutex() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    const C: Addr = 0x3000;
    run(&mut m, &mut mem, t1, lock(M1));
    let r = run(
        &mut m,
        &mut mem,
        t1,
        Op::CondWait {
            c: C,
            m: M1,
            timeout: None,
        },
    );
    assert_eq!(r, Completion::Blocked);
    assert!(!m.is_enabled(t1));
    run(&mut m, &mut mem, 0, lock(M1));
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert!(!m.is_enabled(t1), "signalled but the mutex is still held");
    run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 });
    assert!(m.is_enabled(t1));
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Return(0));
    m.set_pending(0, lock(M1), 0).unwrap();
    assert!(!m.is_enabled(0), "the waiter owns the mutex again");
}

/// Threads 1..=n wait on `c` (mutex M1) in order; thread 0 holds nothing afterwards.
fn waiters_on(m: &mut Model, mem: &mut FakeMemory, c: Addr, n: usize) -> Vec<ThreadId> {
    (0..n)
        .map(|_| {
            let t = m.add_thread();
            run(m, mem, t, lock(M1));
            let wait = Op::CondWait {
                c,
                m: M1,
                timeout: None,
            };
            assert_eq!(run(m, mem, t, wait), Completion::Blocked);
            t
        })
        .collect()
}

#[test]
fn a_signal_may_wake_any_waiter_of_the_oldest_group_but_only_one() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    let w = waiters_on(&mut m, &mut mem, C, 2);
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert!(
        m.is_enabled(w[0]) && m.is_enabled(w[1]),
        "either may take it"
    );
    // The later one takes it: the first waits on.
    assert_eq!(m.execute(w[1], &mut mem).unwrap(), Completion::Return(0));
    assert!(!m.is_enabled(w[0]), "one signal, one waiter");
    run(&mut m, &mut mem, w[1], Op::MutexUnlock { m: M1 });
    assert!(!m.is_enabled(w[0]));
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert!(
        m.is_enabled(w[0]),
        "the second signal is the first waiter's"
    );
}

#[test]
fn a_waiter_that_came_after_a_signal_cannot_take_a_signal_its_elders_wait_for() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    let w = waiters_on(&mut m, &mut mem, C, 2);
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert_eq!(m.execute(w[0], &mut mem).unwrap(), Completion::Return(0));
    run(&mut m, &mut mem, w[0], Op::MutexUnlock { m: M1 });
    // A third waiter arrives (glibc's G2) while the second (G1) still waits.
    let late = waiters_on(&mut m, &mut mem, C, 1)[0];
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert!(m.is_enabled(w[1]), "the signal is G1's");
    assert!(!m.is_enabled(late), "G2 waits for G1 to be served");
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    assert!(m.is_enabled(late), "G2 became G1");
}

#[test]
fn as_many_signals_as_waiters_wake_them_all() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    let w = waiters_on(&mut m, &mut mem, C, 3);
    for _ in 0..3 {
        run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    }
    for &t in &w {
        assert!(m.is_enabled(t));
        assert_eq!(m.execute(t, &mut mem).unwrap(), Completion::Return(0));
        run(&mut m, &mut mem, t, Op::MutexUnlock { m: M1 });
    }
    run(&mut m, &mut mem, 0, Op::CondDestroy { c: C });
}

#[test]
fn lost_wakeup_is_a_global_deadlock() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    run(&mut m, &mut mem, 0, lock(M1));
    run(
        &mut m,
        &mut mem,
        0,
        Op::CondWait {
            c: C,
            m: M1,
            timeout: None,
        },
    );
    assert!(m.enabled_threads().is_empty());
    assert!(m.timeout_threads().is_empty());
    match m.global_deadlock() {
        ModelFinding::Deadlock {
            local: false,
            blocked,
        } => {
            assert_eq!(blocked[0].object.kind, ObjectKind::Cond);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn timed_condvar_wait_times_out_on_virtual_time() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    run(&mut m, &mut mem, 0, lock(M1));
    run(
        &mut m,
        &mut mem,
        0,
        Op::CondWait {
            c: C,
            m: M1,
            timeout: Some(5_000),
        },
    );
    assert!(!m.is_enabled(0));
    assert!(m.can_time_out(0));
    assert_eq!(m.choice_name(0), "cond_wait(timeout)");
    assert_eq!(
        m.execute(0, &mut mem).unwrap(),
        Completion::Error(errno::ETIMEDOUT)
    );
    assert_eq!(
        m.now(),
        5_000,
        "the timeout moved the clock to its deadline"
    );
}

#[test]
fn sleeps_are_timeout_choices_earliest_deadline_first() {
    let (mut m, _mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    m.set_pending(0, Op::Sleep { ns: 1_000_000 }, 0).unwrap();
    assert_eq!(m.enabled_threads(), vec![t1]);
    assert_eq!(m.timeout_threads(), vec![0]);
    m.set_pending(t1, Op::Sleep { ns: 10 }, 0).unwrap();
    assert!(m.enabled_threads().is_empty());
    assert_eq!(m.timeout_threads(), vec![t1, 0], "the shorter sleep first");
    assert!(m.blocked_threads().is_empty());
}

#[test]
fn a_timed_wait_may_time_out_while_others_run_until_it_is_woken() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    let t1 = m.add_thread();
    run(&mut m, &mut mem, t1, lock(M1));
    let wait = Op::CondWait {
        c: C,
        m: M1,
        timeout: Some(5_000_000),
    };
    assert_eq!(run(&mut m, &mut mem, t1, wait), Completion::Blocked);
    m.set_pending(0, lock(M1), 0).unwrap();
    assert!(m.is_enabled(0));
    assert_eq!(m.timeout_threads(), vec![t1], "a timeout is a choice");
    assert!(m
        .choice_footprint(t1)
        .conflicts(&Op::Sleep { ns: 1 }.footprint()));
    m.execute(0, &mut mem).unwrap();
    assert!(
        m.timeout_threads().is_empty(),
        "it cannot time out while the mutex it must retake is held"
    );
    run(&mut m, &mut mem, 0, Op::CondSignal { c: C });
    run(&mut m, &mut mem, 0, Op::MutexUnlock { m: M1 });
    assert!(m.is_enabled(t1));
    assert!(
        !m.can_time_out(t1),
        "woken: its step is the wake, not a timeout"
    );
    assert_eq!(m.choice_name(t1), "cond_wait(resume)");
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Return(0));
    assert_eq!(m.now(), 0);
}

#[test]
fn a_kernel_wait_runs_once_ready_and_times_out_only_with_a_timeout() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let read = Op::Kernel {
        call: "read",
        timeout: None,
    };
    m.set_pending(t1, read.clone(), 0).unwrap();
    assert!(!m.is_enabled(t1) && !m.can_time_out(t1));
    assert_eq!(m.blocked_threads(), vec![t1]);
    m.set_kernel_ready(t1, true);
    assert!(m.is_enabled(t1));
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Native);
    assert!(read.footprint().conflicts(&read.footprint()));
    let poll = Op::Kernel {
        call: "poll",
        timeout: Some(1_000),
    };
    m.set_pending(t1, poll, 0).unwrap();
    assert!(m.can_time_out(t1));
    assert_eq!(m.choice_name(t1), "poll(timeout)");
    assert_eq!(
        m.execute(t1, &mut mem).unwrap(),
        Completion::Error(errno::ETIMEDOUT)
    );
    assert_eq!(m.now(), 1_000);
}

#[test]
fn threads_blocked_in_the_kernel_deadlock_and_are_described() {
    let mut m = Model::new();
    let t1 = m.add_thread();
    for t in [0, t1] {
        m.set_pending(
            t,
            Op::Kernel {
                call: "read",
                timeout: None,
            },
            0,
        )
        .unwrap();
    }
    assert!(m.enabled_threads().is_empty() && m.timeout_threads().is_empty());
    match m.global_deadlock() {
        ModelFinding::Deadlock { blocked, .. } => {
            assert_eq!(blocked.len(), 2);
            assert_eq!(blocked[1].op, "read");
            assert_eq!(blocked[1].object.kind, ObjectKind::Kernel);
            assert_eq!(
                blocked[1].object.addr, t1 as u64,
                "names the waiting thread"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn semaphore_counts_and_blocks() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const S: Addr = 0x4000;
    run(&mut m, &mut mem, 0, Op::SemInit { s: S, value: 1 });
    run(
        &mut m,
        &mut mem,
        0,
        Op::SemWait {
            s: S,
            attempt: Attempt::Block,
        },
    );
    assert_eq!(
        run(
            &mut m,
            &mut mem,
            0,
            Op::SemWait {
                s: S,
                attempt: Attempt::Try
            }
        ),
        Completion::Error(errno::EAGAIN)
    );
    m.set_pending(
        0,
        Op::SemWait {
            s: S,
            attempt: Attempt::Block,
        },
        0,
    )
    .unwrap();
    assert!(!m.is_enabled(0));
}

#[test]
fn semaphore_without_init_is_misuse() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    m.set_pending(0, Op::SemPost { s: 0x4000 }, 0).unwrap();
    assert!(matches!(
        m.execute(0, &mut mem),
        Err(ModelFinding::Misuse { .. })
    ));
}

#[test]
fn barrier_releases_all_and_one_is_serial() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const B: Addr = 0x5000;
    let t1 = m.add_thread();
    run(&mut m, &mut mem, 0, Op::BarrierInit { b: B, count: 2 });
    assert_eq!(
        run(&mut m, &mut mem, t1, Op::BarrierWait { b: B }),
        Completion::Blocked
    );
    assert!(!m.is_enabled(t1));
    assert_eq!(
        run(&mut m, &mut mem, 0, Op::BarrierWait { b: B }),
        Completion::Return(-1)
    );
    assert!(m.is_enabled(t1));
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Return(0));
}

#[test]
fn futex_wait_checks_the_word_and_wake_releases() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    mem.0.insert(0x6000, 2);
    let wait = |expected| Op::FutexWait {
        addr: 0x6000,
        expected,
        bitset: u32::MAX,
        timeout: None,
    };
    assert_eq!(
        run(&mut m, &mut mem, t1, wait(1)),
        Completion::Error(errno::EAGAIN)
    );
    assert_eq!(run(&mut m, &mut mem, t1, wait(2)), Completion::Blocked);
    let wake = Op::FutexWake {
        addr: 0x6000,
        count: 1,
        bitset: u32::MAX,
    };
    assert_eq!(run(&mut m, &mut mem, 0, wake), Completion::Return(1));
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Return(0));
}

#[test]
fn join_waits_for_exit_and_double_join_is_misuse() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    let join = Op::Join {
        target: Some(t1),
        attempt: Attempt::Block,
    };
    m.set_pending(0, join.clone(), 0).unwrap();
    assert!(!m.is_enabled(0));
    m.thread_exited(t1);
    assert_eq!(m.execute(0, &mut mem).unwrap(), Completion::Native);
    m.set_pending(0, join, 0).unwrap();
    assert!(matches!(
        m.execute(0, &mut mem),
        Err(ModelFinding::Misuse { .. })
    ));
}

#[test]
fn join_cycle_is_a_local_deadlock() {
    let mut m = Model::new();
    let t1 = m.add_thread();
    let t2 = m.add_thread();
    let join = |u| Op::Join {
        target: Some(u),
        attempt: Attempt::Block,
    };
    m.set_pending(t1, join(t2), 0).unwrap();
    assert!(matches!(
        m.set_pending(t2, join(t1), 0),
        Err(ModelFinding::Deadlock { local: true, .. })
    ));
}

#[test]
fn rwlock_readers_share_writers_exclude() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const L: Addr = 0x7000;
    let t1 = m.add_thread();
    let t2 = m.add_thread();
    run(
        &mut m,
        &mut mem,
        0,
        Op::RwRead {
            l: L,
            attempt: Attempt::Block,
        },
    );
    run(
        &mut m,
        &mut mem,
        t1,
        Op::RwRead {
            l: L,
            attempt: Attempt::Block,
        },
    );
    m.set_pending(
        t2,
        Op::RwWrite {
            l: L,
            attempt: Attempt::Block,
        },
        0,
    )
    .unwrap();
    assert!(!m.is_enabled(t2));
    run(&mut m, &mut mem, 0, Op::RwUnlock { l: L });
    assert!(!m.is_enabled(t2));
    run(&mut m, &mut mem, t1, Op::RwUnlock { l: L });
    assert!(m.is_enabled(t2));
}

#[test]
fn condvar_destroy_with_waiter_is_misuse() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    const C: Addr = 0x3000;
    let t1 = m.add_thread();
    run(&mut m, &mut mem, t1, lock(M1));
    run(
        &mut m,
        &mut mem,
        t1,
        Op::CondWait {
            c: C,
            m: M1,
            timeout: None,
        },
    );
    m.set_pending(0, Op::CondDestroy { c: C }, 0).unwrap();
    assert!(matches!(
        m.execute(0, &mut mem),
        Err(ModelFinding::Misuse { .. })
    ));
}

#[test]
fn once_callers_wait_for_the_initialiser() {
    let (mut m, mut mem) = (Model::new(), FakeMemory::default());
    let t1 = m.add_thread();
    const O: Addr = 0x8000;
    assert_eq!(
        run(&mut m, &mut mem, 0, Op::Once { o: O }),
        Completion::Native
    );
    assert_eq!(m.once_initialiser(O), Some(0));
    m.set_pending(t1, Op::Once { o: O }, 0).unwrap();
    assert!(!m.is_enabled(t1), "the initialiser has not returned yet");
    m.once_done(O);
    assert!(m.is_enabled(t1));
    assert_eq!(m.execute(t1, &mut mem).unwrap(), Completion::Native);
    assert_eq!(m.once_initialiser(O), None);
}

#[test]
fn only_the_main_thread_before_any_creation_is_alone() {
    let mut m = Model::new();
    assert!(m.alone(0));
    let t1 = m.add_thread();
    assert!(!m.alone(0) && !m.alone(t1));
    m.thread_exited(t1);
    assert!(
        !m.alone(0),
        "a thread left alone after others exited still takes decisions"
    );
}
