//! What a tool-call limiter shares with the copies its subagents run under: how many calls
//! the subagent runs of one parent run may still make together (what the parent had left when
//! the first of them started), and the calls subagents made that the parent has not counted
//! yet. A limit then holds across the whole tree of an agent's work, as a guardrail must:
//! delegating through `task`, in parallel or nested, does not walk around it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most parent runs or threads whose subagents' calls wait to be counted.
const MAX_UNCOUNTED: usize = 4096;

/// One subagent run's share: the pool it draws from, what it made, and the share its own
/// parent run holds in the limiter above (a nested subagent draws from both).
#[derive(Debug)]
struct Share {
    pool: String,
    made: u64,
    upstream: Option<Upstream>,
}

/// A share in another limiter's [`Shares`]: the parent's, for a subagent's own subagents.
#[derive(Debug, Clone)]
pub(super) struct Upstream {
    pub(super) shares: Arc<Shares>,
    pub(super) task_run: String,
}

/// What the subagent runs of one parent run may still call, together.
#[derive(Debug)]
struct Pool {
    left: u64,
    open: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// By the run id of the `task` call that started the subagent run.
    open: HashMap<String, Share>,
    /// By the parent run's invocation id.
    pools: HashMap<String, Pool>,
}

#[derive(Debug, Default)]
pub(super) struct Shares {
    inner: Mutex<Inner>,
    /// By the parent's thread (or its run, without one): calls its subagents made, not yet in
    /// its counts. By thread, so calls made before a pause count after the resume.
    uncounted: Mutex<HashMap<String, u64>>,
}

impl Shares {
    /// A subagent run (started by the `task` call whose run is `task_run`, in the parent run
    /// `invocation` of `counted_in`) is about to start. The parent's subagent runs draw from
    /// one pool of `allowed` calls, made when the first of them starts; `upstream` is the
    /// share the parent itself draws from, when it is a subagent. The share closes when the
    /// returned guard drops; what it made then waits for `counted_in` to count it.
    pub(super) fn open(
        &self,
        task_run: &str,
        invocation: &str,
        counted_in: &str,
        allowed: u64,
        upstream: Option<Upstream>,
    ) -> Open<'_> {
        if let Ok(mut inner) = self.inner.lock() {
            let pool = inner.pools.entry(invocation.to_string()).or_insert(Pool {
                left: allowed,
                open: 0,
            });
            pool.open += 1;
            inner.open.insert(
                task_run.to_string(),
                Share {
                    pool: invocation.to_string(),
                    made: 0,
                    upstream,
                },
            );
        }
        Open {
            shares: self,
            task_run: task_run.to_string(),
            counted_in: counted_in.to_string(),
        }
    }

    /// One call of the subagent run started by `task_run`, if its pool (and every pool above
    /// it) has one left. A run without a share here is not limited here.
    pub(super) fn take(&self, task_run: &str) -> bool {
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        let Inner { open, pools } = &mut *inner;
        let Some(share) = open.get_mut(task_run) else {
            return true;
        };
        let Some(pool) = pools.get_mut(&share.pool) else {
            return false;
        };
        if pool.left == 0 {
            return false;
        }
        // The limiter above is asked while this one is held: locks are taken child first,
        // parent next, never the other way.
        if let Some(up) = &share.upstream
            && !up.shares.take(&up.task_run)
        {
            return false;
        }
        pool.left -= 1;
        share.made = share.made.saturating_add(1);
        true
    }

    /// The calls subagents made for `counted_in` since it last counted, left to count.
    pub(super) fn peek_uncounted(&self, counted_in: &str) -> u64 {
        self.uncounted
            .lock()
            .ok()
            .and_then(|u| u.get(counted_in).copied())
            .unwrap_or(0)
    }

    /// The calls subagents made for `counted_in` since it last counted; forgotten here.
    pub(super) fn uncounted(&self, counted_in: &str) -> u64 {
        self.uncounted
            .lock()
            .ok()
            .and_then(|mut u| u.remove(counted_in))
            .unwrap_or(0)
    }

    fn close(&self, task_run: &str, counted_in: &mut String) {
        let made = self.inner.lock().ok().and_then(|mut inner| {
            let share = inner.open.remove(task_run)?;
            if let Some(pool) = inner.pools.get_mut(&share.pool) {
                pool.open -= 1;
                if pool.open == 0 {
                    inner.pools.remove(&share.pool);
                }
            }
            Some(share.made)
        });
        let Some(made) = made.filter(|&m| m > 0) else {
            return;
        };
        if let Ok(mut uncounted) = self.uncounted.lock() {
            // A parent that never answers again (it failed) never counts its entry: one is
            // let go for each new one past the bound.
            if uncounted.len() >= MAX_UNCOUNTED
                && !uncounted.contains_key(counted_in.as_str())
                && let Some(old) = uncounted.keys().next().cloned()
            {
                uncounted.remove(&old);
            }
            let n = uncounted.entry(std::mem::take(counted_in)).or_insert(0);
            *n = n.saturating_add(made);
        }
    }
}

/// An open share; closed on drop (also when the `task` call is cancelled or paused).
pub(super) struct Open<'a> {
    shares: &'a Shares,
    task_run: String,
    counted_in: String,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.shares.close(&self.task_run, &mut self.counted_in);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_shares_draw_from_one_pool_and_report_what_they_made() {
        let shares = Shares::default();
        {
            let _a = shares.open("task-a", "run-1", "thread-1", 3, None);
            // A second task call of the same run, started later: the same pool.
            let _b = shares.open("task-b", "run-1", "thread-1", 3, None);
            assert!(shares.take("task-a"));
            assert!(shares.take("task-b"));
            assert!(shares.take("task-a"));
            assert!(!shares.take("task-b"), "three in all");
            // A run without a share here is not limited here.
            assert!(shares.take("task-z"));
            assert_eq!(shares.uncounted("thread-1"), 0, "counted once closed");
        }
        assert_eq!(shares.peek_uncounted("thread-1"), 3);
        assert_eq!(shares.uncounted("thread-1"), 3);
        assert_eq!(shares.uncounted("thread-1"), 0, "counted once");
        // The pool went with its last share: a later task call gets a new one.
        let _c = shares.open("task-c", "run-1", "thread-1", 1, None);
        assert!(shares.take("task-c"));
        assert!(!shares.take("task-c"));
    }

    #[test]
    fn a_nested_share_draws_from_the_share_above() {
        let parent = Arc::new(Shares::default());
        let child = Shares::default();
        let _in_parent = parent.open("task-1", "run-1", "thread-1", 2, None);
        let upstream = Upstream {
            shares: parent.clone(),
            task_run: "task-1".into(),
        };
        // The child had 5 left by its own count, the parent 2: the parent's bound holds.
        let _in_child = child.open("task-2", "run-2", "thread-2", 5, Some(upstream));
        assert!(child.take("task-2"));
        assert!(parent.take("task-1"), "the child itself makes one");
        assert!(!child.take("task-2"), "the parent's pool is spent");
        assert!(!parent.take("task-1"));
    }
}
