//! The in-process cache store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{CacheError, NodeCache};

/// Entries by (namespace, key): the value and when it expires.
type Entries = HashMap<(String, String), (Value, Option<Instant>)>;

/// Node outputs kept in the process's memory (expired entries are dropped when read).
#[derive(Default)]
pub struct MemoryCache {
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for MemoryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCache").finish_non_exhaustive()
    }
}

impl MemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
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
        match entries.get(&id) {
            Some((_, Some(expires))) if *expires <= Instant::now() => {
                entries.remove(&id);
                Ok(None)
            }
            Some((value, _)) => Ok(Some(value.clone())),
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
        self.entries()
            .insert((namespace.to_string(), key.to_string()), (value, expires));
        Ok(())
    }

    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        let mut entries = self.entries();
        match namespace {
            Some(ns) => entries.retain(|(n, _), _| n != ns),
            None => entries.clear(),
        }
        Ok(())
    }
}
