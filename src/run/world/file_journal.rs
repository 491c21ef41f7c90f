//! Undo of the program's file changes between executions, so that mcheck never leaves the
//! user's files as no single run of the program would.
//!
//! Every execution runs the program's file changes again: an output opened with `O_TRUNC`
//! is emptied by each execution, and one that mcheck cuts short (a rerun that takes a
//! race's stacks, a diverging replay, the time limit, Ctrl-C, a deadlock) leaves it half
//! written. A program that refuses to overwrite its own output (`pbzip2 -k FILE`) fails in
//! the second execution, on what the first one wrote.
//!
//! The journal holds, for every path the program changed, its *origin*: its state before the
//! search first changed it (a copy of a regular file's bytes with its mode and times, a
//! directory, a symbolic link, or absent). It is taken at the seccomp stop before the change
//! runs (`note_change`), so only what the program touches is ever copied.
//!
//! - **Before each execution** the paths are put back as the execution expects them
//!   ([`FileJournal::restore`]): at the origin for an execution from exec, at a
//!   *checkpoint* for one started from a fork snapshot. A checkpoint is taken with the
//!   startup snapshot: the state of every path the program changed before it (an output
//!   opened before the first thread). A file the snapshot holds open is put back in
//!   place, so that the copies' descriptions still name it; when an execution replaced it
//!   (renamed another file over it, unlinked it), the copies could not write where a fresh
//!   run would, and the restore says so (the caller then starts from exec).
//! - **At the end of the search** (and when it is interrupted) the paths are left as the first
//!   execution that ran to its end left them ([`FileJournal::keep_final`],
//!   [`FileJournal::finish`]): the files a single run of the program makes. When no
//!   execution ran to its end (each one deadlocked, or was cut short), they are put back as
//!   they were before the search: never half-written by an execution mcheck killed.
//!
//! Changes are undone in the reverse order of their first change, so a directory the
//! program created is emptied before it is removed and one it removed is back before its
//! files are. Copies go to a private directory under the system's temporary directory,
//! removed at the end; a copy is made with `copy_file_range` (a reflink where the file system
//! has them). Regular files above [`COPY_LIMIT`] in all are not copied: their later changes
//! are not undone, which is said once.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Most bytes of regular files copied into the journal over a search.
pub const COPY_LIMIT: u64 = 4 << 30;

/// A state of the journaled paths: 0 is the origin, others are checkpoints.
pub type StateId = usize;

/// The origin (the files before the search changed them).
pub const ORIGIN: StateId = 0;

/// The saved state of one path.
#[derive(Debug, Clone)]
enum Saved {
    /// Nothing was there.
    Absent,
    /// A regular file: its bytes (a copy in the journal's directory), mode and times, and
    /// its identity (device, inode) when it was saved.
    File {
        copy: PathBuf,
        mode: u32,
        times: [libc::timespec; 2],
        id: (u64, u64),
    },
    /// A directory, with its mode.
    Dir { mode: u32 },
    /// A symbolic link to the target.
    Symlink(PathBuf),
    /// Something that cannot be put back (a device, a socket, a file too large to copy).
    Unknown,
}

/// One path the program changed.
#[derive(Debug)]
struct Entry {
    path: PathBuf,
    origin: Saved,
}

/// The state of the paths at a fork snapshot.
#[derive(Debug, Default)]
struct Checkpoint {
    /// Entries changed before it, by index, with their state then.
    states: HashMap<usize, Saved>,
    /// Files the snapshot holds open (device, inode): put back in place or not at all.
    held_open: HashSet<(u64, u64)>,
}

/// The journal of one search. See the module documentation.
#[derive(Debug, Default)]
pub struct FileJournal {
    /// Where copies go (made on first use).
    dir: Option<PathBuf>,
    entries: Vec<Entry>,
    index: HashMap<PathBuf, usize>,
    /// Checkpoints; `checkpoints[i]` is state `i + 1`.
    checkpoints: Vec<Checkpoint>,
    /// Paths changed since the last restore (the files are not in a known state).
    dirty: bool,
    /// Files the program writes through descriptors it was started with (stdout redirected
    /// to a file): every execution may have changed them without a call the journal sees.
    outputs: bool,
    /// The state the paths were last put in.
    current: StateId,
    /// The state the first execution that ran to its end left.
    final_state: Option<HashMap<usize, Saved>>,
    /// Bytes copied so far.
    copied: u64,
    /// Copies made (names of the copy files).
    next_copy: u64,
    /// What could not be saved or put back, said once each.
    pub problems: Vec<String>,
    said: HashSet<String>,
}

