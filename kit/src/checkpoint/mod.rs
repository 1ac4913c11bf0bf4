//! Checkpointing: the [`Checkpointer`] trait, its records, and the back-ends.
//!
//! # Storage model (incremental)
//!
//! A checkpoint is written after every superstep of a thread. It does **not** copy the state.
//! Instead each channel value lives in *blobs*:
//!
//! * a blob is keyed by (thread, namespace, channel, version), where the version is the id of the
//!   checkpoint that wrote it, and points at the blob it extends (`prev_version`);
//! * a [`BlobKind::Full`] blob holds the whole channel value; a [`BlobKind::Delta`] blob holds
//!   only the updates a step folded into a reducer channel (for an append-only message list:
//!   just the new messages);
//! * a checkpoint row holds the version of every channel, so an unchanged channel costs nothing.
//!
//! Reading a channel walks its chain back to the newest full blob and replays the deltas through
//! the channel's reducer. To keep that walk short, the executor writes a full blob instead of a
//! delta once the deltas since the last full blob outweigh it: a full write then happens at most
//! once per doubling of the value, so the bytes written per step stay constant on average
//! (amortised O(1)) at message 10 and at message 10,000, and a read replays at most about as
//! many bytes as the value itself has.
//!
//! Storage stays bounded with [`retention`]: pruning old checkpoints, and a time to live for
//! threads.
//!
//! Writes are optimistic: a [`CheckpointWrite`] names the head it expects the thread to have, and
//! the back-end refuses it with [`CheckpointError::Conflict`] when another writer got there first.

mod borrowed;
pub mod lease;
mod memory;
mod packed;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod retention;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use borrowed::{BlobRef, CheckpointRef};
pub use lease::{LeaseOp, LeaseOptions, LeaseState, MultitaskStrategy, ThreadActivity};
pub use memory::MemoryCheckpointer;
#[cfg(feature = "postgres")]
pub use postgres::PostgresCheckpointer;
pub use retention::{PruneReport, PruneStrategy, Retention, RetentionTask, SweepReport};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteCheckpointer;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a checkpoint was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointSource {
    /// The input of an invocation was applied.
    Input,
    /// A superstep ran.
    Loop,
    /// The state was edited with `update_state`.
    Update,
    /// The thread was forked from an earlier checkpoint.
    Fork,
}

impl CheckpointSource {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointSource::Input => "input",
            CheckpointSource::Loop => "loop",
            CheckpointSource::Update => "update",
            CheckpointSource::Fork => "fork",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "input" => CheckpointSource::Input,
            "loop" => CheckpointSource::Loop,
            "update" => CheckpointSource::Update,
            "fork" => CheckpointSource::Fork,
            _ => return None,
        })
    }
}

/// What a checkpoint is, without its channel values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Time-ordered id (UUIDv7).
    pub id: String,
    /// The checkpoint this one follows, if any.
    pub parent_id: Option<String>,
    /// The superstep (-1 for the input checkpoint).
    pub step: i64,
    /// Why it was written.
    pub source: CheckpointSource,
    /// When, as RFC 3339 UTC with milliseconds. kit takes it from the millisecond its id
    /// carries, so a checkpoint's time never runs behind its parent's even if the clock does.
    pub created_at: String,
    /// The node names due to run next (empty when the run finished).
    pub next: Vec<String>,
    /// Free-form metadata.
    pub metadata: Value,
}

/// Whether a blob holds a whole channel value or a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlobKind {
    /// The whole value.
    Full,
    /// Updates to fold into the previous value with the channel's reducer.
    Delta,
}

impl BlobKind {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            BlobKind::Full => "full",
            BlobKind::Delta => "delta",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(BlobKind::Full),
            "delta" => Some(BlobKind::Delta),
            _ => None,
        }
    }
}

/// One stored channel record.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelBlob {
    /// The channel name.
    pub channel: String,
    /// The version (the id of the checkpoint that wrote it).
    pub version: String,
    /// The version this delta extends (`None` for a full blob or a delta on an empty channel).
    pub prev_version: Option<String>,
    /// Full value or delta.
    pub kind: BlobKind,
    /// JSON bytes.
    pub data: Vec<u8>,
}

/// A checkpoint to store.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointWrite {
    /// The thread.
    pub thread_id: String,
    /// The namespace ("" for the top level; subgraphs use a path such as `tools:call_1`).
    pub ns: String,
    /// The checkpoint itself.
    pub meta: CheckpointMeta,
    /// The version of every channel at this checkpoint. Shared with the executor, which keeps
    /// the map from step to step: a write costs no copy of it.
    pub channel_versions: Arc<BTreeMap<String, String>>,
    /// New blobs written with this checkpoint (only the channels that changed).
    pub blobs: Vec<ChannelBlob>,
    /// Executor data needed to continue (tasks due, join barriers), as JSON bytes. Store and
    /// return it unchanged. kit's in-memory and SQLite back-ends read [`CheckpointMeta::next`]
    /// back from its `next` tasks instead of storing the names twice, so a write made by hand
    /// must list the same nodes in both (the executor always does).
    pub body: Vec<u8>,
    /// The head the writer expects the thread to have; `None` for a new thread.
    pub expected_head: Option<String>,
}

