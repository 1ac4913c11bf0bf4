//! Pruning one namespace of an in-memory thread, and measuring what a thread holds.
//!
//! A checkpoint packs the blobs it wrote, so removing a checkpoint would remove them too; a
//! blob a kept checkpoint still reads (an unchanged channel's value, or a link of a delta
//! chain) moves to the namespace's `orphan_blobs` first.

use std::collections::HashMap;

use super::{NsData, Stored};
use crate::checkpoint::retention::{BlobLink, kept_checkpoints, reachable_blobs};
use crate::checkpoint::{BlobKind, ChannelBlob, CheckpointError, PruneReport, PruneStrategy};

/// A blob as pruning sees it: where it is and how it links, without its data.
struct BlobRow {
    channel: String,
    version: String,
    kind: BlobKind,
    prev_version: Option<String>,
}

/// A checkpoint as pruning sees it.
struct CheckpointRow {
    id: String,
    parent_id: Option<String>,
    /// (channel, version) it reads.
    versions: Vec<(String, String)>,
}

impl NsData {
    /// Removes what `strategy` does not keep (see [`crate::checkpoint::retention`]).
    pub(super) fn prune(
        &mut self,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        let mut rows = Vec::with_capacity(self.checkpoints.len());
        let mut blobs = Vec::new();
        for stored in &self.checkpoints {
            let id = stored.id.to_string();
            let fields = stored.unpack()?;
            let mut versions = Vec::with_capacity(fields.channel_versions.len());
            for (channel, version) in fields.channel_versions {
                versions.push((self.channel_name(channel)?.to_string(), version));
            }
            for blob in stored.blobs()? {
                blobs.push(BlobRow {
                    channel: self.channel_name(blob.channel)?.to_string(),
                    version: id.clone(),
                    kind: blob.kind,
                    prev_version: blob.prev_version,
                });
            }
            rows.push(CheckpointRow {
                id,
                parent_id: fields.parent_id,
                versions,
            });
        }
        for orphan in self.orphan_blobs.values().flatten() {
            blobs.push(BlobRow {
                channel: orphan.channel.clone(),
                version: orphan.version.clone(),
                kind: orphan.kind,
                prev_version: orphan.prev_version.clone(),
            });
        }

        let parent_of = rows
            .iter()
            .map(|r| (r.id.as_str(), r.parent_id.as_deref()))
            .collect();
        let kept = kept_checkpoints(self.head.as_deref(), &parent_of, strategy)?;
        let links: HashMap<(&str, &str), BlobLink<'_>> = blobs
            .iter()
            .map(|b| {
                let link = BlobLink {
                    kind: b.kind,
                    prev_version: b.prev_version.as_deref(),
                };
                ((b.channel.as_str(), b.version.as_str()), link)
            })
            .collect();
        let read = reachable_blobs(
            rows.iter()
                .filter(|r| kept.contains(r.id.as_str()))
                .flat_map(|r| r.versions.iter().map(|(c, v)| (c.as_str(), v.as_str()))),
            |channel, version| links.get(&(channel, version)).copied(),
        );

        let mut report = PruneReport::default();
        let mut moved: Vec<ChannelBlob> = Vec::new();
        let mut remaining = Vec::with_capacity(kept.len());
        for (stored, row) in std::mem::take(&mut self.checkpoints).into_iter().zip(&rows) {
            if kept.contains(row.id.as_str()) {
                remaining.push(stored);
                continue;
            }
            report.checkpoints += 1;
            self.move_read_blobs(&stored, &row.id, &read, &mut moved, &mut report)?;
            if let Some(writes) = self.writes.remove(&row.id) {
                report.writes += writes.len() as u64;
            }
        }
        self.checkpoints = remaining;
        self.checkpoints.shrink_to_fit();
        self.orphan_blobs.retain(|version, blobs| {
            blobs.retain(|b| {
                let keep = read.contains(&(b.channel.as_str(), &**version));
                report.blobs += u64::from(!keep);
                keep
            });
            !blobs.is_empty()
        });
        for blob in moved {
            self.orphan_blobs
                .entry(blob.version.as_str().into())
                .or_default()
                .push(blob);
        }
        self.writes.shrink_to_fit();
        Ok(report)
    }

    /// Copies the blobs of a checkpoint being removed that a kept one still reads into `moved`;
    /// counts the others as removed.
    fn move_read_blobs(
        &self,
        stored: &Stored,
        id: &str,
        read: &std::collections::HashSet<(&str, &str)>,
        moved: &mut Vec<ChannelBlob>,
        report: &mut PruneReport,
    ) -> Result<(), CheckpointError> {
        for blob in stored.blobs()? {
            let channel = self.channel_name(blob.channel)?;
            if read.contains(&(channel, id)) {
                moved.push(ChannelBlob {
                    channel: channel.to_string(),
                    version: id.to_string(),
                    prev_version: blob.prev_version,
                    kind: blob.kind,
                    data: blob.data.to_vec(),
                });
            } else {
                report.blobs += 1;
            }
        }
        Ok(())
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
