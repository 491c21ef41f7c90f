//! The files the program writes, as one execution left them: a summary of each regular file
//! the journal holds (`file_journal`), for the output oracle to compare between executions
//! as it compares stdout.
//!
//! Only what is a regular file when the execution ends is summarised: a path the program
//! created and removed, or a directory, says nothing about the schedule. A file larger than
//! [`LARGEST`] is not read (every execution would pay for reading it).

use std::path::{Path, PathBuf};

use crate::detect::output_diff::OutputSummary;

/// Largest file summarised, in bytes.
pub const LARGEST: u64 = 256 << 20;

/// Summaries of the regular files among `paths`, in their order.
pub fn summarize<'p>(paths: impl IntoIterator<Item = &'p Path>) -> Vec<(PathBuf, OutputSummary)> {
    paths
        .into_iter()
        .filter_map(|p| summarize_one(p).map(|s| (p.to_path_buf(), s)))
        .collect()
}

/// The summary of the regular file at `path` (not followed when it is a symbolic link), if
/// it is one and not too large to read.
pub fn summarize_one(path: &Path) -> Option<OutputSummary> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > LARGEST {
        return None;
    }
    OutputSummary::read_all(std::fs::File::open(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_summarised() {
        let dir = std::env::temp_dir().join(format!("mcheck-written-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("out.txt");
        std::fs::write(&file, "total 30\n").unwrap();
        let link = dir.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let gone = dir.join("gone");
        let found = summarize([
            file.as_path(),
            dir.as_path(),
            link.as_path(),
            gone.as_path(),
        ]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, file);
        assert_eq!(found[0].1.head, b"total 30\n");
    }
}