impl CheckpointWrite {
    /// Bytes of channel data this write stores.
    pub fn blob_bytes(&self) -> usize {
        self.blobs.iter().map(|b| b.data.len()).sum()
    }
}

/// A write recorded against a checkpoint before the next one exists: the output of a task that
/// finished in a superstep that did not complete, an error, an interrupt, or resume values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task it belongs to.
    pub task_id: String,
    /// `__output__`, `__error__`, `__interrupt__` or `__resume__`.
    pub channel: String,
    /// The payload.
    pub value: Value,
}

/// Pending write channel names.
pub mod pending {
    /// The output of a task that succeeded.
    pub const OUTPUT: &str = "__output__";
    /// The error of a task that failed.
    pub const ERROR: &str = "__error__";
    /// The interrupts a task raised.
    pub const INTERRUPT: &str = "__interrupt__";
    /// The resume values given to a task.
    pub const RESUME: &str = "__resume__";
}

/// A channel as loaded: the newest full value on its chain and the deltas after it, oldest
/// first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadedChannel {
    /// The channel name.
    pub name: String,
    /// The version at this checkpoint.
    pub version: String,
    /// The newest full value on the chain, if any.
    pub full: Option<Vec<u8>>,
    /// Deltas after it, oldest first.
    pub deltas: Vec<Vec<u8>>,
}

/// A checkpoint with everything needed to rebuild the state and continue.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCheckpoint {
    /// The checkpoint.
    pub meta: CheckpointMeta,
    /// Channel versions at this checkpoint.
    pub channel_versions: BTreeMap<String, String>,
    /// Channel data, resolved along each chain.
    pub channels: Vec<LoadedChannel>,
    /// Executor data (JSON bytes, as written).
    pub body: Vec<u8>,
    /// Writes recorded against this checkpoint.
    pub pending_writes: Vec<PendingWrite>,
    /// The thread's current head (the newest checkpoint on the active branch).
    pub head: String,
}

/// A thread and when it last changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The thread id.
    pub thread_id: String,
    /// RFC 3339 time of its newest checkpoint.
    pub updated_at: String,
    /// How many checkpoints it has (top-level namespace).
    pub checkpoints: u64,
}

/// A checkpointer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Another writer advanced the thread since this run read it.
    #[error(
        "thread `{thread_id}` was changed by another writer: expected head {expected:?}, found \
         {found:?}. Two runs resumed the same thread at once; reload it and retry"
    )]
    Conflict {
        /// The thread.
        thread_id: String,
        /// The head this writer expected.
        expected: Option<String>,
        /// The head found.
        found: Option<String>,
    },
    /// No such checkpoint.
    #[error("thread `{thread_id}` has no checkpoint `{checkpoint_id}`")]
    NotFound {
        /// The thread.
        thread_id: String,
        /// The checkpoint id asked for.
        checkpoint_id: String,
    },
    /// A write reused the id of a checkpoint the thread already has. A stored checkpoint is
    /// never replaced: later checkpoints' deltas are built on its values, so changing them in
    /// place would change every later state without a trace. Nothing was written.
    #[error(
        "thread `{thread_id}` (namespace `{ns}`) already has a checkpoint `{checkpoint_id}`; a \
         stored checkpoint is never replaced, so nothing was written: write the new one under \
         a fresh id (kit::ids::time_ordered())"
    )]
    DuplicateId {
        /// The thread.
        thread_id: String,
        /// The namespace.
        ns: String,
        /// The id written again.
        checkpoint_id: String,
    },
    /// Stored data is inconsistent (a missing blob on a chain, unparseable data).
    #[error("checkpoint data is corrupt: {0}")]
    Corrupt(String),
    /// The database was written by a newer kit.
    #[error(
        "the checkpoint database has schema version {found}, but this kit supports up to \
         {supported}; upgrade kit (opening it with an older kit would corrupt it)"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// The storage back-end failed (I/O, connection, SQL).
    #[error("checkpoint storage failed: {0}")]
    Backend(String),
    /// The checkpointer does not implement an optional operation.
    #[error(
        "this checkpointer does not support {operation}; use MemoryCheckpointer, \
         SqliteCheckpointer or PostgresCheckpointer, or implement it in your Checkpointer"
    )]
    Unsupported {
        /// What was asked, e.g. `thread leases (Checkpointer::lease)`.
        operation: &'static str,
    },
}

