//! Replaying a recorded schedule: at every point the recorded thread must be enabled and
//! about to perform the recorded kind of operation, else the execution has diverged.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{Divergence, Point, Scheduler};
use crate::model::ThreadId;

/// One recorded scheduling decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Logical thread chosen.
    pub thread: ThreadId,
    /// The operation it performed there: one of the model's names while recording (no
    /// allocation per decision), read into a string from a schedule file.
    pub op: Cow<'static, str>,
}

/// Follows a recorded list of decisions.
pub struct ReplayScheduler {
    decisions: Vec<Decision>,
}

impl ReplayScheduler {
    /// A scheduler replaying `decisions`.
    pub fn new(decisions: Vec<Decision>) -> Self {
        ReplayScheduler { decisions }
    }
}

impl Scheduler for ReplayScheduler {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        (index == 0).then_some(0)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let Some(d) = self.decisions.get(point.step) else {
            return Err(Divergence {
                step: point.step,
                reason: format!(
                    "the schedule has {} decisions but the program goes on",
                    self.decisions.len()
                ),
            });
        };
        match point.enabled.iter().position(|&t| t == d.thread) {
            None => Err(Divergence {
                step: point.step,
                reason: format!(
                    "thread T{} should run ({}) but is not enabled (enabled: {:?})",
                    d.thread, d.op, point.enabled
                ),
            }),
            Some(i) if point.ops[i] != d.op => Err(Divergence {
                step: point.step,
                reason: format!(
                    "thread T{} should perform {} but is about to perform {}",
                    d.thread, d.op, point.ops[i]
                ),
            }),
            Some(_) => Ok(d.thread),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::plain_point;

    #[test]
    fn follows_and_detects_divergence() {
        let mut s = ReplayScheduler::new(vec![
            Decision {
                thread: 1,
                op: "mutex_lock".into(),
            },
            Decision {
                thread: 0,
                op: "join".into(),
            },
        ]);
        assert_eq!(s.begin_execution(0), Some(0));
        let p = |step, enabled, ops| plain_point(step, enabled, ops, None);
        assert_eq!(s.choose(&p(0, &[0, 1], &["join", "mutex_lock"])), Ok(1));
        assert!(s.choose(&p(1, &[1], &["mutex_unlock"])).is_err());
        assert!(s.choose(&p(1, &[0], &["mutex_lock"])).is_err());
        assert!(s.choose(&p(2, &[0], &["join"])).is_err());
        assert_eq!(s.begin_execution(1), None);
    }
}
