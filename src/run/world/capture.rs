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

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver};

use super::program_stdio::StreamKind;
use crate::detect::output_diff::{OutputSummary, HEAD};

const KEEP: usize = 64 * 1024;

/// Written by the tracer between two executions' output (never printed).
const MARKER: &[u8] = b"\0\x01mcheck-end-of-execution\x01\0";

/// Written by the tracer before an execution whose output is not to be shown (a run again
/// of a schedule, to learn something), and before one whose output is.
const QUIET: &[u8] = b"\0\x01mcheck-quiet\x01\0";
const SHOWN: &[u8] = b"\0\x01mcheck-shown\x01\0";

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
    segments: Receiver<Segment>,
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
        let (tx, rx) = bounded(4);
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
                            |bytes| echo.write(bytes),
                            |segment| {
                                let _ = tx.send(segment);
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
            _master: master,
        })
    }

    /// A descriptor for a new process's standard stream.
    pub fn writer(&self) -> std::io::Result<OwnedFd> {
        self.write_end.as_fd().try_clone_to_owned()
    }

    /// Starts an execution's output: shown or not. Call before the execution runs.
    pub fn begin_execution(&self, shown: bool) {
        let marker = if shown { SHOWN } else { QUIET };
        // Below PIPE_BUF: written whole. A failed write only leaves the output shown.
        let _ = nix::unistd::write(&self.write_end, marker);
    }

    /// Ends the current execution's output (call once its processes are gone) and returns
    /// what it was, once everything before it has been passed on: None when it could not
    /// be told (the marker could not be written or was not read back in time).
    pub fn finish_execution(&self) -> Option<Segment> {
        // The marker is far below PIPE_BUF, so it is written whole, in one call.
        if nix::unistd::write(&self.write_end, MARKER) != Ok(MARKER.len()) {
            return None;
        }
        self.segments.recv_timeout(Duration::from_secs(2)).ok()
    }
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
}

/// The first marker in `bytes`: where, and which.
fn first_marker(bytes: &[u8]) -> Option<(usize, &'static [u8])> {
    [MARKER, QUIET, SHOWN]
        .into_iter()
        .filter_map(|m| find(bytes, m).map(|i| (i, m)))
        .min_by_key(|&(i, _)| i)
}

impl MarkerSplitter {
    /// Feeds bytes: `output` gets the program's bytes, `segment` each finished segment.
    fn feed(
        &mut self,
        data: &[u8],
        mut output: impl FnMut(&[u8]),
        mut segment: impl FnMut(Segment),
    ) {
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(data);
        let mut rest = &bytes[..];
        while let Some((i, marker)) = first_marker(rest) {
            self.keep(&rest[..i], &mut output);
            if marker == MARKER {
                segment(self.take_segment());
            } else {
                self.quiet = marker == QUIET;
            }
            rest = &rest[i + marker.len()..];
        }
        // A suffix that could begin a marker waits for the next read.
        let hold = [MARKER, QUIET, SHOWN]
            .into_iter()
            .filter_map(|m| {
                (1..m.len().min(rest.len() + 1))
                    .rev()
                    .find(|&k| rest.ends_with(&m[..k]))
            })
            .max()
            .unwrap_or(0);
        let (now, later) = rest.split_at(rest.len() - hold);
        self.keep(now, &mut output);
        self.carry = later.to_vec();
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

    fn keep(&mut self, bytes: &[u8], output: &mut impl FnMut(&[u8])) {
        use std::hash::Hasher;
        if bytes.is_empty() {
            return;
        }
        if !self.quiet {
            output(bytes);
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
    fn output_is_split_at_markers_even_across_reads() {
        let mut split = MarkerSplitter::default();
        let mut printed = Vec::new();
        let mut segments = Vec::new();
        let mut stream = b"first run\n".to_vec();
        stream.extend_from_slice(MARKER);
        stream.extend_from_slice(b"second");
        stream.extend_from_slice(MARKER);
        for chunk in stream.chunks(5) {
            split.feed(
                chunk,
                |b| printed.extend_from_slice(b),
                |s| segments.push(s),
            );
        }
        let heads: Vec<_> = segments.iter().map(|s| s.summary.head.clone()).collect();
        assert_eq!(heads, vec![b"first run\n".to_vec(), b"second".to_vec()]);
        assert_eq!(segments[1].tail, "second");
        assert_eq!(segments[1].summary.len, 6);
        assert_eq!(printed, b"first run\nsecond");
    }

    #[test]
    fn a_quiet_execution_is_kept_but_not_printed() {
        let mut split = MarkerSplitter::default();
        let mut printed = Vec::new();
        let mut segments = Vec::new();
        let mut stream = b"shown\n".to_vec();
        for (marker, text) in [(QUIET, &b"again\n"[..]), (SHOWN, b"next\n")] {
            stream.extend_from_slice(MARKER);
            stream.extend_from_slice(marker);
            stream.extend_from_slice(text);
        }
        stream.extend_from_slice(MARKER);
        for chunk in stream.chunks(3) {
            split.feed(
                chunk,
                |b| printed.extend_from_slice(b),
                |s| segments.push(s),
            );
        }
        let tails: Vec<_> = segments.iter().map(|s| s.tail.as_str()).collect();
        assert_eq!(tails, vec!["shown\n", "again\n", "next\n"]);
        assert_eq!(printed, b"shown\nnext\n");
    }

    #[test]
    fn the_digest_does_not_depend_on_how_reads_cut_the_output() {
        let mut stream = b"one line\nanother line\n".to_vec();
        stream.extend_from_slice(MARKER);
        let mut digests = Vec::new();
        for size in [1, 4, 1000] {
            let mut split = MarkerSplitter::default();
            for chunk in stream.chunks(size) {
                split.feed(chunk, |_| {}, |s| digests.push(s.summary.digest));
            }
        }
        assert_eq!(digests.len(), 3);
        assert!(digests.iter().all(|&d| d == digests[0]));
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
}
