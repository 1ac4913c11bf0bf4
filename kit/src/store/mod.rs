//! Long-term memory: the [`Store`] trait (LangGraph's `BaseStore`), its memory, SQLite and
//! PostgreSQL back-ends, and semantic search through a pluggable [`Embedder`].
//!
//! # The model
//!
//! A checkpointer keeps one thread's state; a store keeps what outlives threads — what an agent
//! learnt about a user, shared notes, `/memories/` files. It holds **items**: a JSON object
//! under a [`Namespace`] (a path of labels such as `("users", "ada", "memories")`) and a key,
//! with the times it was created and last updated.
//!
//! * [`put`](Store::put) creates or replaces an item, [`get`](Store::get) reads one,
//!   [`delete`](Store::delete) removes one.
//! * [`search`](Store::search) returns the items under a namespace prefix whose value passes a
//!   [`Filter`] — most recently updated first, or ranked by similarity to a natural-language
//!   query when the store has an [`IndexConfig`] — one page at a time (`limit`, `offset`).
//! * [`list_namespaces`](Store::list_namespaces) lists the namespaces holding items, matched by
//!   prefix and suffix patterns (`*` for any label) and cut to a depth.
//! * An item may have a **time to live** ([`PutOptions::ttl`], or the store's
//!   [`TtlConfig::default_ttl`]): it expires that long after its last write, or its last read
//!   when reads refresh (the default). An expired item is never returned, listed or found;
//!   [`Store::sweep_expired`] (or [`spawn_sweeper`]) deletes them.
//!
//! The names and semantics are LangGraph's, so habits carry over; where kit differs (filters
//! evaluated alike on every back-end, expired items never returned, `.` allowed in labels, …)
//! `docs/differences.md` says so and why.
//!
//! ```
//! use kit::store::{Filter, MemoryStore, Namespace, Search, Store};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::store::StoreError> {
//! let store = MemoryStore::new();
//! let ada = Namespace::new(["users", "ada"])?;
//! store.put(&ada, "food", json!({"kind": "preference", "text": "Ada is vegetarian"})).await?;
//! store.put(&ada, "lang", json!({"kind": "preference", "text": "Ada writes Rust"})).await?;
//! store.put(&ada, "met", json!({"kind": "event", "text": "Met Ada in Lyon"})).await?;
//!
//! let item = store.get(&ada, "food").await?.expect("just put");
//! assert_eq!(item.value["text"], "Ada is vegetarian");
//!
//! let prefs = store
//!     .search(&Search::new(Namespace::new(["users"])?).filter(Filter::new().eq("kind", "preference")))
//!     .await?;
//! assert_eq!(prefs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["lang", "food"]);
//! # Ok(()) }
//! ```
//!
//! # Back-ends
//!
//! | | [`MemoryStore`] | `SqliteStore` (feature `sqlite`) | `PostgresStore` (feature `postgres`) |
//! | --- | --- | --- | --- |
//! | Survives the process | no | yes: a file (the checkpointer's, or one of its own) | yes |
//! | Shared between processes | no | on one machine | across machines |
//! | Search scan | the items under the prefix | an index range scan of the prefix | the same, equality filters narrowed by `@>` |
//! | Vectors | beside each item | table `kit_store_vectors` | table `kit_store_vectors` |
//!
//! One conformance suite (`tests/store_conformance.rs`) runs against all three. Filters are
//! evaluated in Rust on each candidate (never spliced into SQL), so every back-end answers alike
//! and no filter can inject SQL. A search without a query reads candidates newest first and
//! stops once its page is full; with a query, every candidate under the prefix is scored
//! (brute-force cosine, see [`embed`]), holding one page in memory.
//!
//! # Where a store is reachable
//!
//! Give a graph ([`GraphBuilder::store`](crate::GraphBuilder::store)) or an agent
//! ([`AgentBuilder::store`](crate::agent::AgentBuilder::store), `#[agent(store = ..)]`) a
//! store, or one run ([`RunOptions::store`](crate::RunOptions::store)). Nodes read it with
//! [`NodeContext::store`](crate::NodeContext::store), tools with
//! [`ToolContext::store`](crate::tool::ToolContext::store), middleware with
//! [`Runtime::store`](crate::agent::Runtime::store). Subgraphs and subagents without a store of
//! their own use their parent's. The filesystem middleware can keep a path prefix such as
//! `/memories/` in it ([`StoreBackend`](crate::middleware::filesystem::StoreBackend) under a
//! [`CompositeBackend`](crate::middleware::filesystem::CompositeBackend)), so those files
//! outlive the thread.

pub mod embed;
mod error;
mod filter;
mod item;
mod memory;
mod namespace;
mod ops;
#[cfg(feature = "postgres")]
mod postgres;
pub(crate) mod search;
#[cfg(feature = "sqlite")]
mod sqlite;
mod sweeper;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;

#[cfg(feature = "embeddings")]
pub use embed::{DEFAULT_EMBEDDING_MODEL, OpenAiEmbeddings};
pub use embed::{Embedder, IndexConfig, IntoEmbedder};
pub use error::StoreError;
pub use filter::Filter;
pub use item::{Item, SearchItem};
pub use memory::MemoryStore;
pub use namespace::{MAX_KEY_BYTES, MAX_NAMESPACE_BYTES, Namespace, WILDCARD};
pub use ops::{
    DEFAULT_LIST_LIMIT, DEFAULT_SEARCH_LIMIT, GetOptions, ListNamespaces, PutOptions, Search,
    TtlConfig,
};
#[cfg(feature = "postgres")]
pub use postgres::{POSTGRES_STORE_SCHEMA_VERSION, PostgresStore};
#[cfg(feature = "sqlite")]
pub use sqlite::{SQLITE_STORE_SCHEMA_VERSION, SqliteStore};
pub use sweeper::{SweeperTask, spawn_sweeper};

