//! Retention: pruning a thread's history, and deleting threads nobody touched for a while.
//!
//! A thread gains a checkpoint per superstep, forever. Two tools keep storage bounded:
//!
//! * [`Checkpointer::prune`] removes a thread's old checkpoints. [`PruneStrategy::KeepLatest`]
//!   keeps, in every namespace, the newest `n` checkpoints on the branch that ends at the head
//!   — always the head itself, with its pending writes — and the channel blobs those
//!   checkpoints read (a kept checkpoint may read a blob an older checkpoint wrote, and a
//!   delta chain reaches back to a full value). Everything else goes: older checkpoints,
//!   branches left behind by a fork, their pending writes, and blobs nothing kept reads.
//! * [`Checkpointer::delete_threads_before`] deletes whole threads whose last checkpoint is
//!   older than a cutoff (a time to live).
//!
//! [`Retention`] runs both on a schedule.
//!
//! # What a pause needs
//!
//! Resuming a paused thread reads only the head of each namespace and the pending writes
//! recorded against it: the interrupts raised, the outputs of the tasks that finished beside
//! them, and the resume values given so far to a node that interrupts more than once. A
//! subgraph's pause lives in the subgraph's own namespace, whose head is kept too. So
//! `KeepLatest(1)` never breaks a pending resume, however many interrupts are chained — unlike
//! keep-latest pruning that keeps a checkpoint but drops the writes a chain of resumes
//! recorded.
//!
//! ```
//! use std::sync::Arc;
//!
//! use kit::checkpoint::{Checkpointer, MemoryCheckpointer, PruneStrategy};
//! use kit::graph::{GraphBuilder, NodeContext, NodeError};
//! use kit::{END, START, State};
//!
//! #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Count {
//!     n: i64,
//! }
//!
//! fn add_one(s: &Count, _: &NodeContext) -> Result<CountUpdate, NodeError> {
//!     Ok(CountUpdate::new().n(s.n + 1))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let checkpointer = Arc::new(MemoryCheckpointer::new());
//! let graph = GraphBuilder::<Count>::new("count")
//!     .sync_node("a", add_one)
//!     .sync_node("b", add_one)
//!     .edge(START, "a")
//!     .edge("a", "b")
//!     .edge("b", END)
//!     .checkpointer(checkpointer.clone())
//!     .compile()?;
//! for _ in 0..3 {
//!     graph.invoke(CountUpdate::new()).thread_id("t1").await?;
//! }
//! let before = checkpointer.history("t1", "", None).await?.len();
//!
//! let removed = checkpointer.prune("t1", PruneStrategy::KeepLatest(2)).await?;
//! assert_eq!(removed.checkpoints as usize, before - 2);
//! assert_eq!(checkpointer.history("t1", "", None).await?.len(), 2);
//!
//! // The thread carries on from its head.
//! let out = graph.invoke(CountUpdate::new()).thread_id("t1").await?;
//! assert_eq!(out.state().n, 8);
//! # Ok(()) }
//! ```

mod sweeper;

pub use sweeper::{Retention, RetentionTask, SweepReport};

use std::collections::{HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(doc)]
use super::Checkpointer;
use super::{BlobKind, CheckpointError};

/// Which checkpoints [`Checkpointer::prune`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PruneStrategy {
    /// In every namespace of the thread, the newest `n` checkpoints on the branch that ends at
    /// the head: the head, its parent, its parent's parent, … (`0` counts as `1`: the head is
    /// always kept). LangGraph's `keep_latest` is `KeepLatest(1)`.
    KeepLatest(usize),
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Checkpoints removed.
    pub checkpoints: u64,
    /// Channel blobs removed (values and deltas no kept checkpoint reads).
    pub blobs: u64,
    /// Pending writes removed (those of removed checkpoints).
    pub writes: u64,
}

impl PruneReport {
    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: PruneReport) {
        self.checkpoints += other.checkpoints;
        self.blobs += other.blobs;
        self.writes += other.writes;
    }

    /// Whether nothing was removed.
    pub fn is_empty(&self) -> bool {
        *self == PruneReport::default()
    }
}

