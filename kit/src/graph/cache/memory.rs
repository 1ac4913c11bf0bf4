//! The in-process cache store.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{CacheError, NodeCache};

/// An entry's address: (namespace, key).
type Id = (String, String);

/// An entry: its value, when it expires, and the number it was put under.
type Entry = (Value, Option<Instant>, u64);

/// The entries and the order they were put in.
#[derive(Default)]
struct Entries {
    map: HashMap<Id, Entry>,
    /// Oldest first, each with the number its entry was put under: one that no longer
    /// matches names an entry already gone (read expired, or cleared) and is skipped.
    order: VecDeque<(Id, u64)>,
    /// The number the next new entry is put under.
    next: u64,
}

impl Entries {
    /// Drops the oldest entries until at most `capacity` are left.
    fn trim(&mut self, capacity: usize) {
        while self.map.len() > capacity {
            let Some((oldest, number)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&oldest).is_some_and(|e| e.2 == number) {
                self.map.remove(&oldest);
            }
        }
        // Addresses of entries that are gone pile up when the same keys come and go: start
        // the order again from what is left once it is twice as long.
        if self.order.len() > capacity.saturating_mul(2).max(64) {
            let map = &self.map;
            self.order
                .retain(|(id, number)| map.get(id).is_some_and(|e| e.2 == *number));
        }
    }
}

/// Node outputs kept in the process's memory: at most 10,000 entries by default (the oldest
/// are dropped first), expired entries dropped when read.
///
/// ```
/// use kit::graph::MemoryCache;
///
/// let small = MemoryCache::with_capacity(100);
/// # drop(small);
/// ```
pub struct MemoryCache {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl Default for MemoryCache {
    fn default() -> Self {
        MemoryCache::with_capacity(DEFAULT_CAPACITY)
    }
}

/// The entries a [`MemoryCache`] holds unless told otherwise: a node cached by its whole
/// state makes an entry per distinct state, without end in a long-running process.
const DEFAULT_CAPACITY: usize = 10_000;

impl std::fmt::Debug for MemoryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCache")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl MemoryCache {
    /// An empty cache of at most 10,000 entries.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache of at most `entries` entries (at least 1); beyond that the oldest are
    /// dropped.
    pub fn with_capacity(entries: usize) -> Self {
        MemoryCache {
            entries: Mutex::new(Entries::default()),
            capacity: entries.max(1),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[crate::async_trait]
impl NodeCache for MemoryCache {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Value>, CacheError> {
        let mut entries = self.entries();
        let id = (namespace.to_string(), key.to_string());
        match entries.map.get(&id) {
            Some((_, Some(expires), _)) if *expires <= Instant::now() => {
                entries.map.remove(&id);
                Ok(None)
            }
            Some((value, _, _)) => Ok(Some(value.clone())),
            None => Ok(None),
        }
    }

    async fn put(
        &self,
        namespace: &str,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CacheError> {
        let expires = ttl.and_then(|t| Instant::now().checked_add(t));
        let id = (namespace.to_string(), key.to_string());
        let mut entries = self.entries();
        match entries.map.get_mut(&id) {
            // Put again: the entry keeps its place.
            Some(entry) => {
                entry.0 = value;
                entry.1 = expires;
            }
            None => {
                let number = entries.next;
                entries.next += 1;
                entries.map.insert(id.clone(), (value, expires, number));
                entries.order.push_back((id, number));
            }
        }
        entries.trim(self.capacity);
        Ok(())
    }

    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        let mut entries = self.entries();
        match namespace {
            Some(ns) => entries.map.retain(|(n, _), _| n != ns),
            None => {
                entries.map.clear();
                entries.order.clear();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// More distinct entries than the capacity: the oldest go, the newest stay, and the order
    /// kept beside them stays bounded while the same keys come and go.
    #[tokio::test]
    async fn the_cache_holds_at_most_its_capacity_and_drops_the_oldest() {
        let cache = MemoryCache::with_capacity(100);
        for i in 0..1_000 {
            cache
                .put("ns", &format!("k{i}"), Value::from(i), None)
                .await
                .unwrap();
        }
        assert_eq!(cache.get("ns", "k899").await.unwrap(), None);
        assert_eq!(
            cache.get("ns", "k900").await.unwrap(),
            Some(Value::from(900))
        );
        assert_eq!(cache.entries().map.len(), 100);
        // Cleared and put again, an entry is new (its old place does not evict it).
        for round in 0..1_000 {
            cache.clear(Some("ns")).await.unwrap();
            cache
                .put("ns", "again", Value::from(round), None)
                .await
                .unwrap();
        }
        for i in 0..99 {
            cache
                .put("other", &format!("k{i}"), Value::from(i), None)
                .await
                .unwrap();
        }
        assert_eq!(
            cache.get("ns", "again").await.unwrap(),
            Some(Value::from(999))
        );
        {
            let entries = cache.entries();
            assert_eq!(entries.map.len(), 100);
            assert!(entries.order.len() <= 200, "{}", entries.order.len());
        }
        // Put again, an entry keeps its place: the next new one evicts it first.
        cache
            .put("ns", "again", Value::from(0), None)
            .await
            .unwrap();
        cache
            .put("other", "new", Value::from(0), None)
            .await
            .unwrap();
        assert_eq!(cache.get("ns", "again").await.unwrap(), None);
        assert_eq!(
            cache.get("other", "k0").await.unwrap(),
            Some(Value::from(0))
        );
    }
}
