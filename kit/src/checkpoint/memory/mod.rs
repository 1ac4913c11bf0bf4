//! An in-process checkpointer for tests and local use.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use std::time::{Duration, SystemTime};

use super::retention::timestamp;
use super::{
    BlobRef, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointRef, CheckpointWrite,
    Checkpointer, LeaseOp, LeaseState, LoadedCheckpoint, PendingWrite, PruneReport, PruneStrategy,
    ThreadActivity, ThreadInfo, resolve_channels, upsert_writes,
};
use crate::hash::FastMap;

mod lease;
mod retention;

use super::packed::{self, BlobFields, Fields, Id, Unpacked};

/// Keeps checkpoints in memory, with the same incremental layout as the durable back-ends.
///
/// Each thread has its own lock, so runs on different threads never wait for each other.
/// Storage is compact (a checkpoint is its id and one packed buffer; ids take 16 bytes and
/// channel names are shared), so a process can hold many threads.
///
/// ```
/// use std::sync::Arc;
/// let checkpointer = Arc::new(kit::checkpoint::MemoryCheckpointer::new());
/// # let _ = checkpointer;
/// ```
#[derive(Default)]
pub struct MemoryCheckpointer {
    /// foldhash, OS-seeded (as kit's other maps keyed by peer data): SipHash of the thread id
    /// was a visible part of every write.
    threads: RwLock<FastMap<String, Arc<Mutex<ThreadData>>>>,
    /// Thread leases (see [`crate::checkpoint::lease`]): the rows of each busy thread.
    leases: Mutex<FastMap<String, Vec<crate::checkpoint::lease::LeaseRow>>>,
}

#[derive(Default)]
struct ThreadData {
    namespaces: FastMap<String, NsData>,
    updated_at: String,
    /// Set when the thread is taken out of the map: a writer that reached it just before must
    /// write to the thread's next incarnation instead (or its write would be lost).
    removed: bool,
}

#[derive(Default)]
struct NsData {
    head: Option<String>,
    /// `head`, parsed; the two are set together by [`set_head`](Self::set_head).
    head_id: Option<Id>,
    /// Checkpoints in id order (ids are time-ordered, so this is creation order).
    checkpoints: Vec<Stored>,
    /// Channel names; checkpoints refer to them by index.
    channels: Vec<Box<str>>,
    /// Blobs whose version is not a stored checkpoint (intermediate steps of exit durability).
    orphan_blobs: FastMap<Box<str>, Vec<ChannelBlob>>,
    writes: FastMap<String, Vec<PendingWrite>>,
}

/// A checkpoint: its id, and the rest packed into one buffer (see [`packed`]).
struct Stored {
    id: Id,
    packed: Box<[u8]>,
}

impl Stored {
    /// Head and data of the buffer.
    fn parts(&self) -> Result<(&[u8], &[u8]), CheckpointError> {
        packed::split(&self.packed).ok_or_else(|| self.corrupt())
    }

    fn unpack(&self) -> Result<Unpacked<'_>, CheckpointError> {
        let (head, _) = self.parts()?;
        packed::unpack(&self.id.to_string(), head).ok_or_else(|| self.corrupt())
    }

    fn blobs(&self) -> Result<Vec<packed::UnpackedBlob<'_>>, CheckpointError> {
        let (head, data) = self.parts()?;
        packed::unpack_blobs(&self.id.to_string(), head, data).ok_or_else(|| self.corrupt())
    }

    fn corrupt(&self) -> CheckpointError {
        CheckpointError::Corrupt(format!(
            "in-memory checkpoint {} could not be read back; this is a bug in kit, please report it",
            self.id
        ))
    }

    fn meta(&self) -> Result<CheckpointMeta, CheckpointError> {
        Ok(self.unpack()?.meta(self.id.to_string()))
    }
}

impl std::fmt::Debug for MemoryCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let threads = self.threads.read().map(|t| t.len()).unwrap_or(0);
        f.debug_struct("MemoryCheckpointer")
            .field("threads", &threads)
            .finish()
    }
}

impl MemoryCheckpointer {
    /// An empty checkpointer.
    pub fn new() -> Self {
        Self::default()
    }

