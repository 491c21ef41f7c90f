//! What the program's stdin and stdout are, and giving it the same kinds again.
//!
//! Programs behave differently on a terminal, a pipe, a regular file and /dev/null: CPython
//! asks whether each standard stream is a terminal and seekable at startup and takes other
//! paths (other allocations, other lock traffic) for each answer, so a schedule found with
//! stdout on /dev/null (`--quiet-program`) diverged when replayed with stdout on a pipe.
//! The search records the kinds in the schedule ([`StdioKinds`]); replays and the quiet runs
//! again of a schedule give the program a stream of the recorded kind ([`OutputSinks`]):
//! mcheck's own when it is of that kind and the output is to be shown, else /dev/null, a
//! pipe or a pseudo-terminal whose output mcheck passes on (or drops), or an unnamed
//! temporary file whose contents are shown once the execution ended.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};

use anyhow::{Context, Result};
use nix::fcntl::OFlag;
use nix::sys::stat::{fstat, Mode, SFlag};

pub use crate::report::schedule::{StdioKinds, StreamKind};

/// /dev/null's device number (major 1, minor 3).
const DEV_NULL: u64 = (1 << 8) | 3;

/// The kind of file `fd` is.
pub fn kind_of(fd: impl AsFd) -> StreamKind {
    let Ok(st) = fstat(&fd) else {
        return StreamKind::Closed;
    };
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFCHR if st.st_rdev == DEV_NULL => StreamKind::Null,
        SFlag::S_IFCHR if nix::unistd::isatty(&fd).unwrap_or(false) => StreamKind::Terminal,
        SFlag::S_IFIFO => StreamKind::Pipe,
        SFlag::S_IFREG => StreamKind::File,
        SFlag::S_IFSOCK => StreamKind::Socket,
        _ => StreamKind::Other,
    }
}

/// The kind of mcheck's own stdout.
fn own_stdout() -> StreamKind {
    kind_of(std::io::stdout())
}

/// The kinds the program gets in a search: mcheck's own stdin, and its stdout unless
/// `--quiet-program` hides it: then /dev/null, or a pipe whose output mcheck reads and
/// drops when it compares the executions' outputs (`compare_output`, the output oracle).
pub fn search_kinds(quiet_program: bool, compare_output: bool) -> StdioKinds {
    StdioKinds {
        stdin: kind_of(std::io::stdin()),
        stdout: match (quiet_program, compare_output) {
            (true, true) => StreamKind::Pipe,
            (true, false) => StreamKind::Null,
            (false, _) => own_stdout(),
        },
    }
}

/// Why a stdout of kind `kind` cannot be read in every execution (the output oracle reads
/// it through a pipe, terminal or socket of mcheck's making), None when it can.
pub fn unreadable_stdout(kind: StreamKind) -> Option<String> {
    match kind {
        StreamKind::Pipe | StreamKind::Terminal | StreamKind::Socket => None,
        StreamKind::File => Some(
            "the program's stdout is a regular file, which every execution writes in place".into(),
        ),
        other => Some(format!("the program's stdout is {}", other.describe())),
    }
}

/// The stdin to give the program: /dev/null when it had that and mcheck's own is not,
/// else None (mcheck's own; a replay says when its kind differs).
pub fn stdin(recorded: Option<StdioKinds>) -> Result<Option<OwnedFd>> {
    match recorded {
        Some(k) if k.stdin == StreamKind::Null && kind_of(std::io::stdin()) != StreamKind::Null => {
            dev_null().map(Some)
        }
        _ => Ok(None),
    }
}

/// What a replay says about the program's streams before it starts: where they differ
/// from the recorded kinds in a way mcheck cannot make up for, and where the output goes
/// when it cannot be shown.
pub fn replay_notes(recorded: StdioKinds, quiet_program: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let stdin_now = kind_of(std::io::stdin());
    if recorded.stdin != StreamKind::Null && stdin_now != recorded.stdin {
        notes.push(format!(
            "the program's stdin is {} here and was {} when the schedule was recorded: a \
             program that looks at it may not follow the schedule",
            stdin_now.describe(),
            recorded.stdin.describe()
        ));
    }
    if recorded.stdout == StreamKind::Null && !quiet_program {
        notes.push(
            "the program's stdout goes to /dev/null, as in the search that recorded the \
             schedule (--quiet-program): programs take other paths on other kinds of output"
                .into(),
        );
    }
    let stdout_now = own_stdout();
    if matches!(
        recorded.stdout,
        StreamKind::Socket | StreamKind::Other | StreamKind::Closed
    ) && stdout_now != recorded.stdout
    {
        notes.push(format!(
            "the program's stdout is {} here and was {} when the schedule was recorded: a \
             program that looks at it may not follow the schedule",
            stdout_now.describe(),
            recorded.stdout.describe()
        ));
    }
    notes
}

