//! The program's output as an oracle: a summary of what one execution wrote to stdout (a
//! digest of all of it and its first [`HEAD`] bytes), and where two such outputs first
//! differ, quoted line by line for a `nondeterminism` finding.

/// How many bytes of an execution's output are kept to quote a difference.
pub const HEAD: usize = 64 * 1024;

/// Longest quoted line (in characters); a longer one is cut with `...`.
const QUOTE: usize = 120;

/// What one execution wrote to a stream: enough to tell two outputs apart and to quote
/// where they differ, without keeping either whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputSummary {
    /// A digest of every byte written.
    pub digest: u64,
    /// How many bytes were written.
    pub len: u64,
    /// The first [`HEAD`] bytes (all of them when `len` is at most that).
    pub head: Vec<u8>,
}

impl OutputSummary {
    /// The summary of everything `reader` gives (a file the program wrote).
    pub fn read_all(mut reader: impl std::io::Read) -> std::io::Result<OutputSummary> {
        use std::hash::Hasher;
        let mut hasher = std::hash::DefaultHasher::new();
        let mut summary = OutputSummary::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.write(&buf[..n]);
            summary.len += n as u64;
            let room = HEAD.saturating_sub(summary.head.len()).min(n);
            summary.head.extend_from_slice(&buf[..room]);
        }
        summary.digest = hasher.finish();
        Ok(summary)
    }

    /// Whether two outputs are the same (by digest and length).
    pub fn same_as(&self, other: &OutputSummary) -> bool {
        self.digest == other.digest && self.len == other.len
    }
}

/// Where two outputs first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstDifference {
    /// Line `line` (1-based) is `ours` in one output and `theirs` in the other; None when
    /// that output has ended before the line.
    Line {
        line: usize,
        ours: Option<String>,
        theirs: Option<String>,
    },
    /// The kept prefixes are equal: the outputs differ past them (or only in length).
    PastHead { ours: u64, theirs: u64 },
}

impl FirstDifference {
    /// The difference in words, `ours` being "this execution" and `theirs` "the other".
    pub fn describe(&self) -> String {
        let quote = |l: &Option<String>| match l {
            Some(text) => format!("`{text}`"),
            None => "missing (the output ended before it)".into(),
        };
        match self {
            FirstDifference::Line {
                line,
                ours,
                theirs,
            } => format!(
                "line {line} is {} in this execution and {} in the other",
                quote(ours),
                quote(theirs)
            ),
            FirstDifference::PastHead { ours, theirs } => format!(
                "the outputs differ after their first {} KiB, which are equal ({ours} bytes in this execution, {theirs} in the other)",
                HEAD / 1024
            ),
        }
    }
}

/// Where `ours` first differs from `theirs`, by lines of their kept prefixes.
pub fn first_difference(ours: &OutputSummary, theirs: &OutputSummary) -> FirstDifference {
    let a = &ours.head;
    let b = &theirs.head;
    let common = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    // The prefixes agree as far as the shorter one goes, and that one is cut: the
    // difference lies past what was kept.
    let a_cut = ours.len > a.len() as u64;
    let b_cut = theirs.len > b.len() as u64;
    if (common == a.len() && a_cut) || (common == b.len() && b_cut) || a == b {
        return FirstDifference::PastHead {
            ours: ours.len,
            theirs: theirs.len,
        };
    }
    let start = a[..common]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    let line = a[..start].iter().filter(|&&c| c == b'\n').count() + 1;
    FirstDifference::Line {
        line,
        ours: line_at(a, start),
        theirs: line_at(b, start),
    }
}

/// The line that begins at `start` (without its newline), None when the output ends there.
fn line_at(bytes: &[u8], start: usize) -> Option<String> {
    if start >= bytes.len() {
        return None;
    }
    let rest = &bytes[start..];
    let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
    let text = String::from_utf8_lossy(&rest[..end]);
    let mut quoted: String = text.chars().take(QUOTE).collect();
    if text.chars().count() > QUOTE {
        quoted.push_str("...");
    }
    Some(quoted.escape_debug().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(text: &str) -> OutputSummary {
        OutputSummary {
            digest: text.len() as u64,
            len: text.len() as u64,
            head: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_read_summary_keeps_the_head_and_tells_contents_apart() {
        let long: Vec<u8> = (0..HEAD + 100).map(|i| (i % 251) as u8).collect();
        let a = OutputSummary::read_all(&long[..]).unwrap();
        assert_eq!(a.len, long.len() as u64);
        assert_eq!(a.head, long[..HEAD]);
        let mut other = long.clone();
        *other.last_mut().unwrap() ^= 1;
        let b = OutputSummary::read_all(&other[..]).unwrap();
        assert!(!a.same_as(&b), "a difference past the head still counts");
        assert!(a.same_as(&OutputSummary::read_all(&long[..]).unwrap()));
        assert_eq!(
            first_difference(&a, &b),
            FirstDifference::PastHead {
                ours: a.len,
                theirs: b.len
            }
        );
    }

    #[test]
    fn quotes_the_first_line_that_differs() {
        let d = first_difference(&summary("a\nsum 2\nend\n"), &summary("a\nsum 3\nend\n"));
        assert_eq!(
            d,
            FirstDifference::Line {
                line: 2,
                ours: Some("sum 2".into()),
                theirs: Some("sum 3".into())
            }
        );
        assert_eq!(
            d.describe(),
            "line 2 is `sum 2` in this execution and `sum 3` in the other"
        );
    }

    #[test]
    fn an_output_that_ends_earlier_is_missing_a_line() {
        let d = first_difference(&summary("a\n"), &summary("a\nb\n"));
        assert_eq!(
            d,
            FirstDifference::Line {
                line: 2,
                ours: None,
                theirs: Some("b".into())
            }
        );
    }

    #[test]
    fn a_difference_in_the_middle_of_a_line_quotes_the_whole_line() {
        let d = first_difference(&summary("x\nT1 T2\n"), &summary("x\nT2 T1\n"));
        assert_eq!(
            d,
            FirstDifference::Line {
                line: 2,
                ours: Some("T1 T2".into()),
                theirs: Some("T2 T1".into())
            }
        );
    }

    #[test]
    fn equal_kept_prefixes_say_the_difference_is_further() {
        let mut a = summary("same");
        a.len = 100_000;
        let mut b = summary("same");
        b.len = 100_001;
        assert_eq!(
            first_difference(&a, &b),
            FirstDifference::PastHead {
                ours: 100_000,
                theirs: 100_001
            }
        );
    }

    #[test]
    fn summaries_are_the_same_only_with_digest_and_length() {
        assert!(summary("ab").same_as(&summary("ab")));
        assert!(!summary("ab").same_as(&summary("abc")));
    }

    #[test]
    fn long_lines_and_control_characters_are_quoted_safely() {
        let long = "y".repeat(300);
        let d = first_difference(&summary(&format!("{long}\n")), &summary("z\t\n"));
        let FirstDifference::Line { ours, theirs, .. } = d else {
            panic!("a line")
        };
        assert_eq!(ours.unwrap().len(), QUOTE + 3);
        assert_eq!(theirs.unwrap(), "z\\t");
    }
}
