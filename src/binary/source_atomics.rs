//! Statements the program's source marks atomic where the machine code cannot say so.
//!
//! On x86-64 a relaxed, acquire or release atomic load or store is a plain MOV, the same
//! instruction as a plain access, and C has no atomic type to find in DWARF when the
//! variable is a plain `int`: `#pragma omp atomic write` (`y = 1;`), `#pragma omp atomic
//! read` (`tmp = y;`), `__atomic_store_n(&y, 1, ...)`, `g_atomic_int_get(&y)` all compile
//! to MOVs. Two of them on one variable are synchronisation, not a data race. The line
//! table says which source line a MOV comes from; this module reads that line (and the
//! `#pragma` line before it) and says whether the statement's loads or its stores are
//! atomic:
//!
//! - the statement right after `#pragma omp atomic` with a `read` clause: its loads; with a
//!   `write` clause: its stores (an `update` or `capture` compiles to LOCKed instructions,
//!   which need no help);
//! - a line that calls something whose name says atomic and load (`__atomic_load_n`,
//!   `atomic_load_explicit`, `g_atomic_int_get`, `uatomic_read`: a name containing `atomic`
//!   and `load`, `get` or `read`): its loads; `atomic` and `store`, `set` or `write`: its
//!   stores.
//!
//! It only ever marks accesses atomic, so it can hide a race (a plain load of a pointer on
//! the same line), never make one. A source file that cannot be read marks nothing.

use std::collections::HashMap;

/// Bytes of a source file read at most (larger files mark nothing).
const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// Which accesses of a source line are atomic.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    /// Its loads.
    pub loads: bool,
    /// Its stores.
    pub stores: bool,
}

/// The source files read so far, by the path DWARF names (None: unreadable).
#[derive(Debug, Default)]
pub struct SourceAtomics {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceAtomics {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The marks of the 1-based `line` of the source file `file`.
    pub fn marks(&mut self, file: &str, line: u32) -> Marks {
        let lines = self
            .files
            .entry(file.to_string())
            .or_insert_with(|| read_lines(file));
        match lines {
            Some(lines) => line_marks(lines, line as usize),
            None => Marks::default(),
        }
    }
}

/// The lines of `path`, or None when it cannot be read (or is too large).
fn read_lines(path: &str) -> Option<Vec<String>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SOURCE_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// The marks of the 1-based `line` of `lines` (see the module documentation).
pub fn line_marks(lines: &[String], line: usize) -> Marks {
    let Some(text) = line.checked_sub(1).and_then(|i| lines.get(i)) else {
        return Marks::default();
    };
    let mut marks = call_marks(text);
    if let Some(pragma) = pragma_before(lines, line - 1) {
        let words = words(&pragma);
        let is_atomic =
            words.len() >= 3 && words[0] == "pragma" && words[1] == "omp" && words[2] == "atomic";
        if is_atomic {
            marks.loads |= words[3..].contains(&"read");
            marks.stores |= words[3..].contains(&"write");
        }
    }
    marks
}

/// The `#pragma` directly before the 0-based line `index` (blank lines skipped, a directive
/// continued with backslashes joined), without its `#`.
fn pragma_before(lines: &[String], index: usize) -> Option<String> {
    let mut i = index.checked_sub(1)?;
    while lines[i].trim().is_empty() {
        i = i.checked_sub(1)?;
    }
    // The directive's first line: go up while the line above continues onto this one.
    let mut first = i;
    while first > 0 && lines[first - 1].trim_end().ends_with('\\') {
        first -= 1;
    }
    if lines[i].trim_end().ends_with('\\') {
        return None;
    }
    let joined: String = lines[first..=i]
        .iter()
        .map(|l| l.trim_end().trim_end_matches('\\'))
        .collect::<Vec<_>>()
        .join(" ");
    joined.trim_start().strip_prefix('#').map(str::to_string)
}

/// The identifier-like words of `text`, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The marks of the calls on a line: a called name that says atomic and load or store.
fn call_marks(text: &str) -> Marks {
    let code = text.split("//").next().unwrap_or("");
    let mut marks = Marks::default();
    let mut rest = code;
    while let Some(open) = rest.find('(') {
        let name = rest[..open]
            .trim_end()
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if name.contains("atomic") {
            let has = |parts: &[&str]| parts.iter().any(|p| name.contains(p));
            marks.loads |= has(&["load", "get", "read"]);
            marks.stores |= has(&["store", "set", "write"]);
        }
        rest = &rest[open + 1..];
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn omp_atomic_read_and_write_mark_the_statement_after_the_pragma() {
        let src = lines(
            "  #pragma omp atomic write\n    y = 1;\n\n#pragma omp atomic read acquire\n\n tmp = y;\n x = y;\n",
        );
        let write = line_marks(&src, 2);
        assert!(write.stores && !write.loads);
        let read = line_marks(&src, 6);
        assert!(read.loads && !read.stores);
        assert_eq!(
            line_marks(&src, 7),
            Marks::default(),
            "only the next statement"
        );
        assert_eq!(line_marks(&src, 1), Marks::default());
        assert_eq!(line_marks(&src, 99), Marks::default());
    }

    #[test]
    fn clauses_in_any_order_and_continued_directives_count() {
        let src = lines("# pragma omp atomic seq_cst, \\\n   read\nv = x;\n");
        assert!(line_marks(&src, 3).loads);
        let src = lines("#pragma omp atomic\nx += 1;\n#pragma omp atomic update\nx++;\n");
        assert_eq!(line_marks(&src, 2), Marks::default(), "updates are LOCKed");
        assert_eq!(line_marks(&src, 4), Marks::default());
        let src = lines("#pragma omp critical\nx = 1;\n#pragma omp atomicity write\nx = 2;\n");
        assert_eq!(line_marks(&src, 2), Marks::default());
        assert_eq!(line_marks(&src, 4), Marks::default());
    }

    #[test]
    fn calls_whose_names_say_atomic_mark_their_line() {
        let src = lines(
            "__atomic_store_n(&flag, 1, __ATOMIC_RELEASE);\n\
             while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE)) {}\n\
             g_atomic_int_set (&x, 2); // set\n\
             v = uatomic_read(&x);\n\
             atomic_fetch_add(&x, 1);\n\
             store(&x); // __atomic_store_n(&x)\n\
             x = atomic_count;\n",
        );
        assert_eq!(
            line_marks(&src, 1),
            Marks {
                loads: false,
                stores: true
            }
        );
        assert_eq!(
            line_marks(&src, 2),
            Marks {
                loads: true,
                stores: false
            }
        );
        assert_eq!(
            line_marks(&src, 3),
            Marks {
                loads: false,
                stores: true
            }
        );
        assert_eq!(
            line_marks(&src, 4),
            Marks {
                loads: true,
                stores: false
            }
        );
        assert_eq!(
            line_marks(&src, 5),
            Marks::default(),
            "LOCKed: no help needed"
        );
        assert_eq!(
            line_marks(&src, 6),
            Marks::default(),
            "a comment is no call"
        );
        assert_eq!(
            line_marks(&src, 7),
            Marks::default(),
            "a variable is no call"
        );
    }

    #[test]
    fn an_unreadable_file_marks_nothing() {
        let mut s = SourceAtomics::new();
        assert_eq!(s.marks("/nonexistent/x.c", 3), Marks::default());
    }
}