/// A restore that could not give the copies of a snapshot the files a fresh execution
/// would find: the paths were put at the origin instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFaithful(pub String);

impl FileJournal {
    /// An empty journal.
    pub fn new() -> FileJournal {
        FileJournal::default()
    }

    /// Whether the program changed any path so far.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The paths journaled, in the order of their first change.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().map(|e| e.path.as_path())
    }

    /// Before the program changes `paths`: saves the origin of those not seen before.
    pub fn note_change<'p>(&mut self, paths: impl IntoIterator<Item = &'p Path>) {
        for path in paths {
            self.dirty = true;
            if self.index.contains_key(path) {
                continue;
            }
            let origin = self.save(path);
            self.index.insert(path.to_path_buf(), self.entries.len());
            self.entries.push(Entry {
                path: path.to_path_buf(),
                origin,
            });
        }
    }

    /// Before the search: files the program was started with open for writing (mcheck's
    /// stdout redirected to a file). Their origin is saved now, and since executions write
    /// them without a system call that names them, they are put back before every execution.
    pub fn note_outputs<'p>(&mut self, paths: impl IntoIterator<Item = &'p Path>) {
        let before = self.entries.len();
        self.note_change(paths);
        self.outputs |= self.entries.len() > before;
    }

    /// Whether the program writes files the journal holds without naming them
    /// ([`FileJournal::note_outputs`]): every execution then changes files.
    pub fn has_outputs(&self) -> bool {
        self.outputs
    }

    /// At a fork snapshot: records the state of every path changed so far, `held_open`
    /// being the files (device, inode) the snapshot keeps open. Returns the state its copies
    /// must start from.
    pub fn checkpoint(&mut self, held_open: HashSet<(u64, u64)>) -> StateId {
        if self.entries.is_empty() {
            return ORIGIN;
        }
        let mut states = HashMap::new();
        for i in 0..self.entries.len() {
            let path = self.entries[i].path.clone();
            let s = self.save(&path);
            states.insert(i, s);
        }
        self.checkpoints.push(Checkpoint { states, held_open });
        // The paths are in this state now.
        self.current = self.checkpoints.len();
        self.dirty = false;
        self.current
    }

    /// Whether the paths must be put back before an execution starting from state `to`.
    pub fn needs_restore(&self, to: StateId) -> bool {
        !self.entries.is_empty() && (self.dirty || self.outputs || self.current != to)
    }

    /// Puts every journaled path in state `to` before an execution starting from it. Err when
    /// a file the snapshot of `to` holds open was replaced: the paths are then at the
    /// origin, for an execution from exec.
    pub fn restore(&mut self, to: StateId) -> Result<(), NotFaithful> {
        if !self.dirty && !self.outputs && self.current == to {
            return Ok(());
        }
        let result = match self.checkpoints.get(to.wrapping_sub(1)) {
            Some(c) => self.replaced_held_file(c).map_or(Ok(to), Err),
            None => Ok(ORIGIN),
        };
        let target = *result.as_ref().unwrap_or(&ORIGIN);
        for i in (0..self.entries.len()).rev() {
            let state = self.state_in(i, target).clone();
            let path = self.entries[i].path.clone();
            let held = match self.checkpoints.get(target.wrapping_sub(1)) {
                Some(c) => c.held_open.clone(),
                None => HashSet::new(),
            };
            self.put(&path, &state, &held);
        }
        self.dirty = false;
        self.current = target;
        result.map(|_| ())
    }

    /// After an execution that ran to its end: the first such keeps the state of the
    /// paths, which [`FileJournal::finish`] puts back at the end of the search.
    pub fn keep_final(&mut self) {
        if self.final_state.is_some() || self.entries.is_empty() {
            return;
        }
        let mut states = HashMap::new();
        for i in 0..self.entries.len() {
            let path = self.entries[i].path.clone();
            states.insert(i, self.save(&path));
        }
        self.final_state = Some(states);
    }

    /// Whether the final state was kept.
    pub fn has_final(&self) -> bool {
        self.final_state.is_some()
    }

    /// At the end of the search: the paths as the first execution that ran to its end left
    /// them (a path changed only by later executions back at its origin); without such an
    /// execution (every one was cut short, or killed at a deadlock), as they were before the
    /// search, which a note says. The copies are removed.
    pub fn finish(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        let fin = self.final_state.take();
        if fin.is_none() {
            eprintln!(
                "mcheck: note: no execution ran to its end, so the files the program changed are put back as they were before mcheck ran it"
            );
        }
        let empty = HashMap::new();
        let fin = fin.as_ref().unwrap_or(&empty);
        for i in (0..self.entries.len()).rev() {
            let state = fin.get(&i).unwrap_or(&self.entries[i].origin).clone();
            let path = self.entries[i].path.clone();
            self.put(&path, &state, &HashSet::new());
        }
        self.entries.clear();
        self.index.clear();
        self.checkpoints.clear();
        if let Some(dir) = self.dir.take() {
            let _ = fs::remove_dir_all(dir);
        }
    }

    /// The state of entry `i` in state `s`.
    fn state_in(&self, i: usize, s: StateId) -> &Saved {
        self.checkpoints
            .get(s.wrapping_sub(1))
            .and_then(|c| c.states.get(&i))
            .unwrap_or(&self.entries[i].origin)
    }

    /// A file checkpoint `c` keeps open that is no longer at its path.
    fn replaced_held_file(&self, c: &Checkpoint) -> Option<NotFaithful> {
        for (&i, s) in &c.states {
            let Saved::File { id, .. } = s else { continue };
            if !c.held_open.contains(id) {
                continue;
            }
            let path = &self.entries[i].path;
            let now = fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()));
            if now != Some(*id) {
                return Some(NotFaithful(format!(
                    "{} was replaced by an execution while a fork snapshot holds it open",
                    path.display()
                )));
            }
        }
        None
    }

    /// The state of `path` now, copying a regular file's bytes into the journal.
    fn save(&mut self, path: &Path) -> Saved {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Saved::Absent,
            Err(e) => {
                self.problem(path, &format!("it could not be examined ({e})"));
                return Saved::Unknown;
            }
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            return match fs::read_link(path) {
                Ok(target) => Saved::Symlink(target),
                Err(e) => {
                    self.problem(path, &format!("its link could not be read ({e})"));
                    Saved::Unknown
                }
            };
        }
        if ft.is_dir() {
            return Saved::Dir {
                mode: meta.mode() & 0o7777,
            };
        }
        if !ft.is_file() {
            return Saved::Unknown;
        }
        if self.copied + meta.len() > COPY_LIMIT {
            self.problem(
                path,
                &format!(
                    "copying it ({} MiB) would take the journal past its limit of {} MiB",
                    meta.len() >> 20,
                    COPY_LIMIT >> 20
                ),
            );
            return Saved::Unknown;
        }
        match self.copy_out(path) {
            Ok(copy) => {
                self.copied += meta.len();
                Saved::File {
                    copy,
                    mode: meta.mode() & 0o7777,
                    times: [
                        timespec(meta.atime(), meta.atime_nsec()),
                        timespec(meta.mtime(), meta.mtime_nsec()),
                    ],
                    id: (meta.dev(), meta.ino()),
                }
            }
            Err(e) => {
                self.problem(path, &format!("it could not be copied ({e})"));
                Saved::Unknown
            }
        }
    }

    /// Copies the bytes of `path` into the journal's directory.
    fn copy_out(&mut self, path: &Path) -> io::Result<PathBuf> {
        let dir = match &self.dir {
            Some(d) => d.clone(),
            None => {
                let d = private_dir()?;
                self.dir = Some(d.clone());
                d
            }
        };
        let copy = dir.join(self.next_copy.to_string());
        self.next_copy += 1;
        let mut from = File::open(path)?;
        let mut to = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&copy)?;
        io::copy(&mut from, &mut to)?;
        Ok(copy)
    }

    /// Puts `path` in state `s`; `held` are the files a snapshot keeps open (written in
    /// place, never replaced).
    fn put(&mut self, path: &Path, s: &Saved, held: &HashSet<(u64, u64)>) {
        let now = fs::symlink_metadata(path).ok();
        let result = match s {
            Saved::Unknown => Ok(()),
            Saved::Absent => match &now {
                None => Ok(()),
                Some(m) if m.is_dir() => fs::remove_dir(path).or_else(|_| fs::remove_dir_all(path)),
                Some(_) => fs::remove_file(path),
            },
            Saved::Dir { mode } => {
                let made = match &now {
                    Some(m) if m.is_dir() => Ok(()),
                    Some(_) => fs::remove_file(path).and_then(|()| fs::create_dir(path)),
                    None => fs::create_dir(path),
                };
                made.and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(*mode)))
            }
            Saved::Symlink(target) => {
                if let Some(m) = &now {
                    if m.file_type().is_symlink()
                        && fs::read_link(path).ok().as_deref() == Some(target)
                    {
                        return;
                    }
                }
                remove_any(path, now.as_ref())
                    .and_then(|()| std::os::unix::fs::symlink(target, path))
            }
            Saved::File {
                copy, mode, times, ..
            } => {
                let in_place = now
                    .as_ref()
                    .is_some_and(|m| m.is_file() || held.contains(&(m.dev(), m.ino())));
                let written = if in_place {
                    rewrite(copy, path)
                } else {
                    remove_any(path, now.as_ref()).and_then(|()| rewrite(copy, path))
                };
                written
                    .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(*mode)))
                    .and_then(|()| set_times(path, times))
            }
        };
        if let Err(e) = result {
            self.problem(path, &format!("it could not be put back ({e})"));
        }
    }

    /// Notes (and says once on stderr) what cannot be undone for `path`.
    fn problem(&mut self, path: &Path, why: &str) {
        let msg = format!("{}: {why}", path.display());
        if self.said.insert(msg.clone()) {
            eprintln!(
                "mcheck: note: the changes executions make to {msg}; later executions may find it as earlier ones left it"
            );
            self.problems.push(msg);
        }
    }
}

