//! The progress display of a search (`--progress`): on a terminal a bar redrawn in place;
//! elsewhere (a log, CI) a plain line every few seconds, so that a long search shows it is
//! alive without flooding the log; nothing with `never`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::cli::ProgressMode;
use crate::run::search::ProgressReport;

/// Time between two plain progress lines.
const LINE_PERIOD: Duration = Duration::from_secs(5);

/// Shows a search's progress on stderr.
pub struct ProgressDisplay {
    bar: Option<indicatif::ProgressBar>,
    lines: bool,
    next_line: Instant,
    max_executions: u64,
    time_limit: Option<Duration>,
}

impl ProgressDisplay {
    /// The display `mode` asks for, for a search of at most `max_executions` executions.
    pub fn new(
        mode: ProgressMode,
        max_executions: u64,
        time_limit: Option<Duration>,
    ) -> ProgressDisplay {
        let terminal = std::io::stderr().is_terminal();
        let bar = (mode == ProgressMode::Auto && terminal).then(|| bar(max_executions));
        ProgressDisplay {
            bar,
            lines: match mode {
                ProgressMode::Never => false,
                ProgressMode::Auto => !terminal,
                ProgressMode::Always => true,
            },
            next_line: Instant::now() + LINE_PERIOD,
            max_executions,
            time_limit,
        }
    }

    /// Shows `r` (called often; draws at its own pace).
    pub fn update(&mut self, r: &ProgressReport) {
        if let Some(b) = &self.bar {
            b.set_position(r.executions);
            b.set_message(format!("{} finding(s)", r.findings));
        }
        if self.lines && Instant::now() >= self.next_line {
            self.next_line = Instant::now() + LINE_PERIOD;
            eprintln!("{}", self.line(r));
        }
    }

    /// Clears the bar at the end of the search.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    /// One plain progress line.
    fn line(&self, r: &ProgressReport) -> String {
        let limit = self
            .time_limit
            .map_or(String::new(), |l| format!(" of {:.0} s", l.as_secs_f64()));
        let executions = if r.executions > self.max_executions {
            // The default budget is spent; the reduced search goes on to finish its proof.
            format!(
                "{} execution(s) (budget {} spent; the reduced search goes on to finish its proof)",
                r.executions, self.max_executions
            )
        } else {
            format!("{}/{} execution(s)", r.executions, self.max_executions)
        };
        format!(
            "mcheck: progress: {executions}, {} finding(s), {:.0} s{limit}, {} MiB",
            r.findings,
            r.elapsed.as_secs_f64(),
            r.memory >> 20
        )
    }
}

fn bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "mcheck {bar:30} {pos}/{len} executions, {msg} [{elapsed}]",
    ) {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_says_how_far_the_search_is() {
        let d = ProgressDisplay::new(ProgressMode::Never, 1000, Some(Duration::from_secs(60)));
        let line = d.line(&ProgressReport {
            executions: 12,
            findings: 1,
            elapsed: Duration::from_secs(7),
            memory: 64 << 20,
        });
        assert_eq!(
            line,
            "mcheck: progress: 12/1000 execution(s), 1 finding(s), 7 s of 60 s, 64 MiB"
        );
    }
}
