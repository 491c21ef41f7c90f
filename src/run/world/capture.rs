//! The program's stdout and stderr, read through a pipe (or a terminal or socket of
//! mcheck's making, when that is what the program must see): passed on to mcheck's own for
//! the executions whose output is shown, and the tail kept, to quote an assertion or panic
//! message, with a summary of the whole (digest, length, first bytes) that the output
//! oracle compares between executions.
//!
//! One stream serves all the executions of a worker, because fork snapshots keep its write
//! end open in the template process: the end of an execution is marked by a marker the
//! tracer writes into the stream itself once the execution's processes are gone, so
//! everything before the marker is that execution's output.
//!
//! An execution restored from a fork snapshot does not write again what the program wrote
//! before the snapshot: when a snapshot is taken the tracer marks the stream there and keeps
//! what the execution had written so far (an [`OutputPrefix`]), and an execution restored
//! from it starts its output from that prefix. Replies from the reader carry sequence
//! numbers, so a reply that came too late is never taken for the next one's.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use std::cell::Cell;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{unbounded, Receiver};

use super::program_stdio::StreamKind;
use crate::detect::output_diff::{OutputSummary, HEAD};

const KEEP: usize = 64 * 1024;

/// Written by the tracer between two executions' output (never printed).
const MARKER: &[u8] = b"\0\x01mcheck-end-of-execution\x01\0";

/// Written by the tracer before an execution whose output is not to be shown (a run again
/// of a schedule, to learn something), and before one whose output is.
const QUIET: &[u8] = b"\0\x01mcheck-quiet\x01\0";
const SHOWN: &[u8] = b"\0\x01mcheck-shown\x01\0";

/// Written by the tracer where a fork snapshot is taken: the reader replies with the
/// execution's output so far.
const CHECKPOINT: &[u8] = b"\0\x01mcheck-snapshot\x01\0";

/// Every marker, for the splitter.
const MARKERS: [&[u8]; 4] = [MARKER, QUIET, SHOWN, CHECKPOINT];

/// How long the tracer waits for the reader to reach a marker it wrote.
const REPLY_WAIT: Duration = Duration::from_secs(2);

/// Where a capture passes the shown executions' output on to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// mcheck's stdout.
    Stdout,
    /// mcheck's stderr.
    Stderr,
    /// Nowhere: only kept (`--quiet-program`).
    Nowhere,
}

impl Echo {
    fn write(self, bytes: &[u8]) {
        let _ = match self {
            Echo::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
            Echo::Stderr => std::io::stderr().write_all(bytes),
            Echo::Nowhere => Ok(()),
        };
    }
}

/// What an execution had written to a stream when a fork snapshot was taken: an execution
/// restored from the snapshot starts its output from it.
#[derive(Clone, Debug)]
pub struct OutputPrefix {
    hasher: std::hash::DefaultHasher,
    len: u64,
    head: Vec<u8>,
    /// The last bytes (at most [`KEEP`]).
    tail: Vec<u8>,
}

impl OutputPrefix {
    /// Whether every byte of the prefix is kept (so it can be shown again).
    fn whole(&self) -> bool {
        self.tail.len() as u64 == self.len
    }
}

/// Where an execution's output starts.
#[derive(Clone, Debug, Default)]
pub enum OutputStart {
    /// From nothing: the program is started afresh.
    #[default]
    Empty,
    /// After what the execution it was forked from had written.
    After(OutputPrefix),
    /// After output that could not be told (the reader did not reach the snapshot's mark
    /// in time): the execution's output is not summarized.
    Unknown,
}

/// Where the output of the executions restored from a fork snapshot starts, per captured
/// stream.
#[derive(Clone, Debug, Default)]
pub struct OutputStarts {
    /// On stderr.
    pub stderr: OutputStart,
    /// On stdout.
    pub stdout: OutputStart,
}