impl Drop for FileJournal {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A new private directory for copies.
fn private_dir() -> io::Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let d = base.join(format!("mcheck-files-{}-{n}", std::process::id()));
        match fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free name for the journal's directory"))
}

/// Writes the bytes of `copy` over `path` (truncating it in place, or creating it).
fn rewrite(copy: &Path, path: &Path) -> io::Result<()> {
    let mut from = File::open(copy)?;
    let mut to = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    io::copy(&mut from, &mut to)?;
    Ok(())
}

/// Removes whatever is at `path` (`meta` its metadata, None when nothing is).
fn remove_any(path: &Path, meta: Option<&fs::Metadata>) -> io::Result<()> {
    match meta {
        None => Ok(()),
        Some(m) if m.is_dir() => fs::remove_dir_all(path),
        Some(_) => fs::remove_file(path),
    }
}

fn timespec(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// Sets the access and modification times of `path` (not following a final symlink).
fn set_times(path: &Path, times: &[libc::timespec; 2]) -> io::Result<()> {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &TimeSpec::from(times[0]),
        &TimeSpec::from(times[1]),
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A fresh directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("mcheck-journal-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn read(p: &Path) -> Option<String> {
        fs::read_to_string(p).ok()
    }

    #[test]
    fn a_created_file_is_gone_again_and_an_overwritten_one_is_back() {
        let d = scratch("create");
        let (new, old) = (d.join("out"), d.join("in"));
        fs::write(&old, "original").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o640)).unwrap();
        let mtime = fs::metadata(&old).unwrap().mtime();
        let mut j = FileJournal::new();
        j.note_change([new.as_path(), old.as_path()]);
        fs::write(&new, "made").unwrap();
        fs::write(&old, "changed, and longer than before").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o600)).unwrap();
        j.restore(ORIGIN).unwrap();
        assert!(!new.exists());
        assert_eq!(read(&old).as_deref(), Some("original"));
        let m = fs::metadata(&old).unwrap();
        assert_eq!(m.mode() & 0o777, 0o640);
        assert_eq!(m.mtime(), mtime);
        // A second execution changes them again: the origin is not taken twice.
        j.note_change([new.as_path()]);
        fs::write(&new, "again").unwrap();
        j.restore(ORIGIN).unwrap();
        assert!(!new.exists());
        j.finish();
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn directories_come_back_in_the_right_order() {
        let d = scratch("dirs");
        let (made, gone) = (d.join("made"), d.join("gone"));
        fs::create_dir(&gone).unwrap();
        fs::write(gone.join("f"), "kept").unwrap();
        let mut j = FileJournal::new();
        // The program makes a directory with a file in it, and removes another.
        j.note_change([made.as_path()]);
        fs::create_dir(&made).unwrap();
        j.note_change([made.join("x").as_path()]);
        fs::write(made.join("x"), "x").unwrap();
        j.note_change([gone.join("f").as_path()]);
        fs::remove_file(gone.join("f")).unwrap();
        j.note_change([gone.as_path()]);
        fs::remove_dir(&gone).unwrap();
        j.restore(ORIGIN).unwrap();
        assert!(!made.exists());
        assert_eq!(read(&gone.join("f")).as_deref(), Some("kept"));
        j.finish();
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_rename_over_a_file_is_undone() {
        let d = scratch("rename");
        let (tmp, out) = (d.join("out.tmp"), d.join("out"));
        fs::write(&out, "previous output").unwrap();
        let mut j = FileJournal::new();
        j.note_change([tmp.as_path()]);
        fs::write(&tmp, "new output").unwrap();
        j.note_change([tmp.as_path(), out.as_path()]);
        fs::rename(&tmp, &out).unwrap();
        j.restore(ORIGIN).unwrap();
        assert!(!tmp.exists());
        assert_eq!(read(&out).as_deref(), Some("previous output"));
        j.finish();
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn copies_of_a_snapshot_find_its_files_in_place() {
        let d = scratch("checkpoint");
        let out = d.join("out");
        let mut j = FileJournal::new();
        // Opened (and its head written) before the first thread, where the snapshot is.
        j.note_change([out.as_path()]);
        fs::write(&out, "head;").unwrap();
        let held = File::options().append(true).open(&out).unwrap();
        let id = {
            let m = held.metadata().unwrap();
            (m.dev(), m.ino())
        };
        let cp = j.checkpoint([id].into_iter().collect());
        assert_ne!(cp, ORIGIN);
        // An execution from the snapshot writes the rest; the next one finds only the head,
        // in the very file the snapshot holds.
        io::Write::write_all(&mut &held, b"tail").unwrap();
        j.note_change([out.as_path()]);
        j.restore(cp).unwrap();
        assert_eq!(read(&out).as_deref(), Some("head;"));
        let m = fs::metadata(&out).unwrap();
        assert_eq!((m.dev(), m.ino()), id);
        // An execution from exec finds the origin: no file.
        j.restore(ORIGIN).unwrap();
        assert!(!out.exists());
        j.finish();
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_held_file_replaced_by_an_execution_makes_the_snapshot_unfaithful() {
        let d = scratch("replaced");
        let out = d.join("out");
        let mut j = FileJournal::new();
        j.note_change([out.as_path()]);
        fs::write(&out, "head").unwrap();
        // The snapshot holds it open, so its inode cannot be reused for the new file.
        let held = File::open(&out).unwrap();
        let m = held.metadata().unwrap();
        let cp = j.checkpoint([(m.dev(), m.ino())].into_iter().collect());
        // The execution unlinks it and makes a new one under the same name.
        j.note_change([out.as_path()]);
        fs::remove_file(&out).unwrap();
        fs::write(&out, "other").unwrap();
        assert!(j.restore(cp).is_err());
        assert!(!out.exists(), "at the origin instead");
        drop(held);
        j.finish();
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn the_end_is_the_first_complete_execution() {
        let d = scratch("final");
        let (out, input) = (d.join("out"), d.join("in"));
        fs::write(&input, "input").unwrap();
        let mut j = FileJournal::new();
        // Execution 1 writes the whole output and removes its input, as `xz FILE` does.
        j.note_change([out.as_path()]);
        fs::write(&out, "whole output").unwrap();
        j.note_change([input.as_path()]);
        fs::remove_file(&input).unwrap();
        j.keep_final();
        // Execution 2, cut short, had truncated it.
        j.restore(ORIGIN).unwrap();
        assert_eq!(read(&input).as_deref(), Some("input"));
        j.note_change([out.as_path()]);
        fs::write(&out, "").unwrap();
        j.keep_final();
        j.finish();
        assert_eq!(read(&out).as_deref(), Some("whole output"));
        assert!(!input.exists());
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn without_a_complete_execution_the_files_are_as_before_the_search() {
        let d = scratch("incomplete");
        let out = d.join("out");
        fs::write(&out, "the user's file").unwrap();
        let mut j = FileJournal::new();
        j.note_change([out.as_path()]);
        fs::write(&out, "begin").unwrap();
        j.finish();
        assert_eq!(read(&out).as_deref(), Some("the user's file"));
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn its_copies_are_removed_at_the_end() {
        let d = scratch("cleanup");
        let f = d.join("f");
        fs::write(&f, "x").unwrap();
        let mut j = FileJournal::new();
        j.note_change([f.as_path()]);
        let dir = j.dir.clone().expect("a copy was made");
        assert!(dir.exists());
        drop(j);
        assert!(!dir.exists());
        fs::remove_dir_all(d).unwrap();
    }
}
