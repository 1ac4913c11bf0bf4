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

/// Subagent runs by their namespace (`…|task:<name>:<call id>`).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Ledger {
    /// A subagent run is about to start with at most `cap`.
    pub(crate) fn open(&self, key: String, cap: Budget) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(
                key,
                Entry {
                    cap,
                    spent: Spent::default(),
                },
            );
        }
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

    /// The subagent run `key` ended: what it spent.
    pub(crate) fn close(&self, key: &str) -> Option<Spent> {
        self.entries.lock().ok()?.remove(key).map(|e| e.spent)
    }
}

/// The namespace key of the subagent run of `task` call `call_id` to `subagent`, made from
/// the parent's namespace (as the subagent middleware names it).
pub(crate) fn child_key(parent: &[String], subagent: &str, call_id: &str) -> String {
    let mut segments = parent.to_vec();
    segments.push(format!("task:{subagent}:{call_id}"));
    segments.join("|")
}