/// Durable (or in-memory) storage of checkpoints, keyed by thread id and namespace.
///
/// Implementations must be safe to share between runs and tasks (`Arc<dyn Checkpointer>`),
/// must never block one thread's writes behind another's, and must check
/// [`CheckpointWrite::expected_head`] atomically with the write.
#[async_trait::async_trait]
pub trait Checkpointer: Send + Sync + 'static {
    /// Stores a checkpoint and its blobs, and moves the head of (thread, ns) to it — only if the
    /// head is still `expected_head` ([`CheckpointError::Conflict`] otherwise) and the
    /// checkpoint's id is new to (thread, ns) ([`CheckpointError::DuplicateId`] otherwise: a
    /// stored checkpoint is never replaced). Either error writes nothing.
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError>;

    /// Stores a checkpoint given by reference, as [`put`](Self::put) would, when the back-end
    /// can without waiting (kit's in-memory back-end: no copy of the write is made); `None`
    /// when it cannot, and the caller hands `put` the write [`CheckpointRef::to_write`] makes.
    /// The default is `None`.
    fn put_now(&self, write: &CheckpointRef<'_>) -> Option<Result<(), CheckpointError>> {
        let _ = write;
        None
    }

    /// Records pending writes against a checkpoint (upsert by task id and channel).
    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError>;

    /// Loads a checkpoint (the head when `checkpoint_id` is `None`); `None` if the thread has no
    /// checkpoint in that namespace.
    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError>;

    /// The id of the head checkpoint of (thread, ns): the one [`load`](Self::load) reads when
    /// given no id. `None` if the thread has no checkpoint there.
    ///
    /// A run uses it to tell whether a thread it finished is still as it left it (then it goes on
    /// from the state it holds instead of loading it again). The default reads the newest entry
    /// of [`history`](Self::history); back-ends override it with a direct read of the head.
    async fn head(&self, thread_id: &str, ns: &str) -> Result<Option<String>, CheckpointError> {
        head_from_history(self, thread_id, ns).await
    }

    /// The checkpoints of (thread, ns), newest first, at most `limit`.
    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError>;

    /// Deletes a thread in every namespace, with everything stored for it (checkpoints, blobs,
    /// pending writes). Deleting an unknown thread is not an error.
    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError>;

    /// Removes old checkpoints of a thread, in every namespace, as `strategy` says, with their
    /// pending writes and the blobs no kept checkpoint reads. The head of each namespace and
    /// its pending writes are always kept, so a paused thread still resumes (see
    /// [`retention`]). Pruning an unknown thread removes nothing.
    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError>;

    /// Deletes every thread whose last checkpoint was written before `cutoff` (a time to live;
    /// see [`Retention`]), atomically with respect to writers: a thread written to after
    /// `cutoff` is kept. Returns the deleted threads' ids.
    async fn delete_threads_before(
        &self,
        cutoff: SystemTime,
    ) -> Result<Vec<String>, CheckpointError>;

    /// All threads with their last update time, most recently updated first.
    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError>;

    /// Applies a run's lease operation to its thread (see [`lease`]): atomically, across every
    /// process sharing the storage, by reading the thread's rows, calling [`lease::decide`] and
    /// writing back its [`lease::changes`] in one transaction. Used by runs given a
    /// [`MultitaskStrategy`]; the default refuses with [`CheckpointError::Unsupported`].
    async fn lease(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> Result<LeaseState, CheckpointError> {
        let _ = (thread_id, run_id, op, ttl);
        Err(CheckpointError::Unsupported {
            operation: "thread leases (Checkpointer::lease)",
        })
    }

    /// Who holds the thread's lease and how many runs wait for it; `None` when it is idle.
    async fn thread_activity(
        &self,
        thread_id: &str,
    ) -> Result<Option<ThreadActivity>, CheckpointError> {
        let _ = thread_id;
        Err(CheckpointError::Unsupported {
            operation: "thread leases (Checkpointer::thread_activity)",
        })
    }

    /// Deletes every checkpoint of the thread (in every namespace) whose id sorts after
    /// `marker`, with the blobs they wrote and the pending writes recorded against them, and
    /// moves each namespace's head back to its newest remaining checkpoint: what a
    /// [`MultitaskStrategy::Rollback`] does to the run it stopped. Returns how many checkpoints
    /// were deleted.
    async fn rollback_after(&self, thread_id: &str, marker: &str) -> Result<u64, CheckpointError> {
        let _ = (thread_id, marker);
        Err(CheckpointError::Unsupported {
            operation: "rollbacks (Checkpointer::rollback_after)",
        })
    }
}

