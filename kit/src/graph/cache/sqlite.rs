//! The cache store in a SQLite file (feature `sqlite`), beside the checkpointer's tables.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{CacheError, NodeCache};

/// Node outputs kept in a SQLite file (the checkpointer's file, or one of their own), in the
/// table `kit_node_cache`. Expired entries are skipped when read, and deleted every 256 writes
/// (an entry without a time to live stays until [`clear`](NodeCache::clear)ed).
///
/// ```
/// use kit::graph::{NodeCache, SqliteCache};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let cache = SqliteCache::open(dir.path().join("cache.sqlite"))?;
/// cache.put("g:n", "k", serde_json::json!(1), None).await?;
/// assert_eq!(cache.get("g:n", "k").await?, Some(serde_json::json!(1)));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteCache {
    conn: Arc<Mutex<Connection>>,
    location: Arc<str>,
    sweeps: Arc<super::Sweeps>,
}

impl std::fmt::Debug for SqliteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteCache")
            .field("location", &self.location)
            .finish()
    }
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS kit_node_cache (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS kit_node_cache_expires ON kit_node_cache (expires_at)
    WHERE expires_at IS NOT NULL;";

impl SqliteCache {
    /// Opens (creating when missing) the file and its cache table.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CacheError> {
        let location: Arc<str> = Arc::from(path.as_ref().display().to_string());
        let fail = |e: rusqlite::Error| {
            CacheError(format!(
                "could not open the SQLite cache at {location}: {e}; check that the directory \
                 exists and is writable"
            ))
        };
        let conn = Connection::open(path.as_ref()).map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(fail)?;
        conn.execute_batch("PRAGMA journal_mode=WAL;")
            .map_err(fail)?;
        conn.execute_batch(SCHEMA).map_err(fail)?;
        Ok(SqliteCache {
            conn: Arc::new(Mutex::new(conn)),
            location,
            sweeps: Arc::default(),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, CacheError> {
        let conn = self.conn.clone();
        let location = self.location.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn)
        })
        .await
        .map_err(|e| {
            CacheError(format!(
                "SQLite cache {op} on {location} did not finish: {e}"
            ))
        })?
        .map_err(|e| CacheError(format!("SQLite cache {op} on {}: {e}", self.location)))
    }
}

fn now_millis() -> i64 {
    i64::try_from(crate::ids::now_millis()).unwrap_or(i64::MAX)
}

#[crate::async_trait]
impl NodeCache for SqliteCache {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Value>, CacheError> {
        let (namespace, key) = (namespace.to_string(), key.to_string());
        let text: Option<String> = self
            .with("read", move |c| {
                c.query_row(
                    "SELECT value FROM kit_node_cache WHERE namespace = ?1 AND key = ?2 \
                     AND (expires_at IS NULL OR expires_at > ?3)",
                    params![namespace, key, now_millis()],
                    |row| row.get(0),
                )
                .optional()
            })
            .await?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| {
                CacheError(format!("a cached value is not JSON ({e}); clear the cache"))
            })
        })
        .transpose()
    }

    async fn put(
        &self,
        namespace: &str,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CacheError> {
        let (namespace, key, text) = (namespace.to_string(), key.to_string(), value.to_string());
        let expires = ttl
            .map(|t| now_millis().saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX)));
        let sweep = self.sweeps.due();
        self.with("write", move |c| {
            c.execute(
                "INSERT INTO kit_node_cache (namespace, key, value, expires_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, \
                 expires_at = excluded.expires_at",
                params![namespace, key, text, expires],
            )?;
            if sweep {
                c.execute(
                    "DELETE FROM kit_node_cache WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                    params![now_millis()],
                )?;
            }
            Ok(())
        })
        .await
    }

    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        let namespace = namespace.map(str::to_string);
        self.with("clear", move |c| {
            match namespace {
                Some(ns) => c.execute(
                    "DELETE FROM kit_node_cache WHERE namespace = ?1",
                    params![ns],
                ),
                None => c.execute("DELETE FROM kit_node_cache", []),
            }
            .map(|_| ())
        })
        .await
    }
}
