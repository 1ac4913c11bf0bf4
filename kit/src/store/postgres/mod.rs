//! The PostgreSQL store: items shared by every process and machine using one database.

mod queries;
mod schema;

pub use schema::POSTGRES_STORE_SCHEMA_VERSION;

use serde_json::Value;

use super::embed::CompiledIndex;
use super::item::{from_micros, micros, now_micros};
use super::search::Collector;
use super::{
    GetOptions, IndexConfig, Item, ListNamespaces, Namespace, PutOptions, Search, SearchItem,
    Store, StoreError, TtlConfig, check_address, check_list, check_put,
};
use crate::pg::{Database, describe};

/// A [`Store`] in PostgreSQL, through the connection pool kit's PostgreSQL back-ends share:
/// every process and machine using the database sees the same items. Cheap to clone; clones
/// share the pool.
///
/// Values are `jsonb`: a search's equality filters narrow the scan in the database (`@>`),
/// the rest of the filter is checked on the rows that come back, one batch at a time. A string
/// in a value cannot hold the NUL character (PostgreSQL's `jsonb` has no room for it); such a
/// put is refused. Connections are made without TLS: use a local server, a private network or
/// a TLS terminating proxy.
///
/// ```no_run
/// # async fn demo() -> Result<(), kit::store::StoreError> {
/// use kit::store::PostgresStore;
/// let store = PostgresStore::connect("postgres://kit:secret@db.internal/kit").await?;
/// # let _ = store;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    db: Database,
    index: Option<CompiledIndex>,
    ttl: TtlConfig,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.db.location)
            .field("schema", &self.db.schema)
            .field("indexed", &self.index.is_some())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// A failure inside a store call: the driver's, or a store error.
pub(super) enum Fail {
    Sql(tokio_postgres::Error),
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

pub(super) type R<T> = Result<T, Fail>;

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`) and creates
    /// or migrates the store's tables in the connection's default schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::build(url, None).await
    }

    /// [`connect`](Self::connect), with the tables in the PostgreSQL schema `schema` (created
    /// if needed): a lower-case identifier such as `kit_memory`.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        Self::build(url, Some(schema)).await
    }

    async fn build(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let db = Database::open(url, schema, "kit-store").map_err(StoreError::Backend)?;
        let store = PostgresStore {
            db,
            index: None,
            ttl: TtlConfig::default(),
        };
        store.migrate().await?;
        Ok(store)
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

    /// Drops the schema given to [`connect_in_schema`](Self::connect_in_schema) with all its
    /// tables (tests clean up with it). Does nothing without a schema.
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        self.db.drop_schema().await.map_err(StoreError::Backend)
    }

    pub(super) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.db.client().await.map_err(StoreError::Backend)
    }

    fn error(&self, op: &str, fail: Fail) -> StoreError {
        match fail {
            Fail::Store(e) => e,
            Fail::Sql(e) => StoreError::Backend(format!(
                "PostgreSQL {op} on {} failed: {}",
                self.db.location,
                describe(&e)
            )),
        }
    }

    async fn refresh(&self, mut items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        if !items.iter().any(|i| i.expires_at.is_some()) {
            return Ok(items);
        }
        let op = "refreshing times to live";
        let client = self.client().await?;
        let now = now_micros();
        for item in items.iter_mut().filter(|i| i.expires_at.is_some()) {
            let ns = item.namespace.encoded();
            item.expires_at = queries::refresh(&client, &ns, &item.key, now)
                .await
                .map_err(|e| self.error(op, e))?
                .map(from_micros);
        }
        Ok(items)
    }
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn get_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        options: GetOptions,
    ) -> Result<Option<Item>, StoreError> {
        check_address(namespace, key)?;
        let client = self.client().await?;
        let found = queries::get(&client, &namespace.encoded(), key, now_micros())
            .await
            .map_err(|e| self.error("reading an item", e))?;
        drop(client);
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
        if value.iter().any(|(k, v)| k.contains('\0') || has_nul(v)) {
            return Err(StoreError::InvalidValue {
                key: crate::text::clip(key, 80),
                reason: "a string in it holds the NUL character (\\u0000), which PostgreSQL \
                         cannot store; remove it or encode the text (e.g. base64)"
                    .to_string(),
            });
        }
        let vectors = match &self.index {
            Some(index) => index.embed_item(&value, &options.index, key).await?,
            None => Vec::new(),
        };
        let text = Value::Object(value).to_string();
        let put = queries::Put {
            ns: namespace.encoded(),
            key: key.to_string(),
            value: text,
            ttl: self.ttl.ttl_for(&options).map(micros),
            vectors,
        };
        let mut client = self.client().await?;
        queries::put(&mut client, &put, now_micros())
            .await
            .map_err(|e| self.error("writing an item", e))
    }

    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<(), StoreError> {
        check_address(namespace, key)?;
        let mut client = self.client().await?;
        queries::delete(&mut client, &namespace.encoded(), key)
            .await
            .map_err(|e| self.error("deleting an item", e))
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
        let mut collector = Collector::new(search, query.as_deref().map(|q| (q, dims)));
        let mut client = self.client().await?;
        queries::search(&mut client, search, &mut collector, now_micros())
            .await
            .map_err(|e| self.error("searching", e))?;
        drop(client);
        let results = collector.finish();
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
        let mut client = self.client().await?;
        queries::keys(&mut client, prefix, now_micros())
            .await
            .map_err(|e| self.error("listing keys", e))
    }

    async fn list_namespaces(&self, list: &ListNamespaces) -> Result<Vec<Namespace>, StoreError> {
        check_list(list)?;
        let mut client = self.client().await?;
        queries::list_namespaces(&mut client, list, now_micros())
            .await
            .map_err(|e| self.error("listing namespaces", e))
    }

    async fn sweep_expired(&self) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        queries::sweep(&mut client, now_micros())
            .await
            .map_err(|e| self.error("deleting expired items", e))
    }
}

/// Whether a string (or an object's key) anywhere in `value` holds a NUL character.
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}