/// The head of (thread, ns) read from the newest entry of its history: what
/// [`Checkpointer::head`] does unless a back-end reads its head directly.
pub async fn head_from_history<C: Checkpointer + ?Sized>(
    checkpointer: &C,
    thread_id: &str,
    ns: &str,
) -> Result<Option<String>, CheckpointError> {
    Ok(checkpointer
        .history(thread_id, ns, Some(1))
        .await?
        .into_iter()
        .next()
        .map(|meta| meta.id))
}

/// Resolves the chain of each channel from a lookup of blobs by (channel, version).
///
/// Shared by the back-ends: they fetch candidate blobs their own way and call this. `take`
/// hands over each blob of a chain once (moved, not copied: a long chain's bytes are copied
/// only where they are read from storage); a blob it cannot find is `Ok(None)`.
pub fn resolve_channels(
    channel_versions: &BTreeMap<String, String>,
    mut take: impl FnMut(&str, &str) -> Result<Option<ChannelBlob>, CheckpointError>,
) -> Result<Vec<LoadedChannel>, CheckpointError> {
    let mut out = Vec::with_capacity(channel_versions.len());
    for (channel, version) in channel_versions {
        let mut deltas = Vec::new();
        let mut full = None;
        let mut cursor = Some(version.clone());
        // Versions seen on this chain: a chain that comes back to one loops (a damaged store).
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(v) = cursor {
            if seen.contains(&v) {
                return Err(CheckpointError::Corrupt(format!(
                    "the delta chain of channel `{channel}` loops: version {v} comes back after \
                     {} steps, so the channel's value cannot be rebuilt; restore the store from \
                     a backup, or load an earlier checkpoint",
                    seen.len()
                )));
            }
            let blob = take(channel, &v)?.ok_or_else(|| {
                CheckpointError::Corrupt(format!(
                    "channel `{channel}` version {v} is referenced but missing"
                ))
            })?;
            seen.insert(v);
            match blob.kind {
                BlobKind::Full => {
                    full = Some(blob.data);
                    cursor = None;
                }
                BlobKind::Delta => {
                    deltas.push(blob.data);
                    cursor = blob.prev_version;
                }
            }
        }
        deltas.reverse();
        out.push(LoadedChannel {
            name: channel.clone(),
            version: version.clone(),
            full,
            deltas,
        });
    }
    Ok(out)
}

impl CheckpointError {
    /// A [`Corrupt`](Self::Corrupt) error with the thread and checkpoint it was found in.
    pub(crate) fn in_checkpoint(self, thread_id: &str, checkpoint_id: &str) -> Self {
        match self {
            CheckpointError::Corrupt(what) => CheckpointError::Corrupt(format!(
                "thread `{thread_id}`, checkpoint `{checkpoint_id}`: {what}"
            )),
            other => other,
        }
    }
}

/// Upserts pending writes by (task id, channel), keeping the order of first appearance.
///
/// Each write's slot is found in a map: searching the list per write was quadratic in a step
/// of many tasks. (Writes are put when a step stops on an interrupt or a failure, and when a
/// run is resumed: never on the path of every step.)
pub(crate) fn upsert_writes(existing: &mut Vec<PendingWrite>, writes: Vec<PendingWrite>) {
    let mut slots: HashMap<(String, String), usize> = existing
        .iter()
        .enumerate()
        .map(|(i, w)| ((w.task_id.clone(), w.channel.clone()), i))
        .collect();
    for write in writes {
        let key = (write.task_id.clone(), write.channel.clone());
        match slots.get(&key).and_then(|&i| existing.get_mut(i)) {
            Some(slot) => *slot = write,
            None => {
                slots.insert(key, existing.len());
                existing.push(write);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The definition: each write replaces the one with its task and channel, or goes last.
    fn upsert_one_by_one(existing: &mut Vec<PendingWrite>, writes: Vec<PendingWrite>) {
        for write in writes {
            match existing
                .iter_mut()
                .find(|w| w.task_id == write.task_id && w.channel == write.channel)
            {
                Some(slot) => *slot = write,
                None => existing.push(write),
            }
        }
    }

    #[test]
    fn upserting_a_batch_is_upserting_its_writes_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(0x5107);
        let write = |rng: &mut fastrand::Rng| PendingWrite {
            task_id: format!("t{}", rng.u8(0..12)),
            channel: ["__output__", "__error__"][rng.usize(0..2)].to_string(),
            value: serde_json::json!(rng.u32(..)),
        };
        for _ in 0..2_000 {
            let mut ours: Vec<PendingWrite> = Vec::new();
            for _ in 0..rng.usize(1..4) {
                let batch: Vec<PendingWrite> =
                    (0..rng.usize(0..30)).map(|_| write(&mut rng)).collect();
                let mut theirs = ours.clone();
                upsert_one_by_one(&mut theirs, batch.clone());
                upsert_writes(&mut ours, batch);
                assert_eq!(ours, theirs);
            }
        }
    }
}