    fn thread(&self, thread_id: &str) -> Option<Arc<Mutex<ThreadData>>> {
        self.threads
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread_id)
            .cloned()
    }

    fn thread_or_create(&self, thread_id: &str) -> Arc<Mutex<ThreadData>> {
        if let Some(t) = self.thread(thread_id) {
            return t;
        }
        self.threads
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(thread_id.to_string())
            .or_default()
            .clone()
    }

    /// Runs `f` on a thread that is in the map (created if needed), locked.
    fn with_live_thread<T>(&self, thread_id: &str, f: impl FnOnce(&mut ThreadData) -> T) -> T {
        loop {
            let thread = self.thread_or_create(thread_id);
            let mut data = lock(&thread);
            if !data.removed {
                return f(&mut data);
            }
        }
    }

    /// Takes threads out of the map (holding its write lock) where `remove` says so, marking
    /// them removed; returns their ids.
    fn remove_threads(&self, mut remove: impl FnMut(&str, &ThreadData) -> bool) -> Vec<String> {
        let mut threads = self.threads.write().unwrap_or_else(|p| p.into_inner());
        let mut removed = Vec::new();
        threads.retain(|thread_id, t| {
            let mut data = lock(t);
            if !remove(thread_id, &data) {
                return true;
            }
            data.removed = true;
            removed.push(thread_id.clone());
            false
        });
        shrink_if_sparse(&mut threads);
        removed
    }

    /// Takes one thread out of the map, marking it removed: one lookup, however many threads
    /// the process holds (a sweep over all of them per deletion stalled every run once there
    /// were millions).
    fn remove_thread(&self, thread_id: &str) {
        let mut threads = self.threads.write().unwrap_or_else(|p| p.into_inner());
        if let Some(thread) = threads.remove(thread_id) {
            lock(&thread).removed = true;
        }
        shrink_if_sparse(&mut threads);
    }

    /// Bytes of checkpoint data held for every thread: packed checkpoints, channel blobs and
    /// pending writes (not the maps around them). Shows what [`Checkpointer::prune`] and
    /// [`Checkpointer::delete_thread`] free.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), kit::checkpoint::CheckpointError> {
    /// use kit::checkpoint::{Checkpointer, MemoryCheckpointer};
    /// let checkpointer = MemoryCheckpointer::new();
    /// checkpointer.delete_thread("t1").await?;
    /// assert_eq!(checkpointer.stored_bytes(), 0);
    /// # Ok(()) }
    /// ```
    pub fn stored_bytes(&self) -> usize {
        let threads: Vec<String> = self
            .threads
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        threads.iter().map(|t| self.thread_stored_bytes(t)).sum()
    }

    /// [`stored_bytes`](Self::stored_bytes) of one thread (0 for an unknown thread).
    pub fn thread_stored_bytes(&self, thread_id: &str) -> usize {
        self.thread(thread_id).map_or(0, |t| {
            lock(&t).namespaces.values().map(NsData::stored_bytes).sum()
        })
    }
}

/// Writes a checkpoint into a locked thread, with its metadata as given (an owned write's may
/// be any JSON value). `orphans` are blobs of other versions the write carries (intermediate
/// steps of exit durability), kept apart.
fn put_locked(
    data: &mut ThreadData,
    write: &CheckpointRef<'_>,
    metadata: packed::Metadata<'_>,
    orphans: impl Iterator<Item = ChannelBlob>,
) -> Result<(), CheckpointError> {
    let own = Id::new(write.id);
    let (head, slot) = match data.namespaces.get(write.ns) {
        Some(ns) => (ns.head.as_deref(), ns.slot_for(&own)),
        None => (None, Some(0)),
    };
    if head != write.expected_head {
        return Err(CheckpointError::Conflict {
            thread_id: write.thread_id.to_string(),
            expected: write.expected_head.map(String::from),
            found: head.map(String::from),
        });
    }
    let Some(at) = slot else {
        return Err(CheckpointError::DuplicateId {
            thread_id: write.thread_id.to_string(),
            ns: write.ns.to_string(),
            checkpoint_id: write.id.to_string(),
        });
    };
    // The namespace's name is copied once, when it is new.
    if !data.namespaces.contains_key(write.ns) {
        data.namespaces
            .insert(write.ns.to_string(), NsData::default());
    }
    let Some(ns) = data.namespaces.get_mut(write.ns) else {
        return Err(CheckpointError::Corrupt(format!(
            "namespace `{}` of thread {} vanished while it was written; this is a bug in kit, \
             please report it",
            write.ns, write.thread_id
        )));
    };
    let channel_versions = write
        .channel_versions
        .iter()
        .map(|(channel, version)| (ns.channel_index(channel), version.as_str()))
        .collect();
    let blobs = write
        .blobs
        .iter()
        .map(|b| BlobFields {
            channel: ns.channel_index(b.channel),
            prev_version: b.prev_version,
            kind: b.kind,
            data: b.data,
        })
        .collect();
    let packed = packed::pack(
        write.id,
        &own,
        &Fields {
            parent_id: write.parent_id,
            parent_parsed: ns
                .head_id
                .as_ref()
                .filter(|_| write.parent_id == ns.head.as_deref()),
            step: write.step,
            source: write.source,
            created_at: write.created_at,
            metadata,
            channel_versions,
            body: write.body,
            blobs,
        },
    )
    .ok_or_else(|| packed::too_large(write.id))?;
    let head_id = own.clone();
    ns.checkpoints.insert(at, Stored { id: own, packed });
    for mut blob in orphans {
        // Kept for good: without the room a delta was built with.
        blob.data.shrink_to_fit();
        ns.orphan_blobs
            .entry(blob.version.as_str().into())
            .or_default()
            .push(blob);
    }
    // The head's and the time's buffers are reused: this is every step's path.
    match &mut ns.head {
        Some(head) => {
            head.clear();
            head.push_str(write.id);
        }
        None => ns.head = Some(write.id.to_string()),
    }
    ns.head_id = Some(head_id);
    data.updated_at.clear();
    data.updated_at.push_str(write.created_at);
    Ok(())
}

