//! What a parent run shares with the subagent runs of its `task` calls: how much they may
//! spend together (what the parent had left when each call started, less what its siblings of
//! the same run spent meanwhile), and what each spent, so the parent's budget counts its
//! subagents.

use std::collections::HashMap;
use std::sync::Mutex;

use super::limits::{Budget, Spent};

/// One subagent run's share.
#[derive(Debug, Default)]
struct Entry {
    cap: Budget,
    spent: Spent,
    /// The parent run it belongs to: its siblings run in parallel.
    pool: String,
}

/// What the closed subagent runs of one parent run spent, while others of it still run.
#[derive(Debug, Default)]
struct Pool {
    closed: Spent,
    open: usize,
}

#[derive(Debug, Default)]
struct Entries {
    /// By the run id of the `task` call that started each.
    open: HashMap<String, Entry>,
    /// By the parent run's invocation id.
    pools: HashMap<String, Pool>,
}

/// Subagent runs by the run id of the `task` call that started each.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: Mutex<Entries>,
}

impl Ledger {
    /// A subagent run of the parent run `pool` is about to start with at most `cap`. The share
    /// is closed when the returned guard is (also when the call is cancelled and its future
    /// dropped).
    pub(crate) fn open(&self, key: String, pool: &str, cap: Budget) -> Share<'_> {
        if let Ok(mut entries) = self.entries.lock() {
            entries.pools.entry(pool.to_string()).or_default().open += 1;
            entries.open.insert(
                key.clone(),
                Entry {
                    cap,
                    spent: Spent::default(),
                    pool: pool.to_string(),
                },
            );
        }
        Share { ledger: self, key }
    }

    /// The cap of the subagent run `key`, if its parent opened it: what the parent had left
    /// when it started, less what its siblings (running in parallel, or ended since) spent.
    pub(crate) fn cap(&self, key: &str) -> Option<Budget> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.open.get(key)?;
        let mut siblings = entries
            .pools
            .get(&entry.pool)
            .map(|p| p.closed.clone())
            .unwrap_or_default();
        for (other, e) in &entries.open {
            if other != key && e.pool == entry.pool {
                siblings.add(&e.spent);
            }
        }
        Some(entry.cap.left_after(&siblings, std::time::Duration::ZERO))
    }

    /// What the subagent run `key` has spent so far.
    pub(crate) fn record(&self, key: &str, spent: &Spent) {
        if let Ok(mut entries) = self.entries.lock()
            && let Some(entry) = entries.open.get_mut(key)
        {
            entry.spent = spent.clone();
        }
    }

    fn close(&self, key: &str) -> Option<Spent> {
        let mut entries = self.entries.lock().ok()?;
        let entry = entries.open.remove(key)?;
        let mut pool_done = false;
        if let Some(pool) = entries.pools.get_mut(&entry.pool) {
            pool.open = pool.open.saturating_sub(1);
            pool.closed.add(&entry.spent);
            pool_done = pool.open == 0;
        }
        if pool_done {
            entries.pools.remove(&entry.pool);
        }
        Some(entry.spent)
    }
}

/// An open share of a [`Ledger`]; closed on drop.
pub(crate) struct Share<'a> {
    ledger: &'a Ledger,
    key: String,
}

impl Share<'_> {
    /// The subagent run ended: what it spent.
    pub(crate) fn close(self) -> Option<Spent> {
        self.ledger.close(&self.key)
    }
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        self.ledger.close(&self.key);
    }
}
