//! The cache store in PostgreSQL (feature `postgres`), beside the checkpointer's tables.

use std::time::Duration;

use serde_json::Value;

use super::{CacheError, NodeCache};
use crate::pg::{Database, describe};

/// The advisory lock that serialises creating the cache table.
const MIGRATION_LOCK: i64 = 0x6b69_745f_6361_6368; // "kit_cach"

/// Node outputs kept in PostgreSQL, in the table `kit_node_cache` (in `schema` when given):
/// shared by every process of one database, so a cached node is computed once per fleet.
/// Expired entries are skipped when read, and deleted every 256 writes of a process (an entry
/// without a time to live stays until [`clear`](NodeCache::clear)ed).
#[derive(Clone)]
pub struct PostgresCache {
    db: Database,
    sweeps: std::sync::Arc<super::Sweeps>,
}

impl std::fmt::Debug for PostgresCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCache")
            .field("location", &self.db.location)
            .finish()
    }
}

impl PostgresCache {
    /// Connects to `url` and creates the cache table when missing (in `schema` when given).
    pub async fn connect(url: &str, schema: Option<&str>) -> Result<Self, CacheError> {
        let db = Database::open(url, schema, "kit-cache").map_err(CacheError)?;
        let mut client = db.client().await.map_err(CacheError)?;
        let fail = |e: tokio_postgres::Error| {
            CacheError(format!("creating the cache table failed: {}", describe(&e)))
        };
        let tx = client.transaction().await.map_err(fail)?;
        db.begin_migration(&tx, MIGRATION_LOCK)
            .await
            .map_err(fail)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS kit_node_cache (
                namespace TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                expires_at BIGINT,
                PRIMARY KEY (namespace, key)
            );
            CREATE INDEX IF NOT EXISTS kit_node_cache_expires ON kit_node_cache (expires_at)
                WHERE expires_at IS NOT NULL;",
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        Ok(PostgresCache {
            db,
            sweeps: std::sync::Arc::default(),
        })
    }

    /// Drops the schema given to [`connect`](Self::connect) with its tables (tests).
    pub async fn drop_schema(&self) -> Result<(), CacheError> {
        self.db.drop_schema().await.map_err(CacheError)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, CacheError> {
        self.db.client().await.map_err(CacheError)
    }
}

fn now_millis() -> i64 {
    i64::try_from(crate::ids::now_millis()).unwrap_or(i64::MAX)
}

fn failed(op: &str, e: &tokio_postgres::Error) -> CacheError {
    CacheError(format!("PostgreSQL cache {op}: {}", describe(e)))
}

#[crate::async_trait]
impl NodeCache for PostgresCache {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Value>, CacheError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT value FROM kit_node_cache WHERE namespace = $1 AND key = $2 \
                 AND (expires_at IS NULL OR expires_at > $3)",
                &[&namespace, &key, &now_millis()],
            )
            .await
            .map_err(|e| failed("read", &e))?;
        row.map(|r| {
            let text: String = r.try_get(0).map_err(|e| failed("read", &e))?;
            serde_json::from_str(&text).map_err(|e| {
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
        let expires = ttl
            .map(|t| now_millis().saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX)));
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO kit_node_cache (namespace, key, value, expires_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (namespace, key) DO UPDATE \
                 SET value = excluded.value, expires_at = excluded.expires_at",
                &[&namespace, &key, &value.to_string(), &expires],
            )
            .await
            .map_err(|e| failed("write", &e))?;
        if self.sweeps.due() {
            client
                .execute(
                    "DELETE FROM kit_node_cache WHERE expires_at IS NOT NULL AND expires_at <= $1",
                    &[&now_millis()],
                )
                .await
                .map_err(|e| failed("sweep of expired entries", &e))?;
        }
        Ok(())
    }

    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        let client = self.client().await?;
        match namespace {
            Some(ns) => {
                client
                    .execute("DELETE FROM kit_node_cache WHERE namespace = $1", &[&ns])
                    .await
            }
            None => client.execute("DELETE FROM kit_node_cache", &[]).await,
        }
        .map_err(|e| failed("clear", &e))?;
        Ok(())
    }
}
