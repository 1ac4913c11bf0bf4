//! Persisting a step: channel deltas or full values, and the durability modes.

use std::sync::Arc;

use super::Exec;
use super::codec::{self, TaskOut};
use crate::checkpoint::{BlobKind, BlobRef, CheckpointRef, CheckpointSource, CheckpointWrite};
use crate::event::{EventData, EventKind};
use crate::graph::error::GraphError;
use crate::graph::options::Durability;
use crate::ids;
use crate::state::{ChannelChange, State};

/// Deltas are written until they outweigh the last full value or this many bytes, whichever is
/// larger; then a full value is written. Keeps per-step writes amortised O(1) and reads short.
const MIN_SNAPSHOT_BYTES: u64 = 16 * 1024;

/// How much a channel's chain holds since its last full value: what decides between a delta
/// and a new full value.
#[derive(Clone, Copy, Default)]
pub(super) struct ChannelStats {
    /// The size of the last full value.
    pub(super) full_bytes: u64,
    /// The deltas written since.
    pub(super) delta_bytes: u64,
}

/// The checkpoint of a step, made but not yet written: its id, and its blobs' data. Its other
/// parts are the executor's own (links, versions, body in [`WriteScratch`]); a back-end that
/// writes at once borrows them all ([`Exec::borrowed`]).
pub(super) struct Prepared {
    id: String,
    blobs: Vec<PreparedBlob>,
}

struct PreparedBlob {
    /// Index into [`State::channels`].
    channel: usize,
    kind: BlobKind,
    data: Vec<u8>,
    /// The version a delta extends: an index into [`WriteScratch::prev`].
    prev: Option<usize>,
}

/// Buffers a run keeps from step to step for its checkpoints' parts, so a write allocates only
/// its id and its blobs' data.
#[derive(Default)]
pub(super) struct WriteScratch {
    body: Vec<u8>,
    created_at: String,
    /// The versions this step's deltas extend (taken before the step's own replaces them).
    prev: Vec<String>,
}

/// One change per channel. A channel changed twice before a checkpoint (a new thread's
/// initial values then its input, a resume's update then the step) is written in full: two
/// blobs of one channel under one version would read back as one of them (and PostgreSQL
/// refuses to write both), and two deltas cannot always be joined into one (a dynamic state's
/// delta is a step, in which an overwrite beats the step's other writes).
fn merge_changes(changes: &mut Vec<ChannelChange>, channels: usize) {
    if changes.len() < 2 {
        return;
    }
    let mut at: Vec<Option<usize>> = vec![None; channels];
    let mut merged: Vec<ChannelChange> = Vec::with_capacity(changes.len());
    for change in changes.drain(..) {
        match at.get(change.channel).copied().flatten() {
            Some(i) => merged[i].delta = None,
            None => {
                if let Some(slot) = at.get_mut(change.channel) {
                    *slot = Some(merged.len());
                }
                merged.push(change);
            }
        }
    }
    *changes = merged;
}

impl<S: State> Exec<S> {
    /// Makes the current step's checkpoint from the recorded channel changes (every channel in
    /// full with `full_all`): its id, the blobs, the body and the time; moves every changed
    /// channel's version to the new id.
    fn prepare(&mut self, full_all: bool) -> Result<Prepared, GraphError> {
        let (id, millis) = ids::time_ordered_with_millis();
        let channels = S::channels();
        let mut blobs = Vec::with_capacity(self.changes.len());
        let mut changes = std::mem::take(&mut self.changes);
        if full_all {
            changes = (0..channels.len())
                .map(|channel| ChannelChange {
                    channel,
                    delta: None,
                })
                .collect();
        }
        merge_changes(&mut changes, channels.len());
        let mut prevs = 0;
        for change in changes.drain(..) {
            let name = channels[change.channel].name;
            let stats = &mut self.stats[change.channel];
            let threshold = stats.full_bytes.max(MIN_SNAPSHOT_BYTES);
            let blob = match change.delta {
                Some(delta) if stats.delta_bytes + delta.len() as u64 <= threshold => {
                    stats.delta_bytes += delta.len() as u64;
                    let prev = self.versions.get(name).map(|version| {
                        let slot = &mut self.scratch.prev;
                        match slot.get_mut(prevs) {
                            Some(kept) => kept.clone_from(version),
                            None => slot.push(version.clone()),
                        }
                        prevs += 1;
                        prevs - 1
                    });
                    PreparedBlob {
                        channel: change.channel,
                        kind: BlobKind::Delta,
                        data: delta,
                        prev,
                    }
                }
                _ => {
                    let data = self.state.save_channel(change.channel).map_err(|source| {
                        GraphError::State {
                            step: self.step,
                            source,
                        }
                    })?;
                    *stats = ChannelStats {
                        full_bytes: data.len() as u64,
                        delta_bytes: 0,
                    };
                    PreparedBlob {
                        channel: change.channel,
                        kind: BlobKind::Full,
                        data,
                        prev: None,
                    }
                }
            };
            // An existing entry takes the new id into its own buffer (ids have one length). The
            // map is copied only if the last write still holds it (one in flight).
            let versions = Arc::make_mut(&mut self.versions);
            match versions.get_mut(name) {
                Some(version) => version.clone_from(&id),
                None => {
                    versions.insert(name.to_string(), id.clone());
                }
            }
            blobs.push(blob);
        }
        self.changes = changes;
        let nodes = &self.graph.inner.nodes;
        codec::write_body_into(
            &mut self.scratch.body,
            self.next.iter().map(|t| TaskOut {
                node: &nodes[t.node].name,
                send: t.send_index,
                arg: t.arg.as_ref(),
            }),
            &self.joins,
        );
        ids::rfc3339_millis_cached_into(millis, &mut self.scratch.created_at);
        Ok(Prepared { id, blobs })
    }

