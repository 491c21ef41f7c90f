//! The human report on stderr, in the spirit of sanitizer output: what happened, where, which
//! thread holds what, each thread's stack, and the command that reproduces it.

use std::fmt::Write;

use super::Finding;

/// Formats one finding for a terminal.
pub fn format_finding(f: &Finding, reproduce: &str) -> String {
    let mut s = String::new();
    let rule = "=".repeat(72);
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(s, "mcheck: {}: {}", f.kind.name(), f.message);
    for d in &f.details {
        let _ = writeln!(s, "  {d}");
    }
    for t in &f.threads {
        let _ = writeln!(s);
        let name = t
            .name
            .as_deref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default();
        let process = t
            .process
            .as_ref()
            .map(|p| format!(", process P{}", p.number))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  Thread T{}{name} (tid {}{process}) {}",
            t.id, t.tid, t.state
        );
        for (i, fr) in t.stack.iter().enumerate() {
            let inl = if fr.inlined { " (inlined)" } else { "" };
            let _ = writeln!(s, "    #{i:<2} {} {}{inl}", fr.address, fr.short());
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "  Found in execution {} after {} scheduling decisions, {} preemption(s); seed {}.",
        f.execution, f.steps, f.preemptions, f.seed
    );
    let _ = writeln!(s, "  Reproduce: {reproduce}");
    let _ = writeln!(s, "{rule}");
    s
}