/// The checkpoints `strategy` keeps in one namespace: walking from `head` through `parent_of`.
/// A parent that is already gone (pruned before) ends the walk. A head that is not among the
/// checkpoints is corruption: pruning then removes nothing rather than everything.
pub(crate) fn kept_checkpoints<'a>(
    head: Option<&'a str>,
    parent_of: &HashMap<&'a str, Option<&'a str>>,
    strategy: PruneStrategy,
) -> Result<HashSet<&'a str>, CheckpointError> {
    let PruneStrategy::KeepLatest(n) = strategy;
    if let Some(head) = head.filter(|h| !parent_of.contains_key(h)) {
        return Err(CheckpointError::Corrupt(format!(
            "the head checkpoint `{head}` is missing, so nothing was pruned; load an earlier \
             checkpoint by id, or delete the thread"
        )));
    }
    let mut kept = HashSet::new();
    let mut cursor = head;
    while let Some(id) = cursor {
        if kept.len() >= n.max(1) || !kept.insert(id) {
            break;
        }
        cursor = parent_of
            .get(id)
            .copied()
            .flatten()
            .filter(|p| parent_of.contains_key(p));
    }
    Ok(kept)
}

/// How a stored blob links to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobLink<'a> {
    pub kind: BlobKind,
    pub prev_version: Option<&'a str>,
}

/// The blobs (channel, version) the kept checkpoints read: each channel version they name and
/// every blob on its delta chain, back to a full value. Linear in the blobs visited: a chain
/// is walked until it meets a blob already reached (so a loop in a damaged store ends).
pub(crate) fn reachable_blobs<'a>(
    versions: impl IntoIterator<Item = (&'a str, &'a str)>,
    link: impl Fn(&str, &str) -> Option<BlobLink<'a>>,
) -> HashSet<(&'a str, &'a str)> {
    let mut reached = HashSet::new();
    for (channel, version) in versions {
        let mut cursor = Some(version);
        while let Some(v) = cursor {
            if !reached.insert((channel, v)) {
                break;
            }
            cursor = match link(channel, v) {
                Some(BlobLink {
                    kind: BlobKind::Delta,
                    prev_version,
                }) => prev_version,
                _ => None,
            };
        }
    }
    reached
}

/// A checkpoint as pruning sees it where a checkpoint holds the blobs it wrote (the in-memory
/// and SQLite back-ends): its links, and the links of its blobs (their version is its id).
pub(crate) struct HeldRow {
    pub id: String,
    pub parent_id: Option<String>,
    /// (channel, version) of each channel it reads.
    pub versions: Vec<(String, String)>,
    /// (channel, kind, previous version) of each blob it holds.
    pub blobs: Vec<(String, BlobKind, Option<String>)>,
}

/// A blob held apart from any checkpoint: one whose checkpoint was pruned while a kept
/// checkpoint still reads it, or a step of an exit-durability run.
pub(crate) struct LooseBlob {
    pub channel: String,
    pub version: String,
    pub kind: BlobKind,
    pub prev_version: Option<String>,
}

/// What pruning one namespace of held rows does.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct HeldPlan {
    /// How many checkpoints stay.
    pub kept: usize,
    /// The rows to remove (indexes into the rows), with their pending writes.
    pub removed: Vec<usize>,
    /// Blobs of removed rows that a kept checkpoint still reads, to keep apart: (row index,
    /// channel).
    pub keep_apart: Vec<(usize, String)>,
    /// Loose blobs no kept checkpoint reads (indexes into the loose blobs).
    pub drop_loose: Vec<usize>,
    /// Blobs removed: those of removed rows not kept apart, and the loose ones dropped.
    pub blobs_removed: u64,
}

/// Plans the pruning of one namespace whose checkpoints hold their blobs (see
/// [`kept_checkpoints`] and [`reachable_blobs`]).
pub(crate) fn plan_held(
    head: Option<&str>,
    rows: &[HeldRow],
    loose: &[LooseBlob],
    strategy: PruneStrategy,
) -> Result<HeldPlan, CheckpointError> {
    let parent_of = rows
        .iter()
        .map(|r| (r.id.as_str(), r.parent_id.as_deref()))
        .collect();
    let kept = kept_checkpoints(head, &parent_of, strategy)?;
    let mut links: HashMap<(&str, &str), BlobLink<'_>> = HashMap::new();
    for row in rows {
        for (channel, kind, prev) in &row.blobs {
            let link = BlobLink {
                kind: *kind,
                prev_version: prev.as_deref(),
            };
            links.insert((channel.as_str(), row.id.as_str()), link);
        }
    }
    for b in loose {
        let link = BlobLink {
            kind: b.kind,
            prev_version: b.prev_version.as_deref(),
        };
        links.insert((b.channel.as_str(), b.version.as_str()), link);
    }
    let read = reachable_blobs(
        rows.iter()
            .filter(|r| kept.contains(r.id.as_str()))
            .flat_map(|r| r.versions.iter().map(|(c, v)| (c.as_str(), v.as_str()))),
        |channel, version| links.get(&(channel, version)).copied(),
    );
    let mut plan = HeldPlan {
        kept: kept.len(),
        ..HeldPlan::default()
    };
    for (i, row) in rows.iter().enumerate() {
        if kept.contains(row.id.as_str()) {
            continue;
        }
        plan.removed.push(i);
        for (channel, ..) in &row.blobs {
            if read.contains(&(channel.as_str(), row.id.as_str())) {
                plan.keep_apart.push((i, channel.clone()));
            } else {
                plan.blobs_removed += 1;
            }
        }
    }
    for (i, b) in loose.iter().enumerate() {
        if !read.contains(&(b.channel.as_str(), b.version.as_str())) {
            plan.drop_loose.push(i);
            plan.blobs_removed += 1;
        }
    }
    Ok(plan)
}

