//! Cache policies: a node whose output for an input was already computed is not run again
//! (LangGraph's `CachePolicy`); its stored writes are applied instead.
//!
//! A [`CachePolicy`] says how a node's input becomes a key (by default a hash of the state, and
//! of the `Send` input when a `Send` started the task) and how long an entry lives. A
//! [`NodeCache`] keeps the entries: [`MemoryCache`] in the process, [`SqliteCache`] (feature
//! `sqlite`) and [`PostgresCache`] (feature `postgres`) in a table beside the checkpointers, so
//! a cache outlives the process and is shared by the workers of one database.
//!
//! Only successful outputs are kept; a node that fails or pauses is not cached. A cache that
//! cannot be reached is skipped (the node runs, and the failure is logged with `tracing`): a
//! cache is an optimisation, never a reason for a run to fail. A node whose output came from
//! the cache reports `"cached": true` in its `node_end` event.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use kit::graph::{CachePolicy, GraphBuilder, MemoryCache, NodeContext};
//! use kit::{END, START, State};
//!
//! #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Doc {
//!     text: String,
//!     summary: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
//! let runs = Arc::new(AtomicUsize::new(0));
//! let counted = runs.clone();
//! let graph = GraphBuilder::<Doc>::new("summaries")
//!     .sync_node("summarise", move |d: &Doc, _: &NodeContext| {
//!         counted.fetch_add(1, Ordering::SeqCst);
//!         DocUpdate::new().summary(d.text.chars().take(5).collect::<String>())
//!     })
//!     .cache_policy("summarise", CachePolicy::new())
//!     .cache(Arc::new(MemoryCache::new()))
//!     .edge(START, "summarise")
//!     .edge("summarise", END)
//!     .compile()?;
//! for _ in 0..3 {
//!     let out = graph.invoke(DocUpdate::new().text("hello world")).await?;
//!     assert_eq!(out.state().summary, "hello");
//! }
//! assert_eq!(runs.load(Ordering::SeqCst), 1, "computed once, then read from the cache");
//! # Ok(()) }
//! ```

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryCache;
#[cfg(feature = "postgres")]
pub use postgres::PostgresCache;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteCache;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::state::State;

/// How many writes a database cache makes between two sweeps of its expired entries.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
const SWEEP_EVERY: u64 = 256;

/// Counts a database cache's writes: every [`SWEEP_EVERY`]th also deletes the expired entries.
/// Reads skip them, but an entry no one writes over again would otherwise stay for good, one
/// row per distinct input a node ever saw.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Default)]
struct Sweeps(std::sync::atomic::AtomicU64);

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Sweeps {
    /// Whether this write sweeps (the first does, then every [`SWEEP_EVERY`]th).
    fn due(&self) -> bool {
        self.0
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(SWEEP_EVERY)
    }
}

/// A cache store failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node cache: {0}")]
pub struct CacheError(pub String);

/// Where cached node outputs live: entries by namespace (the graph and node) and key, each
/// with an optional time to live.
#[crate::async_trait]
pub trait NodeCache: Send + Sync + 'static {
    /// The entry, if present and not expired.
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Value>, CacheError>;
    /// Stores an entry (replacing one with the same key), expiring after `ttl` when given.
    async fn put(
        &self,
        namespace: &str,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CacheError>;
    /// Removes the entries of `namespace`, or every entry.
    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError>;
}

type KeyFn<S> = dyn Fn(&S, Option<&Value>) -> String + Send + Sync;

/// How a node's output is cached: the key of an input, and how long an entry lives.
#[must_use]
pub struct CachePolicy<S> {
    key: Arc<KeyFn<S>>,
    ttl: Option<Duration>,
}

impl<S> Clone for CachePolicy<S> {
    fn clone(&self) -> Self {
        CachePolicy {
            key: self.key.clone(),
            ttl: self.ttl,
        }
    }
}

impl<S> std::fmt::Debug for CachePolicy<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachePolicy")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl<S: State> Default for CachePolicy<S> {
    fn default() -> Self {
        CachePolicy {
            key: Arc::new(default_key::<S>),
            ttl: None,
        }
    }
}

impl<S: State> CachePolicy<S> {
    /// Keys by the whole input (a hash of the state, and of the `Send` input if any); entries
    /// never expire.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keys by `key(state)`: inputs with the same key share an entry (say, only the fields
    /// the node reads).
    pub fn key(mut self, key: impl Fn(&S) -> String + Send + Sync + 'static) -> Self {
        self.key = Arc::new(move |state, arg| match arg {
            Some(arg) => format!("{}|{}", key(state), hash(arg.to_string().as_bytes())),
            None => key(state),
        });
        self
    }

    /// Entries expire after `ttl`.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    pub(crate) fn key_of(&self, state: &S, arg: Option<&Value>) -> String {
        (self.key)(state, arg)
    }

    pub(crate) fn time_to_live(&self) -> Option<Duration> {
        self.ttl
    }
}

fn default_key<S: State>(state: &S, arg: Option<&Value>) -> String {
    let mut bytes = serde_json::to_vec(state).unwrap_or_default();
    if let Some(arg) = arg {
        bytes.push(0);
        bytes.extend(arg.to_string().as_bytes());
    }
    hash(&bytes)
}

/// A 128-bit hex digest (two FNV-1a passes with different seeds): cheap and stable.
fn hash(bytes: &[u8]) -> String {
    let a = crate::ids::fnv1a(bytes);
    let mut salted = Vec::with_capacity(bytes.len() + 1);
    salted.push(0x9e);
    salted.extend_from_slice(bytes);
    let b = crate::ids::fnv1a(&salted);
    format!("{a:016x}{b:016x}")
}

#[cfg(test)]
mod tests;
