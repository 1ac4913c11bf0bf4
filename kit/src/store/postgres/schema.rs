//! The store's tables in PostgreSQL, their version, and migrating one process at a time.

use super::PostgresStore;
use crate::pg::{is_current, record_version, stored_version};
use crate::store::StoreError;

/// The table holding the schema version.
const VERSION_TABLE: &str = "kit_store_schema_version";

/// The newest schema version of the store's PostgreSQL tables this build knows.
pub const POSTGRES_STORE_SCHEMA_VERSION: i64 = 1;

/// Key of the advisory lock held while migrating.
const MIGRATION_LOCK: i64 = 0x6b69_745f_7374_6f72; // "kit_stor"

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
///
/// The same layout as SQLite's (see `store/sqlite/schema.rs`); names sort byte-wise
/// (`COLLATE "C"`) so a namespace prefix is a range, and values are `jsonb` so that equality
/// filters can narrow a scan with `@>`.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    r#"CREATE TABLE kit_store_items (
        ns TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        value JSONB NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        ttl BIGINT,
        expires_at BIGINT,
        PRIMARY KEY (ns, key)
    );
    CREATE INDEX kit_store_items_updated ON kit_store_items (updated_at);
    CREATE INDEX kit_store_items_expires ON kit_store_items (expires_at)
        WHERE expires_at IS NOT NULL;
    CREATE TABLE kit_store_vectors (
        ns TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        field TEXT COLLATE "C" NOT NULL,
        embedding BYTEA NOT NULL,
        PRIMARY KEY (ns, key, field)
    );"#,
];

impl PostgresStore {
    /// Creates or migrates the tables, under an advisory lock so processes starting together
    /// do not race; a database from a newer kit is left untouched.
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let fail = |e: tokio_postgres::Error| {
            StoreError::Backend(format!(
                "migrating the store's tables in {} failed: {}",
                self.db.location,
                crate::pg::describe(&e)
            ))
        };
        let mut client = self.client().await?;
        // Read-only first: a process joining a running fleet changes nothing.
        let current = |found| {
            is_current(found, POSTGRES_STORE_SCHEMA_VERSION).map_err(|found| {
                StoreError::SchemaTooNew {
                    found,
                    supported: POSTGRES_STORE_SCHEMA_VERSION,
                }
            })
        };
        if current(stored_version(&client, VERSION_TABLE).await.map_err(fail)?)? {
            return Ok(());
        }
        let tx = client.transaction().await.map_err(fail)?;
        self.db
            .begin_migration(&tx, MIGRATION_LOCK)
            .await
            .map_err(fail)?;
        // Another process may have migrated while we waited for the lock.
        let found = stored_version(&tx, VERSION_TABLE).await.map_err(fail)?;
        if !current(found)? {
            for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                tx.batch_execute(sql).await.map_err(fail)?;
            }
            record_version(&tx, VERSION_TABLE, POSTGRES_STORE_SCHEMA_VERSION)
                .await
                .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)
    }
}