impl OutputStarts {
    /// Marks both streams where a snapshot is taken (see [`OutputCapture::snapshot_mark`]).
    pub fn mark(stderr: Option<&OutputCapture>, stdout: Option<&OutputCapture>) -> OutputStarts {
        let mark =
            |c: Option<&OutputCapture>| c.map_or(OutputStart::Unknown, |c| c.snapshot_mark());
        OutputStarts {
            stderr: mark(stderr),
            stdout: mark(stdout),
        }
    }
}

/// What one execution wrote to a captured stream.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// The last bytes (at least 64 KiB of them, when there were that many), as text.
    pub tail: String,
    /// The whole, summarized.
    pub summary: OutputSummary,
}

/// A worker's capture of one of its executions' standard streams.
pub struct OutputCapture {
    write_end: OwnedFd,
    /// Each execution's segment (None when its start was unknown), by sequence number.
    segments: Receiver<(u64, Option<Segment>)>,
    /// The output so far at each snapshot mark, by sequence number.
    prefixes: Receiver<(u64, OutputPrefix)>,
    /// Where each execution starts, read by the reader at its begin marker.
    starts: StartQueue,
    /// Execution begins, ends and snapshot marks written so far.
    begins_written: Cell<u64>,
    ends_written: Cell<u64>,
    marks_written: Cell<u64>,
    /// A terminal's master end while the reader holds its own copy: kept so that the
    /// terminal stays as long as the capture.
    _master: Option<OwnedFd>,
}

impl OutputCapture {
    /// Creates the stream, of `kind` (a pipe, a terminal like mcheck's own stdout, or a
    /// socket; anything else is made a pipe), and the thread that reads it.
    pub fn start(kind: StreamKind, echo: Echo) -> std::io::Result<OutputCapture> {
        // Close-on-exec: with several workers, another worker's tracee must not inherit
        // this stream. dup2 onto the child's standard descriptor clears the flag there.
        let (read_end, write_end, master): (OwnedFd, OwnedFd, _) = match kind {
            StreamKind::Terminal => {
                let (master, slave) = crate::tracee::terminal::open_like(std::io::stdout())?;
                (master.try_clone()?, slave, Some(master))
            }
            StreamKind::Socket => {
                let (a, b) = std::os::unix::net::UnixStream::pair()?;
                (a.into(), b.into(), None)
            }
            _ => {
                let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                (r, w, None)
            }
        };
        let (tx, rx) = unbounded();
        let (prefix_tx, prefix_rx) = unbounded();
        let starts = StartQueue::default();
        let reader_starts = starts.clone();
        let name = match echo {
            Echo::Stdout => "mcheck-stdout",
            _ => "mcheck-stderr",
        };
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut file = std::fs::File::from(read_end);
                let mut split = MarkerSplitter::default();
                let mut buf = [0u8; 8192];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => split.feed(
                            &buf[..n],
                            &mut |seq| reader_starts.take(seq),
                            &mut |event| match event {
                                Event::Output(bytes) => echo.write(bytes),
                                Event::Segment(seq, segment) => {
                                    let _ = tx.send((seq, segment));
                                }
                                Event::Prefix(seq, prefix) => {
                                    let _ = prefix_tx.send((seq, prefix));
                                }
                            },
                        ),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        // A terminal's master reads EIO once no slave is open.
                        Err(_) => break,
                    }
                }
            })?;
        Ok(OutputCapture {
            write_end,
            segments: rx,
            prefixes: prefix_rx,
            starts,
            begins_written: Cell::new(0),
            ends_written: Cell::new(0),
            marks_written: Cell::new(0),
            _master: master,
        })
    }

    /// A descriptor for a new process's standard stream.
    pub fn writer(&self) -> std::io::Result<OwnedFd> {
        self.write_end.as_fd().try_clone_to_owned()
    }

    /// Starts an execution's output, shown or not, from `start`. Call before the execution
    /// runs.
    pub fn begin_execution(&self, shown: bool, start: OutputStart) {
        let marker = if shown { SHOWN } else { QUIET };
        let seq = self.begins_written.get();
        // Queued before the marker is written, so the reader finds it there; withdrawn if
        // the marker is not written, so that the next begin's marker never takes it.
        self.starts.push(seq, start);
        // Below PIPE_BUF: written whole. A failed write only leaves the output shown.
        if nix::unistd::write(&self.write_end, marker) == Ok(marker.len()) {
            self.begins_written.set(seq + 1);
        } else {
            self.starts.withdraw(seq);
        }
    }

    /// Ends the current execution's output (call once its processes are gone) and returns
    /// what it was, once everything before it has been passed on: None when it could not
    /// be told (the marker could not be written or was not read back in time, or the
    /// execution started after output that could not be told).
    pub fn finish_execution(&self) -> Option<Segment> {
        let seq = self.ends_written.get();
        // The marker is far below PIPE_BUF, so it is written whole, in one call.
        if nix::unistd::write(&self.write_end, MARKER) != Ok(MARKER.len()) {
            return None;
        }
        self.ends_written.set(seq + 1);
        reply(&self.segments, seq).flatten()
    }

    /// Marks the stream where a fork snapshot is taken (the program's threads stopped) and
    /// returns what the execution has written so far: the start of the executions restored
    /// from the snapshot.
    pub fn snapshot_mark(&self) -> OutputStart {
        let seq = self.marks_written.get();
        if nix::unistd::write(&self.write_end, CHECKPOINT) != Ok(CHECKPOINT.len()) {
            return OutputStart::Unknown;
        }
        self.marks_written.set(seq + 1);
        reply(&self.prefixes, seq).map_or(OutputStart::Unknown, OutputStart::After)
    }
}

