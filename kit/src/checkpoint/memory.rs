//! An in-process checkpointer for tests and local use.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use super::{
    ChannelBlob, CheckpointError, CheckpointMeta, CheckpointWrite, Checkpointer, LoadedCheckpoint,
    PendingWrite, ThreadInfo, resolve_channels, upsert_writes,
};

/// Keeps checkpoints in memory, with the same incremental layout as the durable back-ends.
///
/// Each thread has its own lock, so runs on different threads never wait for each other.
///
/// ```
/// use std::sync::Arc;
/// let checkpointer = Arc::new(kit::checkpoint::MemoryCheckpointer::new());
/// # let _ = checkpointer;
/// ```
#[derive(Default)]
pub struct MemoryCheckpointer {
    threads: RwLock<HashMap<String, Arc<Mutex<ThreadData>>>>,
}

#[derive(Default)]
struct ThreadData {
    namespaces: HashMap<String, NsData>,
    updated_at: String,
}

#[derive(Default)]
struct NsData {
    head: Option<String>,
    /// Checkpoints by id; ids are time-ordered so the map is in creation order.
    checkpoints: BTreeMap<String, Stored>,
    blobs: HashMap<(String, String), ChannelBlob>,
    writes: HashMap<String, Vec<PendingWrite>>,
}

struct Stored {
    meta: CheckpointMeta,
    channel_versions: BTreeMap<String, String>,
    body: Vec<u8>,
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
}

fn lock(t: &Mutex<ThreadData>) -> std::sync::MutexGuard<'_, ThreadData> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait::async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        let thread = self.thread_or_create(&write.thread_id);
        let mut data = lock(&thread);
        let ns = data.namespaces.entry(write.ns.clone()).or_default();
        if ns.head != write.expected_head {
            return Err(CheckpointError::Conflict {
                thread_id: write.thread_id,
                expected: write.expected_head,
                found: ns.head.clone(),
            });
        }
        for blob in write.blobs {
            ns.blobs
                .insert((blob.channel.clone(), blob.version.clone()), blob);
        }
        ns.head = Some(write.meta.id.clone());
        let created = write.meta.created_at.clone();
        ns.checkpoints.insert(
            write.meta.id.clone(),
            Stored {
                meta: write.meta,
                channel_versions: write.channel_versions,
                body: write.body,
            },
        );
        data.updated_at = created;
        Ok(())
    }

    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        let thread = self.thread_or_create(thread_id);
        let mut data = lock(&thread);
        let ns = data.namespaces.entry(ns.to_string()).or_default();
        let existing = ns.writes.entry(checkpoint_id.to_string()).or_default();
        upsert_writes(existing, writes);
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
            .checkpoints
            .get(id)
            .ok_or_else(|| CheckpointError::NotFound {
                thread_id: thread_id.to_string(),
                checkpoint_id: id.to_string(),
            })?;
        let channels = resolve_channels(&stored.channel_versions, |channel, version| {
            ns_data
                .blobs
                .get(&(channel.to_string(), version.to_string()))
        })?;
        Ok(Some(LoadedCheckpoint {
            meta: stored.meta.clone(),
            channel_versions: stored.channel_versions.clone(),
            channels,
            body: stored.body.clone(),
            pending_writes: ns_data.writes.get(id).cloned().unwrap_or_default(),
            head,
        }))
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
            .values()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .map(|s| s.meta.clone())
            .collect())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.threads
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread_id);
        Ok(())
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