/// Where the program's stdout goes when it is not mcheck's own: kept per worker, so that
/// a pipe or terminal (and the thread passing its output on) is made once.
#[derive(Default)]
pub struct OutputSinks {
    /// Write ends of pipes and terminals made so far, by kind and whether output is shown.
    streams: Vec<(StreamKind, bool, OwnedFd)>,
    /// The temporary file of the running execution whose output is shown afterwards.
    shown_file: Option<File>,
}

impl OutputSinks {
    /// The stdout to give the program, of kind `want`: None to pass on mcheck's own.
    pub fn stdout(&mut self, want: StreamKind, shown: bool) -> Result<Option<OwnedFd>> {
        if shown && own_stdout() == want {
            return Ok(None);
        }
        match want {
            StreamKind::Null => Ok(Some(dev_null()?)),
            StreamKind::Pipe | StreamKind::Terminal => self.stream(want, shown).map(Some),
            StreamKind::File => {
                let file = temporary_file()?;
                let fd = file.as_fd().try_clone_to_owned()?;
                if shown {
                    self.shown_file = Some(file);
                }
                Ok(Some(fd))
            }
            // A socket or something else: mcheck's own when shown (the kind may differ,
            // which the replay says), else nothing seen.
            _ if shown => Ok(None),
            _ => Ok(Some(dev_null()?)),
        }
    }

    /// Shows what the program wrote to a temporary file standing for its stdout.
    pub fn finish_execution(&mut self) {
        if let Some(mut file) = self.shown_file.take() {
            let mut bytes = Vec::new();
            if file.seek(SeekFrom::Start(0)).is_ok() && file.read_to_end(&mut bytes).is_ok() {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&bytes);
                let _ = out.flush();
            }
        }
    }

    /// A write end of a pipe or terminal whose output is passed on to mcheck's stdout
    /// (`shown`) or dropped.
    fn stream(&mut self, kind: StreamKind, shown: bool) -> Result<OwnedFd> {
        if let Some((_, _, fd)) = (self.streams.iter()).find(|(k, s, _)| *k == kind && *s == shown)
        {
            return Ok(fd.try_clone()?);
        }
        let (read_end, write_end): (OwnedFd, OwnedFd) = if kind == StreamKind::Pipe {
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("a pipe for the program's stdout")?
        } else {
            crate::tracee::terminal::open_like(std::io::stdout())
                .context("a terminal for the program's stdout")?
        };
        std::thread::Builder::new()
            .name("mcheck-stdout".into())
            .spawn(move || pass_on(read_end, shown))
            .context("starting the thread that passes the program's stdout on")?;
        let fd = write_end.try_clone()?;
        self.streams.push((kind, shown, write_end));
        Ok(fd)
    }
}

/// Copies everything read from `from` to mcheck's stdout (or drops it) until its end.
fn pass_on(from: OwnedFd, shown: bool) {
    let mut file = File::from(from);
    let mut buf = [0u8; 8192];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if shown => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&buf[..n]);
                let _ = out.flush();
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A terminal's master reads EIO once no slave is open.
            Err(_) => break,
        }
    }
}

/// /dev/null, open for reading and writing.
pub fn dev_null() -> Result<OwnedFd> {
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?
        .into())
}

/// An unnamed file in the temporary directory, gone when its last descriptor closes.
fn temporary_file() -> Result<File> {
    let dir = std::env::temp_dir();
    let fd = nix::fcntl::open(
        &dir,
        OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .with_context(|| {
        format!(
            "a temporary file in {} for the program's stdout",
            dir.display()
        )
    })?;
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_made_are_the_kinds_asked_for() {
        let mut sinks = OutputSinks::default();
        for want in [
            StreamKind::Null,
            StreamKind::Pipe,
            StreamKind::File,
            StreamKind::Terminal,
        ] {
            let fd = sinks.stdout(want, false).expect("a sink").expect("made");
            assert_eq!(kind_of(&fd), want);
        }
    }
}
