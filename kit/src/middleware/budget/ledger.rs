//! What a parent run shares with the subagent runs of its `task` calls: how much each may
//! spend (what the parent had left when the call started), and what each spent, so the
//! parent's budget counts its subagents.

use std::collections::HashMap;
use std::sync::Mutex;

use super::limits::{Budget, Spent};

/// One subagent run's share.
#[derive(Debug, Default)]
struct Entry {
    cap: Budget,
    spent: Spent,
}

/// Subagent runs by the run id of the `task` call that started each.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Ledger {
    /// A subagent run is about to start with at most `cap`. The share is closed when the
    /// returned guard is (also when the call is cancelled and its future dropped).
    pub(crate) fn open(&self, key: String, cap: Budget) -> Share<'_> {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(
                key.clone(),
                Entry {
                    cap,
                    spent: Spent::default(),
                },
            );
        }
        Share { ledger: self, key }
    }

    /// The cap of the subagent run `key`, if its parent opened it.
    pub(crate) fn cap(&self, key: &str) -> Option<Budget> {
        self.entries.lock().ok()?.get(key).map(|e| e.cap)
    }

    /// What the subagent run `key` has spent so far.
    pub(crate) fn record(&self, key: &str, spent: &Spent) {
        if let Ok(mut entries) = self.entries.lock()
            && let Some(entry) = entries.get_mut(key)
        {
            entry.spent = spent.clone();
        }
    }

    fn close(&self, key: &str) -> Option<Spent> {
        self.entries.lock().ok()?.remove(key).map(|e| e.spent)
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