/// Gives memory back once the map is mostly empty: shrinking at every removal rehashed the
/// whole map each time.
fn shrink_if_sparse<V>(threads: &mut FastMap<String, V>) {
    if threads.capacity() > 64 && threads.len() < threads.capacity() / 4 {
        threads.shrink_to_fit();
    }
}

fn lock(t: &Mutex<ThreadData>) -> std::sync::MutexGuard<'_, ThreadData> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

impl NsData {
    /// Sets the head and its parsed id together.
    fn set_head(&mut self, head: Option<(String, Id)>) {
        (self.head, self.head_id) = head.unzip();
    }

    /// Where a checkpoint with id `own` goes in id order; `None` when one has that id.
    fn slot_for(&self, own: &Id) -> Option<usize> {
        // Ids are time-ordered, so this is almost always a push at the end.
        let at = match self.checkpoints.last() {
            Some(last) if last.id.cmp_id(own) != std::cmp::Ordering::Less => self
                .checkpoints
                .partition_point(|s| s.id.cmp_id(own) == std::cmp::Ordering::Less),
            _ => self.checkpoints.len(),
        };
        let taken = self
            .checkpoints
            .get(at)
            .is_some_and(|s| s.id.cmp_id(own) == std::cmp::Ordering::Equal);
        (!taken).then_some(at)
    }

    fn checkpoint(&self, id: &str) -> Option<&Stored> {
        // Parsed once: the search then compares 16 bytes per probe, not two texts.
        let id = Id::new(id);
        self.checkpoints
            .binary_search_by(|s| s.id.cmp_id(&id))
            .ok()
            .map(|i| &self.checkpoints[i])
    }

    /// The index of a channel name, added on first use.
    fn channel_index(&mut self, name: &str) -> u32 {
        match self.channels.iter().position(|c| &**c == name) {
            Some(i) => i as u32,
            None => {
                self.channels.push(name.into());
                (self.channels.len() - 1) as u32
            }
        }
    }

    fn channel_name(&self, index: u32) -> Result<&str, CheckpointError> {
        self.channels
            .get(index as usize)
            .map(|c| &**c)
            .ok_or_else(|| CheckpointError::Corrupt(format!("unknown channel index {index}")))
    }

    fn blob(&self, channel: &str, version: &str) -> Result<Option<ChannelBlob>, CheckpointError> {
        if let Some(stored) = self.checkpoint(version) {
            for blob in stored.blobs()? {
                if self.channel_name(blob.channel)? == channel {
                    return Ok(Some(ChannelBlob {
                        channel: channel.to_string(),
                        version: version.to_string(),
                        prev_version: blob.prev_version,
                        kind: blob.kind,
                        data: blob.data.to_vec(),
                    }));
                }
            }
        }
        Ok(self
            .orphan_blobs
            .get(version)
            .and_then(|blobs| blobs.iter().find(|b| b.channel == channel))
            .cloned())
    }
}