/// The reader's reply numbered `seq`, skipping replies to earlier requests that came too
/// late; None when it does not come in time.
fn reply<T>(replies: &Receiver<(u64, T)>, seq: u64) -> Option<T> {
    let deadline = std::time::Instant::now() + REPLY_WAIT;
    loop {
        let (n, value) = replies.recv_deadline(deadline).ok()?;
        if n == seq {
            return Some(value);
        }
    }
}

/// Where each execution begun starts, queued by the tracer with the number of its begin
/// marker and taken by the reader when it reads that marker.
#[derive(Clone, Default)]
struct StartQueue(Arc<Mutex<VecDeque<(u64, OutputStart)>>>);

impl StartQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, OutputStart)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the start of the execution whose begin marker is number `seq`.
    fn push(&self, seq: u64, start: OutputStart) {
        self.lock().push_back((seq, start));
    }

    /// Takes back the start numbered `seq` (its marker could not be written).
    fn withdraw(&self, seq: u64) {
        self.lock().retain(|(n, _)| *n != seq);
    }

    /// The start for begin marker number `seq`; Unknown when none was queued for it.
    /// Starts queued for earlier markers are dropped.
    fn take(&self, seq: u64) -> OutputStart {
        let mut q = self.lock();
        while q.front().is_some_and(|(n, _)| *n < seq) {
            q.pop_front();
        }
        match q.front() {
            Some((n, _)) if *n == seq => q.pop_front().map_or(OutputStart::Unknown, |x| x.1),
            _ => OutputStart::Unknown,
        }
    }
}

/// What the splitter tells its owner.
enum Event<'a> {
    /// Program bytes, to pass on (a shown execution's).
    Output(&'a [u8]),
    /// An execution's end: its sequence number and segment (None when its start was
    /// unknown).
    Segment(u64, Option<Segment>),
    /// A snapshot mark: its sequence number and the output so far.
    Prefix(u64, OutputPrefix),
}

