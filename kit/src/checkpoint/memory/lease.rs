//! Thread leases and rollbacks of the in-memory checkpointer (one process, so a mutex is the
//! transaction).

use std::cmp::Ordering;
use std::time::Duration;

use super::{MemoryCheckpointer, NsData, lock};
use crate::checkpoint::CheckpointError;
use crate::checkpoint::lease::{self, LeaseOp, LeaseState, ThreadActivity, now_ms};

impl MemoryCheckpointer {
    pub(super) fn lease_locked(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> LeaseState {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let rows = leases.entry(thread_id.to_string()).or_default();
        let now = now_ms();
        let state = lease::decide(rows, run_id, op, now, ttl, crate::ids::time_ordered);
        if rows.is_empty() {
            leases.remove(thread_id);
        }
        state
    }

    pub(super) fn activity(&self, thread_id: &str) -> Option<ThreadActivity> {
        let leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        leases
            .get(thread_id)
            .and_then(|rows| ThreadActivity::of(rows, now_ms()))
    }

    pub(super) fn rollback_locked(
        &self,
        thread_id: &str,
        marker: &str,
    ) -> Result<u64, CheckpointError> {
        let Some(thread) = self.thread(thread_id) else {
            return Ok(0);
        };
        let mut data = lock(&thread);
        let mut deleted = 0u64;
        for ns in data.namespaces.values_mut() {
            deleted += ns.truncate_after(marker);
        }
        data.namespaces.retain(|_, ns| !ns.checkpoints.is_empty());
        Ok(deleted)
    }
}

impl NsData {
    /// Removes the checkpoints after `marker` with what they wrote; returns how many.
    fn truncate_after(&mut self, marker: &str) -> u64 {
        // Checkpoints before the marker never read a blob written after it.
        let keep = self
            .checkpoints
            .partition_point(|s| s.id.cmp_str(marker) != Ordering::Greater);
        let deleted = self.checkpoints.len() - keep;
        self.checkpoints.truncate(keep);
        self.orphan_blobs.retain(|version, _| &**version <= marker);
        self.writes
            .retain(|checkpoint, _| checkpoint.as_str() <= marker);
        self.head = self.checkpoints.last().map(|s| s.id.to_string());
        deleted as u64
    }
}
