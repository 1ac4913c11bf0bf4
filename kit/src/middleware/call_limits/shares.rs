//! What a tool-call limiter shares with the copies its subagents run under: how many calls
//! each subagent run may still make (what the parent had left when its `task` call started),
//! and the calls subagents made that the parent has not counted yet. A limit then holds across
//! the whole tree of an agent's work, as a guardrail must: delegating through `task` does not
//! walk around it.

use std::collections::HashMap;
use std::sync::Mutex;

/// One subagent run's share: the calls it may make, and the calls it made.
#[derive(Debug, Clone, Copy)]
struct Share {
    allowed: u64,
    made: u64,
}

/// The most runs whose subagents' calls wait to be counted.
const MAX_UNCOUNTED: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct Shares {
    /// By the run id of the `task` call that started the subagent run.
    open: Mutex<HashMap<String, Share>>,
    /// By the parent's invocation id: calls its subagents made, not yet in its counts.
    uncounted: Mutex<HashMap<String, u64>>,
}

impl Shares {
    /// A subagent run is about to start with `allowed` calls; its share closes when the
    /// returned guard drops, and what it made waits for the parent run `invocation` to count.
    pub(super) fn open(&self, task_run: &str, invocation: &str, allowed: u64) -> Open<'_> {
        if let Ok(mut open) = self.open.lock() {
            open.insert(task_run.to_string(), Share { allowed, made: 0 });
        }
        Open {
            shares: self,
            task_run: task_run.to_string(),
            invocation: invocation.to_string(),
        }
    }

    /// Takes `wanted` calls from the share of the subagent run started by `task_run`, as far
    /// as it allows: how many it may make. All of them when there is no such share.
    pub(super) fn take(&self, task_run: &str, wanted: u64) -> u64 {
        let Ok(mut open) = self.open.lock() else {
            return 0;
        };
        match open.get_mut(task_run) {
            Some(share) => {
                let granted = wanted.min(share.allowed.saturating_sub(share.made));
                share.made = share.made.saturating_add(granted);
                granted
            }
            None => wanted,
        }
    }

    /// The calls subagents of the run `invocation` made since it last counted, left to count.
    pub(super) fn peek_uncounted(&self, invocation: &str) -> u64 {
        self.uncounted
            .lock()
            .ok()
            .and_then(|u| u.get(invocation).copied())
            .unwrap_or(0)
    }

    /// The calls subagents of the run `invocation` made since it last counted; forgotten here.
    pub(super) fn uncounted(&self, invocation: &str) -> u64 {
        self.uncounted
            .lock()
            .ok()
            .and_then(|mut u| u.remove(invocation))
            .unwrap_or(0)
    }
}

/// An open share; closed on drop (also when the `task` call is cancelled).
pub(super) struct Open<'a> {
    shares: &'a Shares,
    task_run: String,
    invocation: String,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let made = self
            .shares
            .open
            .lock()
            .ok()
            .and_then(|mut open| open.remove(&self.task_run))
            .map_or(0, |s| s.made);
        if made > 0
            && let Ok(mut uncounted) = self.shares.uncounted.lock()
        {
            // A run that ended before its next answer never counts its entry: the map is kept
            // from growing without bound by many such runs.
            if uncounted.len() >= MAX_UNCOUNTED {
                uncounted.clear();
            }
            let n = uncounted
                .entry(std::mem::take(&mut self.invocation))
                .or_insert(0);
            *n = n.saturating_add(made);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_grants_what_is_left_and_reports_what_was_made() {
        let shares = Shares::default();
        {
            let _open = shares.open("task-1", "run-1", 3);
            assert_eq!(shares.take("task-1", 2), 2);
            assert_eq!(shares.take("task-1", 2), 1, "one was left");
            assert_eq!(shares.take("task-1", 1), 0);
            // Another task's run, or none: not limited here.
            assert_eq!(shares.take("task-2", 5), 5);
            assert_eq!(
                shares.uncounted("run-1"),
                0,
                "counted once the share closes"
            );
        }
        assert_eq!(shares.uncounted("run-1"), 3);
        assert_eq!(shares.uncounted("run-1"), 0, "counted once");
        assert_eq!(shares.take("task-1", 4), 4, "a closed share limits nothing");
    }
}
