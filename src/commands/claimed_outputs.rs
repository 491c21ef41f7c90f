//! The paths a command will write, made to exist before the program first runs.
//!
//! A program can see mcheck's output: Python's import system lists the script's directory,
//! and every name in it is one more step of the listing (CPython lets go of its lock around
//! each `readdir`). A schedules directory or a JSON report that appears in that directory
//! only once the search is over makes the program take other steps in a replay than in the
//! search, and the schedule no longer replays. So the schedules directory and the report
//! files are created (empty) before the first execution; a schedules directory that is
//! still empty at the end is removed again, with the parents that were created for it.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

/// What [`claim`] created, to be tidied by [`Claimed::release`].
#[derive(Debug, Default)]
pub struct Claimed {
    /// The schedules directory and the parents created for it, deepest first.
    created_dirs: Vec<PathBuf>,
}

/// Creates the directory `dir` (when given) and each of `files` that does not exist yet.
/// Failures are left for the writes at the end to report.
pub fn claim(dir: Option<&Path>, files: &[&Path]) -> Claimed {
    let mut created_dirs = Vec::new();
    if let Some(dir) = dir {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        if fs::create_dir_all(dir).is_ok() {
            created_dirs = missing;
        }
    }
    for f in files {
        if !f.exists() {
            let _ = OpenOptions::new().write(true).create_new(true).open(f);
        }
    }
    Claimed { created_dirs }
}

impl Claimed {
    /// Removes the directories [`claim`] created that are still empty.
    pub fn release(self) {
        for d in &self.created_dirs {
            if fs::remove_dir(d).is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mcheck-claim-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_unused_directory_and_its_new_parents_go_away_a_used_one_stays() {
        let root = scratch("dirs");
        let out = root.join("a/b/out");
        let report = root.join("report.json");
        let claimed = claim(Some(&out), &[&report]);
        assert!(out.is_dir() && report.is_file());
        claimed.release();
        assert!(!root.join("a").exists(), "created parents removed");
        assert!(report.is_file(), "the report file stays for its writer");
        let claimed = claim(Some(&out), &[]);
        fs::write(out.join("x.schedule.json"), "{}").unwrap();
        claimed.release();
        assert!(out.join("x.schedule.json").is_file());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn existing_paths_are_left_alone() {
        let root = scratch("existing");
        let report = root.join("report.json");
        fs::write(&report, "old").unwrap();
        let claimed = claim(Some(&root), &[&report]);
        claimed.release();
        assert!(root.is_dir(), "a directory that existed is never removed");
        assert_eq!(fs::read_to_string(&report).unwrap(), "old");
        let _ = fs::remove_dir_all(&root);
    }
}
