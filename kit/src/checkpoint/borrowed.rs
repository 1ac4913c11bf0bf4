//! A checkpoint given by reference: what the executor hands a back-end that stores it at once
//! ([`Checkpointer::put_now`](super::Checkpointer::put_now)), without first copying every id,
//! name and version into a [`CheckpointWrite`] of its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{BlobKind, ChannelBlob, CheckpointMeta, CheckpointSource, CheckpointWrite};

/// A checkpoint to store, borrowed from its writer. Its blobs are this checkpoint's own (their
/// version is [`id`](Self::id)); the nodes due next are those of [`body`](Self::body).
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use kit::checkpoint::{BlobKind, BlobRef, CheckpointRef, CheckpointSource};
///
/// let versions = Arc::new(BTreeMap::from([("messages".to_string(), "c1".to_string())]));
/// let metadata = serde_json::Map::new();
/// let blobs = [BlobRef { channel: "messages", prev_version: None, kind: BlobKind::Full, data: b"[]" }];
/// let checkpoint = CheckpointRef {
///     thread_id: "t1",
///     ns: "",
///     id: "c1",
///     parent_id: None,
///     step: -1,
///     source: CheckpointSource::Input,
///     created_at: "2026-12-02T12:00:00.000Z",
///     metadata: &metadata,
///     channel_versions: &versions,
///     blobs: &blobs,
///     body: br#"{"next":[{"node":"agent"}]}"#,
///     expected_head: None,
/// };
/// let write = checkpoint.to_write();
/// assert_eq!(write.meta.next, ["agent"]);
/// assert_eq!(write.blobs[0].version, "c1");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct CheckpointRef<'a> {
    /// The thread.
    pub thread_id: &'a str,
    /// The namespace ("" for the top level).
    pub ns: &'a str,
    /// The checkpoint's id.
    pub id: &'a str,
    /// The checkpoint it follows, if any.
    pub parent_id: Option<&'a str>,
    /// The superstep (-1 for the input checkpoint).
    pub step: i64,
    /// Why it was written.
    pub source: CheckpointSource,
    /// When, as RFC 3339 UTC with milliseconds.
    pub created_at: &'a str,
    /// Free-form metadata.
    pub metadata: &'a Map<String, Value>,
    /// The version of every channel at this checkpoint.
    pub channel_versions: &'a Arc<BTreeMap<String, String>>,
    /// The blobs this checkpoint writes (only the channels that changed).
    pub blobs: &'a [BlobRef<'a>],
    /// Executor data needed to continue, as JSON bytes (see [`CheckpointWrite::body`]).
    pub body: &'a [u8],
    /// The head the writer expects the thread to have; `None` for a new thread.
    pub expected_head: Option<&'a str>,
}

/// One blob of a [`CheckpointRef`]: its version is the checkpoint's id.
#[derive(Debug, Clone, Copy)]
pub struct BlobRef<'a> {
    /// The channel name.
    pub channel: &'a str,
    /// The version this delta extends (`None` for a full blob or a delta on an empty channel).
    pub prev_version: Option<&'a str>,
    /// Full value or delta.
    pub kind: BlobKind,
    /// JSON bytes.
    pub data: &'a [u8],
}

impl CheckpointRef<'_> {
    /// The owned write [`Checkpointer::put`](super::Checkpointer::put) takes; the nodes due
    /// next are read from the body.
    pub fn to_write(&self) -> CheckpointWrite {
        self.owned_with_next(next_nodes(self.body).unwrap_or_default())
    }

    /// [`to_write`](Self::to_write) with the nodes due next as the writer knows them (the
    /// body, with every `Send` argument, is not read again).
    pub(crate) fn owned_with_next(&self, next: Vec<String>) -> CheckpointWrite {
        CheckpointWrite {
            thread_id: self.thread_id.to_string(),
            ns: self.ns.to_string(),
            meta: CheckpointMeta {
                id: self.id.to_string(),
                parent_id: self.parent_id.map(str::to_string),
                step: self.step,
                source: self.source,
                created_at: self.created_at.to_string(),
                next,
                metadata: Value::Object(self.metadata.clone()),
            },
            channel_versions: self.channel_versions.clone(),
            blobs: self
                .blobs
                .iter()
                .map(|b| ChannelBlob {
                    channel: b.channel.to_string(),
                    version: self.id.to_string(),
                    prev_version: b.prev_version.map(str::to_string),
                    kind: b.kind,
                    data: b.data.to_vec(),
                })
                .collect(),
            body: self.body.to_vec(),
            expected_head: self.expected_head.map(str::to_string),
        }
    }
}

/// The nodes due next, as an executor's body lists them (`{"next": [{"node": …}, …]}`).
pub(crate) fn next_nodes(body: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    #[derive(serde::Deserialize, Default)]
    struct Next {
        #[serde(default)]
        next: Vec<Task>,
    }
    #[derive(serde::Deserialize)]
    struct Task {
        node: String,
    }
    let next: Next = serde_json::from_slice(body)?;
    Ok(next.next.into_iter().map(|t| t.node).collect())
}