#[cfg(feature = "postgres")]
/// A stored checkpoint as the PostgreSQL back-end reads it to prune: id, parent, and channel
/// versions as JSON text.
pub(crate) type CheckpointRow = (String, Option<String>, String);

#[cfg(feature = "postgres")]
/// A stored blob as the PostgreSQL back-end reads it to prune: channel, version, previous
/// version and kind name (no data).
pub(crate) type BlobRow = (String, String, Option<String>, String);

#[cfg(feature = "postgres")]
/// What pruning one namespace removes.
pub(crate) struct Plan<'a> {
    /// How many checkpoints stay.
    pub kept: usize,
    /// The checkpoints to remove, with their pending writes.
    pub checkpoints: Vec<&'a str>,
    /// The blobs (channel, version) to remove.
    pub blobs: Vec<(&'a str, &'a str)>,
}

#[cfg(feature = "postgres")]
/// Plans the pruning of one namespace from its rows (see [`kept_checkpoints`] and
/// [`reachable_blobs`]).
pub(crate) fn plan<'a>(
    thread_id: &str,
    head: Option<&'a str>,
    checkpoints: &'a [CheckpointRow],
    blobs: &'a [BlobRow],
    strategy: PruneStrategy,
) -> Result<Plan<'a>, CheckpointError> {
    let parent_of = checkpoints
        .iter()
        .map(|(id, parent, _)| (id.as_str(), parent.as_deref()))
        .collect();
    let kept = kept_checkpoints(head, &parent_of, strategy)?;
    let mut links: HashMap<(&str, &str), BlobLink<'_>> = HashMap::with_capacity(blobs.len());
    for (channel, version, prev_version, kind) in blobs {
        let kind = BlobKind::parse(kind).ok_or_else(|| {
            CheckpointError::Corrupt(format!(
                "thread `{thread_id}`: blob {channel}@{version} has unknown kind `{kind}`; \
                 nothing was pruned"
            ))
        })?;
        let prev_version = prev_version.as_deref();
        links.insert((channel, version), BlobLink { kind, prev_version });
    }
    let mut versions: Vec<(String, String)> = Vec::new();
    for (id, _, text) in checkpoints
        .iter()
        .filter(|(id, ..)| kept.contains(id.as_str()))
    {
        let map: HashMap<String, String> = serde_json::from_str(text).map_err(|e| {
            CheckpointError::Corrupt(format!(
                "thread `{thread_id}`, checkpoint `{id}`: unreadable channel versions ({e}); \
                 nothing was pruned"
            ))
        })?;
        versions.extend(map);
    }
    let read = reachable_blobs(
        versions.iter().map(|(c, v)| (c.as_str(), v.as_str())),
        |channel, version| links.get(&(channel, version)).copied(),
    );
    let gone_blobs = blobs
        .iter()
        .map(|(c, v, ..)| (c.as_str(), v.as_str()))
        .filter(|key| !read.contains(key))
        .collect();
    Ok(Plan {
        kept: kept.len(),
        checkpoints: checkpoints
            .iter()
            .map(|(id, ..)| id.as_str())
            .filter(|id| !kept.contains(id))
            .collect(),
        blobs: gone_blobs,
    })
}

