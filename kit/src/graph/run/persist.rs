//! Persisting a step: channel deltas or full values, and the durability modes.

use std::sync::Arc;

use serde_json::Value;

use super::Exec;
use super::codec::{self, TaskOut};
use crate::checkpoint::{BlobKind, ChannelBlob, CheckpointMeta, CheckpointSource, CheckpointWrite};
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

impl<S: State> Exec<S> {
    /// Builds the checkpoint for the current step from the recorded channel changes.
    pub(super) fn build_write(
        &mut self,
        source: CheckpointSource,
        full_all: bool,
    ) -> Result<CheckpointWrite, GraphError> {
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
        for change in changes.drain(..) {
            let name = channels[change.channel].name;
            let stats = &mut self.stats[change.channel];
            let threshold = stats.full_bytes.max(MIN_SNAPSHOT_BYTES);
            let blob = match change.delta {
                Some(delta) if stats.delta_bytes + delta.len() as u64 <= threshold => {
                    stats.delta_bytes += delta.len() as u64;
                    ChannelBlob {
                        channel: name.to_string(),
                        version: id.clone(),
                        prev_version: self.versions.get(name).cloned(),
                        kind: BlobKind::Delta,
                        data: delta,
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
                    ChannelBlob {
                        channel: name.to_string(),
                        version: id.clone(),
                        prev_version: None,
                        kind: BlobKind::Full,
                        data,
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
        let body = codec::write_body(
            self.next.iter().map(|t| TaskOut {
                node: &nodes[t.node].name,
                send: t.send_index,
                arg: t.arg.as_ref(),
            }),
            &self.joins,
        );
        let meta = CheckpointMeta {
            id: id.clone(),
            // Moved: this checkpoint becomes the next one's parent below.
            parent_id: self.parent.take(),
            step: self.step,
            source,
            created_at: ids::rfc3339_millis_cached(millis),
            next: self
                .next
                .iter()
                .map(|t| nodes[t.node].name.to_string())
                .collect(),
            metadata: Value::Object(self.run.options.metadata.clone()),
        };
        let previous_head = self.head.replace(id.clone());
        let (thread_id, expected_head) = match &self.persist {
            Some((_, t)) => (t.clone(), previous_head),
            None => (String::new(), None),
        };
        self.parent = Some(id);
        Ok(CheckpointWrite {
            thread_id,
            ns: self.ns.clone(),
            meta,
            channel_versions: self.versions.clone(),
            blobs,
            body,
            expected_head,
        })
    }

    /// Takes a checkpoint according to the durability mode.
    pub(super) async fn save(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        if self.persist.is_none() {
            self.changes.clear();
            return Ok(());
        }
        let write = self.build_write(source, false)?;
        self.store(write).await
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
