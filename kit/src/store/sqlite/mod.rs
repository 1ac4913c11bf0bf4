//! The SQLite store: items in a file (the checkpointer's, or one of their own).

mod queries;
mod schema;

pub use schema::SQLITE_STORE_SCHEMA_VERSION;

use std::path::Path;

use serde_json::Value;

use super::embed::CompiledIndex;
use super::item::{from_micros, micros, now_micros};
use super::search::Collector;
use super::{
    GetOptions, IndexConfig, Item, ListNamespaces, Namespace, PutOptions, Search, SearchItem,
    Store, StoreError, TtlConfig, check_address, check_list, check_put,
};
use crate::sqlite::{Database, Fail};

/// A [`Store`] in a SQLite file (WAL mode): it survives restarts, and every process on the
/// machine that opens the file shares it. Cheap to clone; clones share the connections.
///
/// The tables (`kit_store_items`, `kit_store_vectors`, `kit_store_schema_version`) can sit in
/// the checkpointer's file: open both on one path. Opening migrates the schema forward; a file
/// from a newer kit is refused with [`StoreError::SchemaTooNew`].
///
/// ```
/// use kit::store::{Namespace, SqliteStore, Store};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::store::StoreError> {
/// let dir = tempfile::tempdir().map_err(|e| kit::store::StoreError::Backend(e.to_string()))?;
/// let path = dir.path().join("memory.sqlite");
/// let ns = Namespace::new(["users", "ada"])?;
/// SqliteStore::open(&path)?.put(&ns, "lang", json!({"text": "Rust"})).await?;
/// // Another process, or the next run: the item is there.
/// let again = SqliteStore::open(&path)?;
/// assert_eq!(again.get(&ns, "lang").await?.unwrap().value["text"], "Rust");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    db: Database,
    index: Option<CompiledIndex>,
    ttl: TtlConfig,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.db.location())
            .field("indexed", &self.index.is_some())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// A failure inside a store call.
type R<T> = Result<T, Fail<StoreError>>;

impl From<StoreError> for Fail<StoreError> {
    fn from(e: StoreError) -> Self {
        Fail::Own(e)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and migrates the store's tables.
    /// A blocking call: make it at start-up.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let db = Database::open(path.as_ref()).map_err(StoreError::Backend)?;
        Self::with_database(db)
    }

    /// A private in-memory database (gone when the last clone is dropped).
    pub fn in_memory() -> Result<Self, StoreError> {
        let db = Database::in_memory().map_err(StoreError::Backend)?;
        Self::with_database(db)
    }

    fn with_database(db: Database) -> Result<Self, StoreError> {
        db.migrate(schema::VERSION_TABLE, schema::MIGRATIONS)
            .map_err(|e| match e {
                Ok(found) => StoreError::SchemaTooNew {
                    found,
                    supported: SQLITE_STORE_SCHEMA_VERSION,
                },
                Err(message) => StoreError::Backend(message),
            })?;
        Ok(SqliteStore {
            db,
            index: None,
            ttl: TtlConfig::default(),
        })
    }

    /// Makes the store searchable by meaning (see [`IndexConfig`]).
    pub fn index(mut self, index: IndexConfig) -> Result<Self, StoreError> {
        self.index = Some(index.compile()?);
        Ok(self)
    }

    /// Sets how times to live behave (see [`TtlConfig`]).
    #[must_use]
    pub fn ttl_config(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.db.path()
    }

    async fn read<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&rusqlite::Connection) -> R<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.db.read(op, f).await.map_err(StoreError::Backend)?
    }

    async fn write<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> R<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.db.write(op, f).await.map_err(StoreError::Backend)?
    }

    /// Pushes back the expiry of `items` that have a time to live, and updates their
    /// `expires_at`.
    async fn refresh(&self, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        if !items.iter().any(|i| i.expires_at.is_some()) {
            return Ok(items);
        }
        self.write("refreshing times to live", move |tx| {
            let now = now_micros();
            let mut out = items;
            for item in out.iter_mut().filter(|i| i.expires_at.is_some()) {
                let ns = item.namespace.encoded();
                item.expires_at = queries::refresh(tx, &ns, &item.key, now)?.map(from_micros);
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn get_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        options: GetOptions,
    ) -> Result<Option<Item>, StoreError> {
        check_address(namespace, key)?;
        let (ns, k) = (namespace.encoded(), key.to_string());
        let found = self
            .read("reading an item", move |conn| {
                queries::get(conn, &ns, &k, now_micros())
            })
            .await?;
        match found {
            Some(item) if item.expires_at.is_some() && self.ttl.refresh(options.refresh_ttl) => {
                Ok(self.refresh(vec![item]).await?.pop())
            }
            other => Ok(other),
        }
    }

    async fn put_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        let value = check_put(namespace, key, value)?;
        let vectors = match &self.index {
            Some(index) => index.embed_item(&value, &options.index, key).await?,
            None => Vec::new(),
        };
        let put = queries::Put {
            ns: namespace.encoded(),
            key: key.to_string(),
            value: Value::Object(value).to_string(),
            ttl: self.ttl.ttl_for(&options).map(micros),
            vectors,
        };
        self.write("writing an item", move |tx| {
            queries::put(tx, &put, now_micros())
        })
        .await
    }

    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<(), StoreError> {
        check_address(namespace, key)?;
        let (ns, k) = (namespace.encoded(), key.to_string());
        self.write("deleting an item", move |tx| queries::delete(tx, &ns, &k))
            .await
    }

    async fn search(&self, search: &Search) -> Result<Vec<SearchItem>, StoreError> {
        let query = match (&search.query, &self.index) {
            (Some(q), Some(index)) => Some(index.embed_query(q).await?),
            (Some(q), None) => {
                return Err(StoreError::NoIndex {
                    query: crate::text::clip(q, 80),
                });
            }
            (None, _) => None,
        };
        let dims = self.index.as_ref().map_or(0, |i| i.dims);
        let search_owned = search.clone();
        let results = self
            .read("searching", move |conn| {
                let mut collector =
                    Collector::new(&search_owned, query.as_deref().map(|q| (q, dims)));
                queries::search(conn, &search_owned.prefix, &mut collector, now_micros())?;
                Ok(collector.finish())
            })
            .await?;
        if !self.ttl.refresh(search.refresh_ttl) {
            return Ok(results);
        }
        let scores: Vec<Option<f64>> = results.iter().map(|r| r.score).collect();
        let items = self
            .refresh(results.into_iter().map(|r| r.item).collect())
            .await?;
        Ok(items
            .into_iter()
            .zip(scores)
            .map(|(item, score)| SearchItem { item, score })
            .collect())
    }

    async fn keys(&self, prefix: &Namespace) -> Result<Vec<String>, StoreError> {
        let prefix = prefix.clone();
        self.read("listing keys", move |conn| {
            queries::keys(conn, &prefix, now_micros())
        })
        .await
    }

    async fn list_namespaces(&self, list: &ListNamespaces) -> Result<Vec<Namespace>, StoreError> {
        check_list(list)?;
        let list = list.clone();
        self.read("listing namespaces", move |conn| {
            queries::list_namespaces(conn, &list, now_micros())
        })
        .await
    }

    async fn sweep_expired(&self) -> Result<u64, StoreError> {
        self.write("deleting expired items", |tx| {
            queries::sweep(tx, now_micros())
        })
        .await
    }
}
