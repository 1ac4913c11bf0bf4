//! The memory store: items in a sorted map in this process (tests, demos, one-process apps).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use super::embed::{CompiledIndex, Vectors};
use super::item::{from_micros, micros, now_micros};
use super::search::{Collector, Flow};
use super::{
    GetOptions, IndexConfig, Item, ListNamespaces, Namespace, NamespacePage, PutOptions, Search,
    SearchItem, Store, StoreError, TtlConfig, check_address, check_list, check_put,
};

/// A [`Store`] in memory: nothing survives the process. Cheap to clone; clones share the items.
///
/// Items sit in a map sorted by namespace and key, so a search scans only its prefix; a search
/// without a query sorts the prefix's items newest first, one with a query scores them.
///
/// ```
/// use kit::store::{MemoryStore, Namespace, Store};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::store::StoreError> {
/// let store = MemoryStore::new();
/// let ns = Namespace::new(["notes"])?;
/// store.put(&ns, "a", json!({"text": "hello"})).await?;
/// assert!(store.get(&ns, "a").await?.is_some());
/// store.delete(&ns, "a").await?;
/// assert!(store.get(&ns, "a").await?.is_none());
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    items: Arc<RwLock<BTreeMap<(String, String), Entry>>>,
    index: Option<CompiledIndex>,
    ttl: TtlConfig,
}

struct Entry {
    namespace: Namespace,
    value: Map<String, Value>,
    created: i64,
    updated: i64,
    ttl: Option<i64>,
    expires: Option<i64>,
    vectors: Vectors,
}

impl Entry {
    fn live(&self, now: i64) -> bool {
        self.expires.is_none_or(|e| e > now)
    }