    /// The blobs of a prepared checkpoint, by reference.
    fn blob_refs<'a>(&'a self, prepared: &'a Prepared) -> Vec<BlobRef<'a>> {
        let channels = S::channels();
        prepared
            .blobs
            .iter()
            .map(|b| BlobRef {
                channel: channels[b.channel].name,
                prev_version: b
                    .prev
                    .and_then(|i| self.scratch.prev.get(i))
                    .map(String::as_str),
                kind: b.kind,
                data: &b.data,
            })
            .collect()
    }

    /// A prepared checkpoint with the executor's parts, by reference.
    fn borrowed<'a>(
        &'a self,
        prepared: &'a Prepared,
        blobs: &'a [BlobRef<'a>],
        source: CheckpointSource,
    ) -> CheckpointRef<'a> {
        CheckpointRef {
            thread_id: self.persist.as_ref().map_or("", |(_, t)| t.as_str()),
            ns: &self.ns,
            id: &prepared.id,
            parent_id: self.parent.as_deref(),
            step: self.step,
            source,
            created_at: &self.scratch.created_at,
            metadata: &self.run.options.metadata,
            channel_versions: &self.versions,
            blobs,
            body: &self.scratch.body,
            expected_head: self.head.as_deref(),
        }
    }

    /// The names of the nodes due next (an owned write lists them).
    fn next_names(&self) -> Vec<String> {
        let nodes = &self.graph.inner.nodes;
        self.next
            .iter()
            .map(|t| nodes[t.node].name.to_string())
            .collect()
    }

    /// The checkpoint just written is the thread's head and the next one's parent (their
    /// buffers reused).
    fn advance(&mut self, id: String) {
        match &mut self.parent {
            Some(parent) => parent.clone_from(&id),
            None => self.parent = Some(id.clone()),
        }
        self.head = Some(id);
    }

    /// Builds the checkpoint for the current step as an owned write (exit durability's buffer,
    /// forks, back-ends that do not write at once).
    pub(super) fn build_write(
        &mut self,
        source: CheckpointSource,
        full_all: bool,
    ) -> Result<CheckpointWrite, GraphError> {
        let prepared = self.prepare(full_all)?;
        let write = {
            let blobs = self.blob_refs(&prepared);
            let mut write = self
                .borrowed(&prepared, &blobs, source)
                .owned_with_next(self.next_names());
            if self.persist.is_none() {
                write.expected_head = None;
            }
            write
        };
        self.advance(prepared.id);
        Ok(write)
    }

    /// Takes a checkpoint according to the durability mode. A back-end that writes at once
    /// (in memory) is handed the step's checkpoint by reference; any other gets an owned write.
    pub(super) async fn save(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        let Some(cp) = self.persist.as_ref().map(|(cp, _)| cp.clone()) else {
            self.changes.clear();
            return Ok(());
        };
        if self.run.options.durability == Durability::Exit {
            let write = self.build_write(source, false)?;
            return self.store(write).await;
        }
        // A write still in flight goes first: checkpoints land in order.
        self.await_inflight().await?;
        let prepared = self.prepare(false)?;
        let owned = {
            let blobs = self.blob_refs(&prepared);
            let borrowed = self.borrowed(&prepared, &blobs, source);
            match cp.put_now(&borrowed) {
                Some(written) => {
                    written?;
                    None
                }
                None => Some(borrowed.owned_with_next(self.next_names())),
            }
        };
        // Streamed runs report each checkpoint once it is durable, when asked to.
        let written = self
            .events_of(EventKind::Checkpoint)
            .map(|_| (prepared.id.clone(), self.step));
        self.advance(prepared.id);
        match owned {
            Some(write) => self.store(write).await,
            None => {
                self.durable.extend(written);
                Ok(())
            }
        }
    }

    /// Writes a checkpoint holding every channel in full (forks).
    pub(super) async fn persist_all(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        if self.persist.is_none() {
            return Ok(());
        }
        let write = self.build_write(source, true)?;
        self.store(write).await?;
        self.pending.clear();
        Ok(())
    }

    pub(super) async fn store(&mut self, write: CheckpointWrite) -> Result<(), GraphError> {
        // Only the checkpointer: cloning the thread id too cost an allocation every step.
        let Some(cp) = self.persist.as_ref().map(|(cp, _)| cp.clone()) else {
            return Ok(());
        };
        // Streamed runs report each checkpoint once it is durable, when asked to.
        let written = self
            .events_of(EventKind::Checkpoint)
            .map(|_| (write.meta.id.clone(), write.meta.step));
        match self.run.options.durability {
            Durability::Sync => {
                cp.put(write).await?;
                self.durable.extend(written);
            }
            Durability::Async => {
                self.await_inflight().await?;
                let mut put: futures::future::BoxFuture<'static, _> =
                    Box::pin(async move { cp.put(write).await });
                // In-memory writes finish at the first poll; only real I/O is left in flight.
                match futures::poll!(&mut put) {
                    std::task::Poll::Ready(result) => {
                        result?;
                        self.durable.extend(written);
                    }
                    std::task::Poll::Pending => {
                        self.inflight = Some(put);
                        self.inflight_checkpoint = written;
                    }
                }
            }
            Durability::Exit => {
                match &mut self.exit_buffer {
                    None => self.exit_buffer = Some(Box::new(write)),
                    Some(buffer) => {
                        buffer.blobs.extend(write.blobs);
                        let parent = buffer.meta.parent_id.take();
                        buffer.meta = write.meta;
                        buffer.meta.parent_id = parent;
                        buffer.channel_versions = write.channel_versions;
                        buffer.body = write.body;
                    }
                }
                // The buffer becomes one checkpoint, under the last id, when the run ends.
                if written.is_some() {
                    self.exit_checkpoint = written;
                }
            }
        }
        Ok(())
    }

    pub(super) async fn await_inflight(&mut self) -> Result<(), GraphError> {
        if let Some(put) = self.inflight.take() {
            put.await?;
            self.durable.extend(self.inflight_checkpoint.take());
        }
        Ok(())
    }

    /// Sends a `checkpoint` event for each checkpoint that became durable since the last call.
    pub(super) async fn send_checkpoint_events(&mut self) {
        if self.durable.is_empty() {
            return;
        }
        let durable = std::mem::take(&mut self.durable);
        let Some(sink) = self.events_of(EventKind::Checkpoint) else {
            return;
        };
        for (checkpoint_id, step) in durable {
            let data = EventData::Checkpoint {
                checkpoint_id,
                step,
            };
            let event = self.event(data);
            sink.send(event).await;
        }
    }

    /// Makes every checkpoint taken so far durable.
    pub(super) async fn flush(&mut self) -> Result<(), GraphError> {
        self.await_inflight().await?;
        if let Some(write) = self.exit_buffer.take()
            && let Some((cp, _)) = &self.persist
        {
            cp.put(*write).await?;
            self.durable.extend(self.exit_checkpoint.take());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_changed_twice_is_written_once_in_full() {
        let change = |channel: usize, delta: Option<&str>| ChannelChange {
            channel,
            delta: delta.map(|d| d.as_bytes().to_vec()),
        };
        let mut changes = vec![
            change(0, Some("[1]")),
            change(1, Some("[\"a\"]")),
            change(0, Some("[2]")),
            change(2, None),
        ];
        merge_changes(&mut changes, 3);
        assert_eq!(
            changes,
            [change(0, None), change(1, Some("[\"a\"]")), change(2, None)]
        );
        // Each channel once already: left as it is.
        let mut once = vec![change(1, Some("[1]")), change(0, Some("[2]"))];
        merge_changes(&mut once, 2);
        assert_eq!(once, [change(1, Some("[1]")), change(0, Some("[2]"))]);
    }
}