/// Splits a byte stream at [`MARKER`]s, keeping the tail and a summary of each segment,
/// and follows the [`QUIET`] and [`SHOWN`] markers.
#[derive(Default)]
struct MarkerSplitter {
    /// Bytes that may be the start of a marker cut by a read boundary.
    carry: Vec<u8>,
    /// The current segment's tail.
    tail: Vec<u8>,
    /// The current segment's first bytes.
    head: Vec<u8>,
    /// The current segment's length.
    len: u64,
    /// The digest of the current segment so far.
    hasher: std::hash::DefaultHasher,
    /// The current execution's output is not passed on.
    quiet: bool,
    /// The current execution's start could not be told: its segment is not summarized.
    unknown_start: bool,
    /// Execution begins and ends and snapshot marks read so far.
    begins: u64,
    ends: u64,
    marks: u64,
}

/// The first marker in `bytes`: where, and which.
fn first_marker(bytes: &[u8]) -> Option<(usize, &'static [u8])> {
    MARKERS
        .into_iter()
        .filter_map(|m| find(bytes, m).map(|i| (i, m)))
        .min_by_key(|&(i, _)| i)
}

impl MarkerSplitter {
    /// Feeds bytes, telling `events` what they hold; `starts` says where each execution
    /// begun in them starts, given the number of its begin marker.
    fn feed(
        &mut self,
        data: &[u8],
        starts: &mut dyn FnMut(u64) -> OutputStart,
        events: &mut dyn FnMut(Event),
    ) {
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(data);
        let mut rest = &bytes[..];
        while let Some((i, marker)) = first_marker(rest) {
            self.keep(&rest[..i], events);
            if marker == MARKER {
                let segment = self.take_segment();
                let known = !std::mem::take(&mut self.unknown_start);
                events(Event::Segment(self.ends, known.then_some(segment)));
                self.ends += 1;
            } else if marker == CHECKPOINT {
                events(Event::Prefix(self.marks, self.prefix()));
                self.marks += 1;
            } else {
                self.quiet = marker == QUIET;
                let start = starts(self.begins);
                self.begins += 1;
                self.start_from(start, events);
            }
            rest = &rest[i + marker.len()..];
        }
        // A suffix that could begin a marker waits for the next read.
        let hold = MARKERS
            .into_iter()
            .filter_map(|m| {
                (1..m.len().min(rest.len() + 1))
                    .rev()
                    .find(|&k| rest.ends_with(&m[..k]))
            })
            .max()
            .unwrap_or(0);
        let (now, later) = rest.split_at(rest.len() - hold);
        self.keep(now, events);
        self.carry = later.to_vec();
    }

    /// The current segment so far.
    fn prefix(&self) -> OutputPrefix {
        let from = self.tail.len().saturating_sub(KEEP);
        OutputPrefix {
            hasher: self.hasher.clone(),
            len: self.len,
            head: self.head.clone(),
            tail: self.tail[from..].to_vec(),
        }
    }

    /// Begins a segment (the previous one was taken) where `start` says. A shown
    /// execution's prefix is passed on again when it is kept whole.
    fn start_from(&mut self, start: OutputStart, events: &mut dyn FnMut(Event)) {
        match start {
            OutputStart::Empty => {}
            OutputStart::Unknown => self.unknown_start = true,
            OutputStart::After(prefix) => {
                if !self.quiet && prefix.whole() {
                    events(Event::Output(&prefix.tail));
                }
                self.hasher = prefix.hasher;
                self.len = prefix.len;
                self.head = prefix.head;
                self.tail = prefix.tail;
            }
        }
    }

    /// Ends the current segment: what it was, and a fresh start for the next.
    fn take_segment(&mut self) -> Segment {
        use std::hash::Hasher;
        let tail = std::mem::take(&mut self.tail);
        let summary = OutputSummary {
            digest: std::mem::take(&mut self.hasher).finish(),
            len: std::mem::take(&mut self.len),
            head: std::mem::take(&mut self.head),
        };
        Segment {
            tail: String::from_utf8_lossy(&tail).into_owned(),
            summary,
        }
    }