    fn item(&self, key: &str) -> Item {
        Item {
            namespace: self.namespace.clone(),
            key: key.to_string(),
            value: self.value.clone(),
            created_at: from_micros(self.created),
            updated_at: from_micros(self.updated),
            expires_at: self.expires.map(from_micros),
        }
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("items", &self.len())
            .field("indexed", &self.index.is_some())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl MemoryStore {
    /// An empty store, without an index or a default time to live.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the store searchable by meaning (see [`IndexConfig`]); the error says which
    /// field path is wrong.
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

    /// The number of items held, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.items.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pushes back the expiry of the live items among `keys` that have a time to live.
    fn refresh(&self, keys: &[(String, String)]) {
        let now = now_micros();
        let mut items = self.items.write().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            if let Some(e) = items.get_mut(k)
                && e.live(now)
                && let Some(ttl) = e.ttl
            {
                e.expires = Some(now.saturating_add(ttl));
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn get_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        options: GetOptions,
    ) -> Result<Option<Item>, StoreError> {
        check_address(namespace, key)?;
        let k = (namespace.encoded(), key.to_string());
        let found = {
            let items = self.items.read().unwrap_or_else(|p| p.into_inner());
            let now = now_micros();
            items
                .get(&k)
                .filter(|e| e.live(now))
                .map(|e| (e.item(key), e.ttl.is_some()))
        };
        let Some((mut item, has_ttl)) = found else {
            return Ok(None);
        };
        if has_ttl && self.ttl.refresh(options.refresh_ttl) {
            self.refresh(std::slice::from_ref(&k));
            let items = self.items.read().unwrap_or_else(|p| p.into_inner());
            item.expires_at = items.get(&k).and_then(|e| e.expires).map(from_micros);
        }
        Ok(Some(item))
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
        let ttl = self.ttl.ttl_for(&options).map(micros);
        let now = now_micros();
        let k = (namespace.encoded(), key.to_string());
        let mut items = self.items.write().unwrap_or_else(|p| p.into_inner());
        let created = items
            .get(&k)
            .filter(|e| e.live(now))
            .map_or(now, |e| e.created);
        items.insert(
            k,
            Entry {
                namespace: namespace.clone(),
                value,
                created,
                updated: now,
                ttl,
                expires: ttl.map(|t| now.saturating_add(t)),
                vectors,
            },
        );
        Ok(())
    }

    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<(), StoreError> {
        check_address(namespace, key)?;
        let mut items = self.items.write().unwrap_or_else(|p| p.into_inner());
        items.remove(&(namespace.encoded(), key.to_string()));
        Ok(())
    }

    async fn keys(&self, prefix: &Namespace) -> Result<Vec<String>, StoreError> {
        let items = self.items.read().unwrap_or_else(|p| p.into_inner());
        let now = now_micros();
        let live = |(_, e): &(&(String, String), &Entry)| e.live(now);
        let keys: std::collections::BTreeSet<&str> = if prefix.is_empty() {
            items
                .iter()
                .filter(live)
                .map(|((_, k), _)| k.as_str())
                .collect()
        } else {
            let (low, high) = prefix.range();
            items
                .range((low, String::new())..(high, String::new()))
                .filter(live)
                .map(|((_, k), _)| k.as_str())
                .collect()
        };
        Ok(keys.into_iter().map(str::to_string).collect())
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
        let results = {
            let items = self.items.read().unwrap_or_else(|p| p.into_inner());
            let now = now_micros();
            let mut candidates: Vec<(&(String, String), &Entry)> = if search.prefix.is_empty() {
                items.iter().filter(|(_, e)| e.live(now)).collect()
            } else {
                let (low, high) = search.prefix.range();
                items
                    .range((low, String::new())..(high, String::new()))
                    .filter(|(_, e)| e.live(now))
                    .collect()
            };
            if !collector.wants_vectors() {
                // Newest first; the map's order breaks ties.
                candidates.sort_by_key(|c| std::cmp::Reverse(c.1.updated));
            }
            for ((_, key), entry) in candidates {
                if !collector.accepts(&entry.value) {
                    continue;
                }
                // A page far into the results (the filesystem lists its files page by page)
                // skips the earlier ones without copying their values.
                if collector.done() {
                    break;
                }
                if collector.skips_next() {
                    collector.skip();
                    continue;
                }
                let vectors = entry.vectors.iter().map(|(_, v)| v.as_slice());
                if collector.offer(entry.item(key), vectors)? == Flow::Done {
                    break;
                }
            }
            collector.finish()
        };
        if self.ttl.refresh(search.refresh_ttl) && results.iter().any(|r| r.expires_at.is_some()) {
            let keys: Vec<(String, String)> = results
                .iter()
                .map(|r| (r.namespace.encoded(), r.key.clone()))
                .collect();
            self.refresh(&keys);
            let items = self.items.read().unwrap_or_else(|p| p.into_inner());
            return Ok(results
                .into_iter()
                .map(|mut r| {
                    let k = (r.item.namespace.encoded(), r.item.key.clone());
                    r.item.expires_at = items.get(&k).and_then(|e| e.expires).map(from_micros);
                    r
                })
                .collect());
        }
        Ok(results)
    }

    async fn list_namespaces(&self, list: &ListNamespaces) -> Result<Vec<Namespace>, StoreError> {
        check_list(list)?;
        let items = self.items.read().unwrap_or_else(|p| p.into_inner());
        let now = now_micros();
        let mut page = NamespacePage::new(list);
        let mut last: Option<&str> = None;
        for ((ns, _), entry) in items.iter() {
            if !entry.live(now) || last == Some(ns.as_str()) {
                continue;
            }
            last = Some(ns);
            if !page.offer(entry.namespace.clone()) {
                break;
            }
        }
        Ok(page.finish())
    }

    async fn sweep_expired(&self) -> Result<u64, StoreError> {
        let now = now_micros();
        let mut items = self.items.write().unwrap_or_else(|p| p.into_inner());
        let before = items.len();
        items.retain(|_, e| e.live(now));
        Ok((before - items.len()) as u64)
    }
}
