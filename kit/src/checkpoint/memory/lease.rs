//! Thread leases and rollbacks of the in-memory checkpointer (one process, so a mutex is the
//! transaction).

use std::cmp::Ordering;
use std::time::Duration;

use super::{MemoryCheckpointer, NsData, lock};
use crate::checkpoint::CheckpointError;
use crate::checkpoint::lease::{self, LeaseOp, LeaseState, ThreadActivity, now_ms};

impl MemoryCheckpointer {
    /// One lease operation, under the lease map's lock; a rollback it hands over runs under
    /// that lock too (lock order: leases, then the thread).
    pub(super) fn lease_locked(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> Result<LeaseState, CheckpointError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let head = self
            .thread(thread_id)
            .and_then(|t| lock(&t).namespaces.get("").and_then(|ns| ns.head.clone()));
        let rows = leases.entry(thread_id.to_string()).or_default();
        let state = lease::decide(rows, run_id, op, now_ms(), ttl, || {
            lease::marker_after(head.as_deref())
        });
        if rows.is_empty() {
            leases.remove(thread_id);
        }
        if let LeaseState::Running {
            rollback_from: Some(marker),
        } = &state
        {
            self.rollback_locked(thread_id, marker)?;
        }
        Ok(state)
    }

    /// Drops the lease rows of deleted threads (a run still holding one stops at its next
    /// renewal).
    pub(super) fn forget_leases(&self, threads: &[String]) {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        for thread in threads {
            leases.remove(thread);
        }
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
        self.set_head(
            self.checkpoints
                .last()
                .map(|s| (s.id.to_string(), s.id.clone())),
        );
        deleted as u64
    }
}