#[async_trait::async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        let id = write.meta.id.as_str();
        let (own, orphans): (Vec<ChannelBlob>, Vec<ChannelBlob>) =
            write.blobs.into_iter().partition(|b| b.version == id);
        let blobs: Vec<BlobRef<'_>> = own
            .iter()
            .map(|b| BlobRef {
                channel: &b.channel,
                prev_version: b.prev_version.as_deref(),
                kind: b.kind,
                data: &b.data,
            })
            .collect();
        // Given apart (it may be any JSON value here), so the borrowed map is left empty.
        let unused = serde_json::Map::new();
        let borrowed = CheckpointRef {
            thread_id: &write.thread_id,
            ns: &write.ns,
            id,
            parent_id: write.meta.parent_id.as_deref(),
            step: write.meta.step,
            source: write.meta.source,
            created_at: &write.meta.created_at,
            metadata: &unused,
            channel_versions: &write.channel_versions,
            blobs: &blobs,
            body: &write.body,
            expected_head: write.expected_head.as_deref(),
        };
        let metadata = packed::Metadata::Value(&write.meta.metadata);
        self.with_live_thread(&write.thread_id, |data| {
            put_locked(data, &borrowed, metadata, orphans.into_iter())
        })
    }

    fn put_now(&self, write: &CheckpointRef<'_>) -> Option<Result<(), CheckpointError>> {
        Some(self.with_live_thread(write.thread_id, |data| {
            put_locked(
                data,
                write,
                packed::Metadata::Object(write.metadata),
                std::iter::empty(),
            )
        }))
    }

    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        self.with_live_thread(thread_id, |data| {
            let ns = data.namespaces.entry(ns.to_string()).or_default();
            let existing = ns.writes.entry(checkpoint_id.to_string()).or_default();
            upsert_writes(existing, writes);
        });
        Ok(())
    }

    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        let Some(thread) = self.thread(thread_id) else {
            return match checkpoint_id {
                Some(id) => Err(CheckpointError::NotFound {
                    thread_id: thread_id.to_string(),
                    checkpoint_id: id.to_string(),
                }),
                None => Ok(None),
            };
        };
        let data = lock(&thread);
        let Some(ns_data) = data.namespaces.get(ns) else {
            return Ok(None);
        };
        let Some(head) = ns_data.head.clone() else {
            return Ok(None);
        };
        let id = checkpoint_id.unwrap_or(&head);
        let stored = ns_data
            .checkpoint(id)
            .ok_or_else(|| CheckpointError::NotFound {
                thread_id: thread_id.to_string(),
                checkpoint_id: id.to_string(),
            })?;
        let mut fields = stored.unpack()?;
        let mut channel_versions = BTreeMap::new();
        for (channel, version) in std::mem::take(&mut fields.channel_versions) {
            channel_versions.insert(ns_data.channel_name(channel)?.to_string(), version);
        }
        // Each blob is read straight from the packed checkpoint that holds it (a binary search by
        // version), so loading a chain of n deltas is O(n log n) and copies each byte once.
        let channels = resolve_channels(&channel_versions, |channel, version| {
            ns_data.blob(channel, version)
        })
        .map_err(|e| e.in_checkpoint(thread_id, id))?;
        let body = fields.body.to_vec();
        Ok(Some(LoadedCheckpoint {
            meta: fields.meta(id.to_string()),
            channel_versions,
            channels,
            body,
            pending_writes: ns_data.writes.get(id).cloned().unwrap_or_default(),
            head,
        }))
    }

    async fn head(&self, thread_id: &str, ns: &str) -> Result<Option<String>, CheckpointError> {
        Ok(self
            .thread(thread_id)
            .and_then(|thread| lock(&thread).namespaces.get(ns)?.head.clone()))
    }

    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError> {
        let Some(thread) = self.thread(thread_id) else {
            return Ok(Vec::new());
        };
        let data = lock(&thread);
        let Some(ns_data) = data.namespaces.get(ns) else {
            return Ok(Vec::new());
        };
        Ok(ns_data
            .checkpoints
            .iter()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .map(Stored::meta)
            .collect::<Result<_, _>>()?)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.remove_thread(thread_id);
        self.forget_leases(&[thread_id.to_string()]);
        Ok(())
    }

    async fn lease(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> Result<LeaseState, CheckpointError> {
        self.lease_locked(thread_id, run_id, op, ttl)
    }

    async fn thread_activity(
        &self,
        thread_id: &str,
    ) -> Result<Option<ThreadActivity>, CheckpointError> {
        Ok(self.activity(thread_id))
    }

    async fn rollback_after(&self, thread_id: &str, marker: &str) -> Result<u64, CheckpointError> {
        self.rollback_locked(thread_id, marker)
    }

    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        let Some(thread) = self.thread(thread_id) else {
            return Ok(PruneReport::default());
        };
        let mut data = lock(&thread);
        let mut report = PruneReport::default();
        for ns in data.namespaces.values_mut() {
            report.add(ns.prune(strategy)?);
        }
        Ok(report)
    }

    async fn delete_threads_before(
        &self,
        cutoff: SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        let cutoff = timestamp(cutoff);
        // Under the map's write lock: no writer reaches a thread while it is judged idle.
        let removed = self.remove_threads(|_, data| data.updated_at < cutoff);
        self.forget_leases(&removed);
        Ok(removed)
    }

    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        let threads: Vec<(String, Arc<Mutex<ThreadData>>)> = self
            .threads
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out: Vec<ThreadInfo> = threads
            .into_iter()
            .filter_map(|(thread_id, t)| {
                let data = lock(&t);
                let count = data
                    .namespaces
                    .get("")
                    .map(|n| n.checkpoints.len())
                    .unwrap_or(0);
                (count > 0).then(|| ThreadInfo {
                    thread_id,
                    updated_at: data.updated_at.clone(),
                    checkpoints: count as u64,
                })
            })
            .collect();
        out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        Ok(out)
    }
}
