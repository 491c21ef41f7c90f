//! The program's stderr, read through a pipe: passed on to mcheck's stderr (unless
//! `--quiet-program`) and its tail kept, to quote an assertion or panic message.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver};

const KEEP: usize = 64 * 1024;

/// A running capture of one execution's stderr.
pub struct StderrCapture {
    done: Receiver<Vec<u8>>,
}

impl StderrCapture {
    /// Creates the pipe; returns the capture and the write end to give the child.
    pub fn start(echo: bool) -> std::io::Result<(StderrCapture, OwnedFd)> {
        // Close-on-exec: with several workers, another worker's tracee must not inherit
        // this pipe (its end of file would wait for that process). dup2 onto the child's
        // fd 2 clears the flag there.
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (tx, rx) = bounded(1);
        std::thread::Builder::new()
            .name("mcheck-stderr".into())
            .spawn(move || {
                let mut file = std::fs::File::from(read_end);
                let mut tail = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if echo {
                                let _ = std::io::stderr().write_all(&buf[..n]);
                            }
                            tail.extend_from_slice(&buf[..n]);
                            if tail.len() > 2 * KEEP {
                                tail.drain(..tail.len() - KEEP);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    }
                }
                let _ = tx.send(tail);
            })?;
        Ok((StderrCapture { done: rx }, write_end))
    }

    /// Waits (briefly) for end of file and returns the kept tail as text.
    pub fn finish(self) -> String {
        let bytes = self
            .done
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
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
