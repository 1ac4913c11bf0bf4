//! The database's schema: its version, the forward migrations, and migrating one process at a time.

use super::{Fail, PostgresCheckpointer};
use crate::checkpoint::CheckpointError;
use crate::pg::{is_current, record_version, stored_version};

/// The table holding the schema version.
const VERSION_TABLE: &str = "kit_schema_version";

/// The newest schema version this build knows.
pub const POSTGRES_SCHEMA_VERSION: i64 = 2;

/// Key of the advisory lock held while migrating (any constant unlikely to collide).
pub(super) const MIGRATION_LOCK: i64 = 0x6b69_745f_6d69_6772; // "kit_migr"

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    r#"CREATE TABLE kit_threads (
        thread_id TEXT COLLATE "C" NOT NULL,
        ns TEXT COLLATE "C" NOT NULL,
        head TEXT COLLATE "C",
        updated_at TEXT COLLATE "C",
        checkpoints BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (thread_id, ns)
    );
    CREATE TABLE kit_checkpoints (
        thread_id TEXT COLLATE "C" NOT NULL,
        ns TEXT COLLATE "C" NOT NULL,
        checkpoint_id TEXT COLLATE "C" NOT NULL,
        parent_id TEXT COLLATE "C",
        step BIGINT NOT NULL,
        source TEXT NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL,
        next JSONB NOT NULL,
        metadata JSONB NOT NULL,
        channel_versions JSONB NOT NULL,
        body BYTEA NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id)
    );
    CREATE TABLE kit_blobs (
        thread_id TEXT COLLATE "C" NOT NULL,
        ns TEXT COLLATE "C" NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        version TEXT COLLATE "C" NOT NULL,
        prev_version TEXT COLLATE "C",
        kind TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (thread_id, ns, channel, version)
    );
    CREATE TABLE kit_writes (
        thread_id TEXT COLLATE "C" NOT NULL,
        ns TEXT COLLATE "C" NOT NULL,
        checkpoint_id TEXT COLLATE "C" NOT NULL,
        task_id TEXT COLLATE "C" NOT NULL,
        channel TEXT COLLATE "C" NOT NULL,
        idx INTEGER NOT NULL,
        value JSONB NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
    );"#,
    // 1 -> 2: thread leases (multitask strategies)
    r#"CREATE TABLE kit_thread_leases (
        thread_id TEXT COLLATE "C" NOT NULL,
        run_id TEXT COLLATE "C" NOT NULL,
        ticket BIGINT NOT NULL,
        running BOOLEAN NOT NULL,
        expires_ms BIGINT NOT NULL,
        stop TEXT,
        marker TEXT COLLATE "C",
        rollback_from TEXT COLLATE "C",
        PRIMARY KEY (thread_id, run_id)
    );"#,
];

impl PostgresCheckpointer {
    pub(super) async fn migrate(&self) -> Result<(), CheckpointError> {
        let op = "migrating the schema";
        let mut client = self.client(op).await?;
        // Read-only check first: a database from a newer kit is left untouched.
        let too_new = |found| CheckpointError::SchemaTooNew {
            found,
            supported: POSTGRES_SCHEMA_VERSION,
        };
        let found = stored_version(&client, VERSION_TABLE)
            .await
            .map_err(|e| self.error(op, Fail::Sql(e)))?;
        if is_current(found, POSTGRES_SCHEMA_VERSION).map_err(too_new)? {
            return Ok(());
        }
        let run = async {
            let tx = client.transaction().await?;
            self.db.begin_migration(&tx, MIGRATION_LOCK).await?;
            // Another process may have migrated while we waited for the lock.
            let found = stored_version(&tx, VERSION_TABLE).await?;
            let current = is_current(found, POSTGRES_SCHEMA_VERSION)
                .map_err(|found| Fail::Checkpoint(too_new(found)))?;
            if !current {
                for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                    tx.batch_execute(sql).await?;
                }
                record_version(&tx, VERSION_TABLE, POSTGRES_SCHEMA_VERSION).await?;
            }
            tx.commit().await?;
            Ok(())
        };
        run.await.map_err(|e| self.error(op, e))
    }
}