use serde_json::{Map, Value};

/// Long-term memory shared across threads: namespaced JSON items (LangGraph's `BaseStore`).
///
/// Object-safe: graphs, agents and contexts hold an `Arc<dyn Store>`. Back-ends implement the
/// six required methods; [`get`](Store::get) and [`put`](Store::put) are the short forms with
/// default options. See the [module docs](self) for the model.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The item at `namespace` and `key`, unless there is none or it expired.
    async fn get_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        options: GetOptions,
    ) -> Result<Option<Item>, StoreError>;

    /// Creates or replaces the item at `namespace` and `key`. `value` must be a JSON object;
    /// with an index, its fields are embedded first (an embedding failure stores nothing).
    async fn put_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError>;

    /// Deletes the item at `namespace` and `key` (nothing happens when there is none).
    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<(), StoreError>;

    /// One page of the items under a namespace prefix that pass a filter (see [`Search`]).
    async fn search(&self, search: &Search) -> Result<Vec<SearchItem>, StoreError>;

    /// The namespaces holding items, matched, cut and paged (see [`ListNamespaces`]).
    async fn list_namespaces(&self, list: &ListNamespaces) -> Result<Vec<Namespace>, StoreError>;

    /// Deletes the expired items; returns how many.
    async fn sweep_expired(&self) -> Result<u64, StoreError>;

    /// [`get_opts`](Store::get_opts) with the store's defaults.
    async fn get(&self, namespace: &Namespace, key: &str) -> Result<Option<Item>, StoreError> {
        self.get_opts(namespace, key, GetOptions::default()).await
    }

    /// [`put_opts`](Store::put_opts) with the store's defaults.
    async fn put(&self, namespace: &Namespace, key: &str, value: Value) -> Result<(), StoreError> {
        self.put_opts(namespace, key, value, PutOptions::default())
            .await
    }

    /// The distinct keys of the live items under a namespace prefix, sorted, without their
    /// values (what the filesystem's [`StoreBackend`](crate::middleware::filesystem::StoreBackend)
    /// lists). The default pages through [`search`](Store::search), which costs the square of
    /// the items over the page size; kit's stores read the keys in one pass.
    async fn keys(&self, prefix: &Namespace) -> Result<Vec<String>, StoreError> {
        const PAGE: usize = 100;
        let mut keys = std::collections::BTreeSet::new();
        let mut offset = 0;
        loop {
            let page = self
                .search(
                    &Search::new(prefix.clone())
                        .limit(PAGE)
                        .offset(offset)
                        .refresh_ttl(false),
                )
                .await?;
            let n = page.len();
            keys.extend(page.into_iter().map(|i| i.item.key));
            if n < PAGE {
                return Ok(keys.into_iter().collect());
            }
            offset += n;
        }
    }
}

crate::shared::into_shared! {
    /// What the builders' `store(..)` methods accept: a store, or one already shared.
    IntoStore::into_store => Store
}

/// Checks the arguments of a put and unwraps the object.
pub(crate) fn check_put(
    namespace: &Namespace,
    key: &str,
    value: Value,
) -> Result<Map<String, Value>, StoreError> {
    namespace.check_item()?;
    namespace::check_key(key)?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(StoreError::InvalidValue {
            key: crate::text::clip(key, 80),
            reason: format!(
                "it is {}, but store values are JSON objects (LangGraph's dict) so that search \
                 filters can name their fields; wrap it, e.g. {{\"value\": ...}}",
                crate::text::json_type(&other)
            ),
        }),
    }
}

/// Checks the arguments of a get or a delete.
pub(crate) fn check_address(namespace: &Namespace, key: &str) -> Result<(), StoreError> {
    namespace.check_item()?;
    namespace::check_key(key)
}

/// Checks a listing's patterns.
pub(crate) fn check_list(list: &ListNamespaces) -> Result<(), StoreError> {
    namespace::check_labels(&list.prefix, true)?;
    namespace::check_labels(&list.suffix, true)
}

/// What a listing keeps of the namespaces it is fed in sorted order: those matching its
/// patterns, cut to its depth, each once, one page.
pub(crate) struct NamespacePage<'a> {
    list: &'a ListNamespaces,
    skipped: usize,
    /// The last distinct namespace taken or skipped: sorted input cut to a depth stays sorted,
    /// so a duplicate is always the previous one.
    prev: Option<Namespace>,
    out: Vec<Namespace>,
}

impl<'a> NamespacePage<'a> {
    pub(crate) fn new(list: &'a ListNamespaces) -> Self {
        NamespacePage {
            list,
            skipped: 0,
            prev: None,
            out: Vec::new(),
        }
    }

    /// Offers the next namespace (in sorted order); false once the page is full.
    pub(crate) fn offer(&mut self, namespace: Namespace) -> bool {
        if self.out.len() >= self.list.limit {
            return false;
        }
        let labels = namespace.labels();
        if !namespace::matches_pattern(labels, &self.list.prefix, false)
            || !namespace::matches_pattern(labels, &self.list.suffix, true)
        {
            return true;
        }
        let cut = match self.list.max_depth {
            Some(d) => namespace.truncated(d),
            None => namespace,
        };
        if self.prev.as_ref() == Some(&cut) {
            return true;
        }
        self.prev = Some(cut.clone());
        if self.skipped < self.list.offset {
            self.skipped += 1;
            return true;
        }
        self.out.push(cut);
        self.out.len() < self.list.limit
    }

    pub(crate) fn finish(self) -> Vec<Namespace> {
        self.out
    }
}