    fn keep(&mut self, bytes: &[u8], events: &mut dyn FnMut(Event)) {
        use std::hash::Hasher;
        if bytes.is_empty() {
            return;
        }
        if !self.quiet {
            events(Event::Output(bytes));
        }
        self.hasher.write(bytes);
        self.len += bytes.len() as u64;
        if self.head.len() < HEAD {
            let room = HEAD - self.head.len();
            self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * KEEP {
            self.tail.drain(..self.tail.len() - KEEP);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The last `n` non-empty lines of captured stderr, trimmed, oldest first.
pub fn last_lines(stderr: &str, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = (stderr.lines().rev())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(n)
        .map(str::to_string)
        .collect();
    lines.reverse();
    lines
}

/// The line of captured stderr that explains an abort or panic, if any.
pub fn failure_message(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    // The first panic is the cause; later ones (an unwrap of a join) are consequences.
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        let mut msg = lines[i].trim().to_string();
        if let Some(next) = lines.get(i + 1).filter(|l| !l.trim().is_empty()) {
            if !next.starts_with("note:") {
                msg.push(' ');
                msg.push_str(next.trim());
            }
        }
        return Some(msg);
    }
    lines
        .iter()
        .rev()
        .find(|l| l.contains("Assertion") || l.contains("assertion") || l.contains("abort"))
        .or(lines.iter().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_skip_blank_ones() {
        let tb = "Traceback (most recent call last):\n  File \"lf.py\", line 30\n\nAssertionError: lost updates\n\n";
        assert_eq!(
            last_lines(tb, 2),
            vec!["File \"lf.py\", line 30", "AssertionError: lost updates"]
        );
        assert!(last_lines("\n \n", 3).is_empty());
    }

    /// What a splitter told of a stream.
    #[derive(Default)]
    struct Told {
        printed: Vec<u8>,
        segments: Vec<Option<Segment>>,
        prefixes: Vec<OutputPrefix>,
    }

    /// Feeds `stream` to `split` in reads of `chunk` bytes; every execution begun starts
    /// as `start` says.
    fn feed(split: &mut MarkerSplitter, stream: &[u8], chunk: usize, start: OutputStart) -> Told {
        let mut told = Told::default();
        for piece in stream.chunks(chunk) {
            split.feed(piece, &mut |_| start.clone(), &mut |event| match event {
                Event::Output(b) => told.printed.extend_from_slice(b),
                Event::Segment(_, s) => told.segments.push(s),
                Event::Prefix(_, p) => told.prefixes.push(p),
            });
        }
        told
    }

    fn stream(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn output_is_split_at_markers_even_across_reads() {
        let mut split = MarkerSplitter::default();
        let s = stream(&[b"first run\n", MARKER, b"second", MARKER]);
        let told = feed(&mut split, &s, 5, OutputStart::Empty);
        let segments: Vec<Segment> = told.segments.into_iter().flatten().collect();
        let heads: Vec<_> = segments.iter().map(|s| s.summary.head.clone()).collect();
        assert_eq!(heads, vec![b"first run\n".to_vec(), b"second".to_vec()]);
        assert_eq!(segments[1].tail, "second");
        assert_eq!(segments[1].summary.len, 6);
        assert_eq!(told.printed, b"first run\nsecond");
    }

    #[test]
    fn a_quiet_execution_is_kept_but_not_printed() {
        let mut split = MarkerSplitter::default();
        let s = stream(&[
            b"shown\n", MARKER, QUIET, b"again\n", MARKER, SHOWN, b"next\n", MARKER,
        ]);
        let told = feed(&mut split, &s, 3, OutputStart::Empty);
        let tails: Vec<_> = told
            .segments
            .iter()
            .flatten()
            .map(|s| s.tail.as_str())
            .collect();
        assert_eq!(tails, vec!["shown\n", "again\n", "next\n"]);
        assert_eq!(told.printed, b"shown\nnext\n");
    }

    #[test]
    fn the_digest_does_not_depend_on_how_reads_cut_the_output() {
        let s = stream(&[b"one line\nanother line\n", MARKER]);
        let digests: Vec<u64> = [1, 4, 1000]
            .into_iter()
            .flat_map(|size| {
                let told = feed(&mut MarkerSplitter::default(), &s, size, OutputStart::Empty);
                told.segments
                    .into_iter()
                    .flatten()
                    .map(|s| s.summary.digest)
            })
            .collect();
        assert_eq!(digests.len(), 3);
        assert!(digests.iter().all(|&d| d == digests[0]));
    }

    #[test]
    fn an_execution_restored_from_a_snapshot_starts_from_its_output_so_far() {
        // A fresh execution writes "BZh9", is snapshotted, writes the rest; a copy of the
        // snapshot writes only the rest: both outputs are the same.
        let mut split = MarkerSplitter::default();
        let first = stream(&[SHOWN, b"BZh9", CHECKPOINT, b"-the rest", MARKER]);
        let told = feed(&mut split, &first, 3, OutputStart::Empty);
        let [prefix] = &told.prefixes[..] else {
            panic!("one prefix")
        };
        assert_eq!((prefix.len, prefix.whole()), (4, true));
        let again = stream(&[SHOWN, b"-the rest", MARKER]);
        let copy = feed(&mut split, &again, 2, OutputStart::After(prefix.clone()));
        let (a, b) = (told.segments[0].as_ref(), copy.segments[0].as_ref());
        assert_eq!(a, b);
        assert_eq!(a.unwrap().summary.head, b"BZh9-the rest");
        // Shown again whole, as if the copy had written it.
        assert_eq!(copy.printed, b"BZh9-the rest");
    }

    #[test]
    fn an_execution_whose_start_is_unknown_has_no_segment() {
        let mut split = MarkerSplitter::default();
        let s = stream(&[QUIET, b"rest", MARKER]);
        let told = feed(&mut split, &s, 4, OutputStart::Unknown);
        assert_eq!(told.segments.len(), 1);
        assert!(told.segments[0].is_none());
        // The next one is told again.
        let told = feed(
            &mut split,
            &stream(&[QUIET, b"x", MARKER]),
            4,
            OutputStart::Empty,
        );
        assert_eq!(told.segments[0].as_ref().unwrap().tail, "x");
    }

    #[test]
    fn a_reply_that_came_too_late_is_not_taken_for_the_next() {
        let (tx, rx) = unbounded();
        tx.send((0, "late")).unwrap();
        tx.send((1, "this one")).unwrap();
        assert_eq!(reply(&rx, 1), Some("this one"));
    }

    #[test]
    fn finds_c_assert_and_rust_panic_messages() {
        let c = "hello\nprog: x.c:12: main: Assertion `x == 1' failed.\n";
        assert_eq!(
            failure_message(c).unwrap(),
            "prog: x.c:12: main: Assertion `x == 1' failed."
        );
        let rust = "thread 'main' panicked at src/main.rs:5:5:\nassertion failed: x == 1\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            failure_message(rust).unwrap(),
            "thread 'main' panicked at src/main.rs:5:5: assertion failed: x == 1"
        );
    }

    #[test]
    fn a_start_whose_marker_was_not_written_is_never_taken() {
        let q = StartQueue::default();
        let empty = || OutputStart::Empty;
        q.push(0, empty());
        assert!(matches!(q.take(0), OutputStart::Empty));
        // Begin 1's marker could not be written: its start is withdrawn, and the next
        // begin, written as marker 1, gets its own start.
        q.push(1, OutputStart::Unknown);
        q.withdraw(1);
        q.push(1, empty());
        assert!(matches!(q.take(1), OutputStart::Empty));
        // A marker read with no start queued for it is unknown, and a start queued for an
        // earlier marker is dropped rather than given to a later one.
        q.push(2, empty());
        assert!(matches!(q.take(3), OutputStart::Unknown));
        assert!(matches!(q.take(2), OutputStart::Unknown));
    }
}
