//! An in-process checkpointer for tests and local use.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use super::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointWrite, Checkpointer,
    LoadedCheckpoint, PendingWrite, ThreadInfo, resolve_channels, upsert_writes,
};

/// Keeps checkpoints in memory, with the same incremental layout as the durable back-ends.
///
/// Each thread has its own lock, so runs on different threads never wait for each other.
/// Storage is compact (boxed slices, blobs grouped by the version that wrote them), so a
/// process can hold many threads.
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
    /// Checkpoints in id order (ids are time-ordered, so this is creation order).
    checkpoints: Vec<Stored>,
    /// Blobs whose version is not a stored checkpoint (intermediate steps of exit durability).
    orphan_blobs: HashMap<Box<str>, Vec<Blob>>,
    writes: HashMap<String, Vec<PendingWrite>>,
}

/// A checkpoint, stored compactly: the blobs it wrote live with it, and `next` is read back
/// from the body when asked for.
struct Stored {
    id: Box<str>,
    parent_id: Option<Box<str>>,
    step: i64,
    source: super::CheckpointSource,
    created_at: Box<str>,
    metadata: Option<Box<serde_json::Value>>,
    channel_versions: Box<[(Box<str>, Box<str>)]>,
    body: Box<[u8]>,
    blobs: Box<[Blob]>,
}

impl Stored {
    fn meta(&self) -> CheckpointMeta {
        #[derive(serde::Deserialize, Default)]
        struct Next {
            #[serde(default)]
            next: Vec<Task>,
        }
        #[derive(serde::Deserialize)]
        struct Task {
            node: String,
        }
        let next: Next = serde_json::from_slice(&self.body).unwrap_or_default();
        CheckpointMeta {
            id: self.id.to_string(),
            parent_id: self.parent_id.as_deref().map(String::from),
            step: self.step,
            source: self.source,
            created_at: self.created_at.to_string(),
            next: next.next.into_iter().map(|t| t.node).collect(),
            metadata: self
                .metadata
                .as_deref()
                .cloned()
                .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
        }
    }
}

struct Blob {
    channel: Box<str>,
    prev_version: Option<Box<str>>,
    kind: BlobKind,
    data: Box<[u8]>,
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

impl NsData {
    fn checkpoint(&self, id: &str) -> Option<&Stored> {
        self.checkpoints
            .binary_search_by(|s| (*s.id).cmp(id))
            .ok()
            .map(|i| &self.checkpoints[i])
    }

    fn blob(&self, channel: &str, version: &str) -> Option<ChannelBlob> {
        let blobs: &[Blob] = match self.checkpoint(version) {
            Some(stored) if stored.blobs.iter().any(|b| &*b.channel == channel) => &stored.blobs,
            _ => self.orphan_blobs.get(version)?,
        };
        blobs
            .iter()
            .find(|b| &*b.channel == channel)
            .map(|b| ChannelBlob {
                channel: channel.to_string(),
                version: version.to_string(),
                prev_version: b.prev_version.as_deref().map(String::from),
                kind: b.kind,
                data: b.data.to_vec(),
            })
    }
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
        let mut own = Vec::new();
        for blob in write.blobs {
            let stored = Blob {
                channel: blob.channel.into_boxed_str(),
                prev_version: blob.prev_version.map(String::into_boxed_str),
                kind: blob.kind,
                data: blob.data.into_boxed_slice(),
            };
            if blob.version == write.meta.id {
                own.push(stored);
            } else {
                ns.orphan_blobs
                    .entry(blob.version.into_boxed_str())
                    .or_default()
                    .push(stored);
            }
        }
        let meta = write.meta;
        ns.head = Some(meta.id.clone());
        let stored = Stored {
            id: meta.id.into_boxed_str(),
            parent_id: meta.parent_id.map(String::into_boxed_str),
            step: meta.step,
            source: meta.source,
            created_at: meta.created_at.clone().into_boxed_str(),
            metadata: match meta.metadata {
                serde_json::Value::Object(m) if m.is_empty() => None,
                serde_json::Value::Null => None,
                other => Some(Box::new(other)),
            },
            channel_versions: write
                .channel_versions
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
            body: write.body.into_boxed_slice(),
            blobs: own.into_boxed_slice(),
        };
        // Ids are time-ordered, so this is almost always a push at the end.
        let at = ns.checkpoints.partition_point(|s| *s.id < *stored.id);
        ns.checkpoints.insert(at, stored);
        data.updated_at = meta.created_at;
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
            .checkpoint(id)
            .ok_or_else(|| CheckpointError::NotFound {
                thread_id: thread_id.to_string(),
                checkpoint_id: id.to_string(),
            })?;
        let channel_versions: BTreeMap<String, String> = stored
            .channel_versions
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // Materialise the blobs on every chain, then resolve them with the shared walker.
        let mut wanted = Vec::new();
        for (channel, version) in &channel_versions {
            let mut cursor = Some(version.clone());
            while let Some(v) = cursor {
                match ns_data.blob(channel, &v) {
                    Some(blob) => {
                        cursor = match blob.kind {
                            BlobKind::Full => None,
                            BlobKind::Delta => blob.prev_version.clone(),
                        };
                        wanted.push(blob);
                    }
                    None => cursor = None,
                }
            }
        }
        let channels = resolve_channels(&channel_versions, |channel, version| {
            wanted
                .iter()
                .find(|b| b.channel == channel && b.version == version)
        })?;
        Ok(Some(LoadedCheckpoint {
            meta: stored.meta(),
            channel_versions,
            channels,
            body: stored.body.to_vec(),
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
            .iter()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .map(Stored::meta)
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
