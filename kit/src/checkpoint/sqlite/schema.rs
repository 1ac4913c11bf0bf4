//! The file's schema: its version and the forward migrations.

use rusqlite::{Connection, OptionalExtension};

use super::{Fail, R, SqliteOptions, sql_error};
use crate::checkpoint::CheckpointError;

/// The newest schema version this build knows.
pub const SQLITE_SCHEMA_VERSION: i64 = 2;

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    "CREATE TABLE kit_threads (
        thread_id TEXT NOT NULL,
        ns TEXT NOT NULL,
        head TEXT,
        updated_at TEXT,
        checkpoints INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (thread_id, ns)
    ) WITHOUT ROWID;
    CREATE TABLE kit_checkpoints (
        thread_id TEXT NOT NULL,
        ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        parent_id TEXT,
        step INTEGER NOT NULL,
        source TEXT NOT NULL,
        created_at TEXT NOT NULL,
        next TEXT NOT NULL,
        metadata TEXT NOT NULL,
        channel_versions TEXT NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id)
    ) WITHOUT ROWID;
    CREATE TABLE kit_blobs (
        thread_id TEXT NOT NULL,
        ns TEXT NOT NULL,
        channel TEXT NOT NULL,
        version TEXT NOT NULL,
        prev_version TEXT,
        kind TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (thread_id, ns, channel, version)
    ) WITHOUT ROWID;
    CREATE TABLE kit_writes (
        thread_id TEXT NOT NULL,
        ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        idx INTEGER NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
    ) WITHOUT ROWID;",
    // 1 -> 2: thread leases (multitask strategies)
    "CREATE TABLE kit_thread_leases (
        thread_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        ticket INTEGER NOT NULL,
        running INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        stop TEXT,
        marker TEXT,
        rollback_from TEXT,
        PRIMARY KEY (thread_id, run_id)
    ) WITHOUT ROWID;",
];

/// The schema version stored in the file (0 for a new file); reads only.
pub(super) fn stored_version(conn: &Connection) -> rusqlite::Result<i64> {
    let has_table: bool = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kit_schema_version'",
            [],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false);
    if !has_table {
        return Ok(0);
    }
    Ok(conn
        .query_row("SELECT MAX(version) FROM kit_schema_version", [], |row| {
            row.get::<_, Option<i64>>(0)
        })?
        .unwrap_or(0))
}

pub(super) fn check_version(
    conn: &Connection,
    location: &str,
    options: &SqliteOptions,
) -> Result<(), CheckpointError> {
    let found = stored_version(conn)
        .map_err(|e| sql_error(location, "reading the schema version", options, e))?;
    if found > SQLITE_SCHEMA_VERSION {
        return Err(CheckpointError::SchemaTooNew {
            found,
            supported: SQLITE_SCHEMA_VERSION,
        });
    }
    Ok(())
}

pub(super) fn migrate(
    conn: &Connection,
    location: &str,
    options: &SqliteOptions,
) -> Result<(), CheckpointError> {
    // Under the write lock, so two processes opening a new file do not both migrate it.
    let run = || -> R<()> {
        let found = stored_version(conn)?;
        if found > SQLITE_SCHEMA_VERSION {
            return Err(Fail::Checkpoint(CheckpointError::SchemaTooNew {
                found,
                supported: SQLITE_SCHEMA_VERSION,
            }));
        }
        if found < SQLITE_SCHEMA_VERSION {
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS kit_schema_version (version INTEGER NOT NULL)",
            )?;
            for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                conn.execute_batch(sql)?;
            }
            conn.execute("DELETE FROM kit_schema_version", [])?;
            conn.execute(
                "INSERT INTO kit_schema_version (version) VALUES (?1)",
                [SQLITE_SCHEMA_VERSION],
            )?;
        }
        Ok(())
    };
    let result = conn
        .execute_batch("BEGIN IMMEDIATE")
        .map_err(Fail::from)
        .and_then(|()| run())
        .and_then(|()| conn.execute_batch("COMMIT").map_err(Fail::from));
    match result {
        Ok(()) => Ok(()),
        Err(fail) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(match fail {
                Fail::Checkpoint(e) => e,
                Fail::Sql(e) => sql_error(location, "migrating the schema", options, e),
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the operations (run inside one transaction each)
