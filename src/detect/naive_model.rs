// The race detector as it was before shadow memory: a hash map from every byte to its last
// write and its reads, updated byte by byte. Slow and simple, it is the reference that the
// shadow-memory detector is checked against (the differential test in `race.rs`) and
// measured against (`examples/detector_bench.rs`). Not part of the library: both include
// it with `include!` after importing `Access`, `Seen`, `Race`, `HeapBlock`, `SyncKey`,
// `VectorClock`, `Addr`, `ThreadId` and the std collections it uses.

#[derive(Debug, Clone, Default)]
struct NaiveShadow {
    write: Option<Seen>,
    reads: Vec<Seen>,
}

/// The per-byte reference detector, with the public API of `RaceDetector`.
#[derive(Clone, Debug, Default)]
pub struct NaiveDetector {
    threads: Vec<VectorClock>,
    finished: HashMap<ThreadId, VectorClock>,
    sync: HashMap<SyncKey, VectorClock>,
    shadow: HashMap<Addr, NaiveShadow>,
    heap: BTreeMap<Addr, HeapBlock>,
    races: Vec<Race>,
    reported: HashSet<(u64, u64)>,
    racy_addresses: HashSet<Addr>,
}

#[allow(dead_code)]
impl NaiveDetector {
    /// A detector for an execution whose main thread is thread 0.
    pub fn new() -> NaiveDetector {
        let mut d = NaiveDetector::default();
        d.clock_mut(0).tick(0);
        d
    }

    /// A copy without the per-address access history.
    pub fn without_access_history(&self) -> NaiveDetector {
        NaiveDetector {
            shadow: HashMap::new(),
            ..self.clone()
        }
    }

    fn clock_mut(&mut self, t: ThreadId) -> &mut VectorClock {
        if self.threads.len() <= t {
            self.threads.resize_with(t + 1, VectorClock::new);
        }
        &mut self.threads[t]
    }

    fn clock(&self, t: ThreadId) -> VectorClock {
        self.threads.get(t).cloned().unwrap_or_default()
    }

    /// `parent` created `child`.
    pub fn thread_created(&mut self, parent: ThreadId, child: ThreadId) {
        let mut c = self.clock(parent);
        c.tick(child);
        *self.clock_mut(child) = c;
        self.clock_mut(parent).tick(parent);
    }

    /// `t` exited.
    pub fn thread_exited(&mut self, t: ThreadId) {
        let c = self.clock(t);
        self.finished.insert(t, c);
    }

    /// `joiner` joined `target`.
    pub fn thread_joined(&mut self, joiner: ThreadId, target: ThreadId) {
        if let Some(c) = self.finished.get(&target).cloned() {
            self.clock_mut(joiner).join(&c);
        }
    }

    /// `t` acquires `key`.
    pub fn acquire(&mut self, t: ThreadId, key: SyncKey) {
        self.clock_mut(t);
        if let Some(c) = self.sync.get(&key) {
            self.threads[t].join(c);
        }
    }

    /// `t` releases `key`.
    pub fn release(&mut self, t: ThreadId, key: SyncKey) {
        self.clock_mut(t);
        self.sync.entry(key).or_default().join(&self.threads[t]);
        self.threads[t].tick(t);
    }

    /// Records a memory access, byte by byte.
    pub fn access(&mut self, a: Access) -> Option<Race> {
        self.clock_mut(a.thread);
        let now = &self.threads[a.thread];
        let me = Seen {
            epoch: now.epoch(a.thread),
            pc: a.pc,
            write: a.write,
            atomic: a.atomic,
            size: a.size,
        };
        let mut found: Option<Race> = None;
        for addr in a.addr..a.addr.saturating_add(a.size.max(1)) {
            let sh = self.shadow.entry(addr).or_default();
            let conflicts = |other: &Seen| {
                other.epoch.thread != a.thread
                    && !(other.atomic && a.atomic)
                    && (other.write || a.write)
                    && !other.epoch.le(now)
            };
            if found.is_none() {
                let earlier = sh.write.filter(|w| conflicts(w)).or_else(|| {
                    a.write
                        .then(|| sh.reads.iter().find(|r| conflicts(r)).copied())
                        .flatten()
                });
                if let Some(earlier) = earlier {
                    found = Some(Race {
                        addr,
                        earlier,
                        later: me,
                    });
                }
            }
            if a.write {
                sh.write = Some(me);
                sh.reads.clear();
            } else {
                sh.reads
                    .retain(|r| r.epoch.thread != a.thread && !r.epoch.le(now));
                sh.reads.push(me);
            }
        }
        let race = found?;
        self.racy_addresses.insert(race.addr);
        let key = (
            race.earlier.pc.min(race.later.pc),
            race.earlier.pc.max(race.later.pc),
        );
        if self.reported.insert(key) {
            self.races.push(race.clone());
            Some(race)
        } else {
            None
        }
    }

    /// A heap block was allocated.
    pub fn allocated(&mut self, block: HeapBlock) {
        self.forget(block.start, block.size);
        self.heap.insert(block.start, block);
    }

    /// The heap block at `start` was freed.
    pub fn freed(&mut self, start: Addr, size_hint: u64) -> Option<HeapBlock> {
        match self.heap.remove(&start) {
            Some(block) => {
                self.forget(block.start, block.size);
                Some(block)
            }
            None => {
                self.forget(start, size_hint);
                None
            }
        }
    }

    fn forget(&mut self, start: Addr, size: u64) {
        let end = start.saturating_add(size);
        if size as usize > self.shadow.len() {
            self.shadow.retain(|&a, _| a < start || a >= end);
        } else {
            for a in start..end {
                self.shadow.remove(&a);
            }
        }
    }

    /// The live heap block containing `addr`.
    pub fn block_containing(&self, addr: Addr) -> Option<HeapBlock> {
        self.heap
            .range(..=addr)
            .next_back()
            .map(|(_, b)| *b)
            .filter(|b| addr < b.start + b.size.max(1))
    }

    /// The races found so far.
    pub fn races(&self) -> &[Race] {
        &self.races
    }

    /// Addresses found racy.
    pub fn racy_addresses(&self) -> &HashSet<Addr> {
        &self.racy_addresses
    }
}