/// `time` as kit writes checkpoint times (RFC 3339 UTC with milliseconds), which sort as text.
pub(crate) fn timestamp(time: SystemTime) -> String {
    let millis = time
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    crate::ids::rfc3339_from_millis(millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents<'a>(pairs: &[(&'a str, Option<&'a str>)]) -> HashMap<&'a str, Option<&'a str>> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn keep_latest_walks_the_heads_branch_not_the_newest_ids() {
        // c1 <- c2 <- c3 (abandoned), and c2 <- f4 <- f5 (a fork: the head).
        let p = parents(&[
            ("c1", None),
            ("c2", Some("c1")),
            ("c3", Some("c2")),
            ("f4", Some("c2")),
            ("f5", Some("f4")),
        ]);
        let kept = kept_checkpoints(Some("f5"), &p, PruneStrategy::KeepLatest(3)).unwrap();
        assert_eq!(kept, HashSet::from(["f5", "f4", "c2"]));
        let kept = kept_checkpoints(Some("f5"), &p, PruneStrategy::KeepLatest(0)).unwrap();
        assert_eq!(kept, HashSet::from(["f5"]), "0 still keeps the head");
        let kept = kept_checkpoints(Some("f5"), &p, PruneStrategy::KeepLatest(100)).unwrap();
        assert_eq!(kept.len(), 4, "the abandoned c3 is never kept");
    }

    #[test]
    fn keep_latest_stops_at_a_missing_parent_or_a_loop() {
        let p = parents(&[("c5", Some("c4")), ("c6", Some("c5"))]);
        let kept = kept_checkpoints(Some("c6"), &p, PruneStrategy::KeepLatest(10)).unwrap();
        assert_eq!(kept, HashSet::from(["c6", "c5"]));
        let looped = parents(&[("a", Some("b")), ("b", Some("a"))]);
        let kept = kept_checkpoints(Some("a"), &looped, PruneStrategy::KeepLatest(10)).unwrap();
        assert_eq!(kept, HashSet::from(["a", "b"]));
        assert!(
            kept_checkpoints(None, &p, PruneStrategy::KeepLatest(1))
                .unwrap()
                .is_empty()
        );
        let missing_head = kept_checkpoints(Some("gone"), &p, PruneStrategy::KeepLatest(1));
        let err = missing_head.unwrap_err().to_string();
        assert!(
            err.contains("`gone` is missing, so nothing was pruned"),
            "{err}"
        );
    }

    #[test]
    fn reachable_blobs_follow_delta_chains_to_the_full_value_only() {
        let links: HashMap<(&str, &str), BlobLink<'_>> = HashMap::from([
            (("m", "v1"), link(BlobKind::Full, None)),
            (("m", "v2"), link(BlobKind::Delta, Some("v1"))),
            (("m", "v3"), link(BlobKind::Full, None)),
            (("m", "v4"), link(BlobKind::Delta, Some("v3"))),
            (("m", "v5"), link(BlobKind::Delta, Some("v4"))),
            (("x", "v1"), link(BlobKind::Full, None)),
        ]);
        let reached = reachable_blobs([("m", "v5"), ("x", "v1")], |c, v| {
            links.get(&(c, v)).copied()
        });
        assert_eq!(
            reached,
            HashSet::from([("m", "v5"), ("m", "v4"), ("m", "v3"), ("x", "v1")]),
            "the chain stops at the full value v3: v1 and v2 are not read"
        );
    }

    #[test]
    fn a_delta_chain_that_loops_is_walked_once() {
        let links: HashMap<(&str, &str), BlobLink<'_>> = HashMap::from([
            (("m", "a"), link(BlobKind::Delta, Some("b"))),
            (("m", "b"), link(BlobKind::Delta, Some("a"))),
        ]);
        let reached = reachable_blobs([("m", "a")], |c, v| links.get(&(c, v)).copied());
        assert_eq!(reached.len(), 2);
    }

    #[test]
    fn reachability_is_linear_in_the_chain() {
        // A 100,000-long delta chain is one walk, not a quadratic one.
        let names: Vec<String> = (0..100_000).map(|i| format!("v{i:06}")).collect();
        let links: HashMap<&str, BlobLink<'_>> = names
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let prev = i.checked_sub(1).map(|p| names[p].as_str());
                let kind = if i == 0 {
                    BlobKind::Full
                } else {
                    BlobKind::Delta
                };
                (v.as_str(), link(kind, prev))
            })
            .collect();
        let calls = std::cell::Cell::new(0usize);
        let head = names.last().map(String::as_str).unwrap_or_default();
        let reached = reachable_blobs([("m", head), ("m", head)], |_, v| {
            calls.set(calls.get() + 1);
            links.get(v).copied()
        });
        assert_eq!(reached.len(), 100_000);
        assert_eq!(calls.get(), 100_000, "each blob is looked up once");
    }

    #[test]
    fn timestamps_sort_like_the_times() {
        let early = timestamp(UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123));
        let late = timestamp(UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_124));
        assert_eq!(early, "2023-11-14T22:13:20.123Z");
        assert!(early < late);
    }

    fn link(kind: BlobKind, prev_version: Option<&str>) -> BlobLink<'_> {
        BlobLink { kind, prev_version }
    }
}
