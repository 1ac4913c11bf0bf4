//! Pruning one namespace of an in-memory thread, and measuring what a thread holds.
//!
//! A checkpoint packs the blobs it wrote, so removing a checkpoint would remove them too; a
//! blob a kept checkpoint still reads (an unchanged channel's value, or a link of a delta
//! chain) moves to the namespace's `orphan_blobs` first.

use super::NsData;
use crate::checkpoint::retention::{HeldRow, LooseBlob, plan_held};
use crate::checkpoint::{ChannelBlob, CheckpointError, PruneReport, PruneStrategy};

impl NsData {
    /// Removes what `strategy` does not keep (see [`crate::checkpoint::retention`]).
    pub(super) fn prune(
        &mut self,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        let mut rows = Vec::with_capacity(self.checkpoints.len());
        for stored in &self.checkpoints {
            let fields = stored.unpack()?;
            let mut versions = Vec::with_capacity(fields.channel_versions.len());
            for (channel, version) in fields.channel_versions {
                versions.push((self.channel_name(channel)?.to_string(), version));
            }
            let mut blobs = Vec::new();
            for blob in stored.blobs()? {
                let channel = self.channel_name(blob.channel)?.to_string();
                blobs.push((channel, blob.kind, blob.prev_version));
            }
            rows.push(HeldRow {
                id: stored.id.to_string(),
                parent_id: fields.parent_id,
                versions,
                blobs,
            });
        }
        let loose: Vec<LooseBlob> = self
            .orphan_blobs
            .values()
            .flatten()
            .map(|b| LooseBlob {
                channel: b.channel.clone(),
                version: b.version.clone(),
                kind: b.kind,
                prev_version: b.prev_version.clone(),
            })
            .collect();
        let plan = plan_held(self.head.as_deref(), &rows, &loose, strategy)?;

        // Blobs that outlive their checkpoint, copied out before it goes.
        let mut apart = Vec::with_capacity(plan.keep_apart.len());
        for (i, channel) in &plan.keep_apart {
            let stored = &self.checkpoints[*i];
            let blob = stored
                .blobs()?
                .into_iter()
                .find(|b| self.channel_name(b.channel).is_ok_and(|c| c == channel))
                .ok_or_else(|| stored.corrupt())?;
            apart.push(ChannelBlob {
                channel: channel.clone(),
                version: rows[*i].id.clone(),
                prev_version: blob.prev_version,
                kind: blob.kind,
                data: blob.data.to_vec(),
            });
        }
        let mut report = PruneReport {
            checkpoints: plan.removed.len() as u64,
            blobs: plan.blobs_removed,
            writes: 0,
        };
        for &i in &plan.removed {
            if let Some(writes) = self.writes.remove(&rows[i].id) {
                report.writes += writes.len() as u64;
            }
        }
        let removed: std::collections::HashSet<usize> = plan.removed.into_iter().collect();
        let mut at = 0;
        self.checkpoints.retain(|_| {
            at += 1;
            !removed.contains(&(at - 1))
        });
        self.checkpoints.shrink_to_fit();
        // A loose blob is known by its (channel, version).
        let dropped: std::collections::HashSet<(&str, &str)> = plan
            .drop_loose
            .iter()
            .map(|&i| (loose[i].channel.as_str(), loose[i].version.as_str()))
            .collect();
        for blobs in self.orphan_blobs.values_mut() {
            blobs.retain(|b| !dropped.contains(&(b.channel.as_str(), b.version.as_str())));
        }
        self.orphan_blobs.retain(|_, blobs| !blobs.is_empty());
        for blob in apart {
            self.orphan_blobs
                .entry(blob.version.as_str().into())
                .or_default()
                .push(blob);
        }
        self.writes.shrink_to_fit();
        Ok(report)
    }

    /// Bytes of checkpoint data held: packed checkpoints, blobs kept apart from them, and
    /// pending writes (as JSON).
    pub(super) fn stored_bytes(&self) -> usize {
        let checkpoints: usize = self.checkpoints.iter().map(|s| s.packed.len()).sum();
        let orphans: usize = self
            .orphan_blobs
            .values()
            .flatten()
            .map(|b| b.data.len())
            .sum();
        let writes: usize = self
            .writes
            .values()
            .flatten()
            .map(|w| w.task_id.len() + w.channel.len() + w.value.to_string().len())
            .sum();
        checkpoints + orphans + writes
    }
}
