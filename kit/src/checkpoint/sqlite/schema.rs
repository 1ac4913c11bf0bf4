//! The file's schema: its version and the forward migrations.

use rusqlite::{Connection, OptionalExtension, params};

use super::channels::stored_index;
use super::key::Key;
use super::{Fail, R, SqliteOptions, sql_error};
use crate::checkpoint::packed::{self, BlobFields, Fields, Id};
use crate::checkpoint::sql::{corrupt, parse_json};
use crate::checkpoint::{BlobKind, CheckpointError, CheckpointSource};

/// The newest schema version this build knows.
pub const SQLITE_SCHEMA_VERSION: i64 = 3;

/// A forward migration: SQL, or code where rows must be rewritten.
pub(super) enum Migration {
    Sql(&'static str),
    Code(fn(&Connection) -> R<()>),
}

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[Migration] = &[
    // 0 -> 1
    Migration::Sql(
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
    ),
    // 1 -> 2: thread leases (multitask strategies)
    Migration::Sql(
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
    ),
    // 2 -> 3: a checkpoint is one packed row holding the blobs it wrote
    Migration::Code(pack_checkpoints),
];

/// The checkpoint table of schema 3 (see the module docs), and the channel names it refers to.
const PACKED_TABLES: &str = "CREATE TABLE kit_channels (
        idx INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    );
    CREATE TABLE kit_packed_checkpoints (
        thread_id TEXT NOT NULL,
        ns TEXT NOT NULL,
        checkpoint_id BLOB NOT NULL,
        head BLOB NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id)
    ) WITHOUT ROWID;";

/// 2 -> 3: rewrites each checkpoint row of schema 2, with the blobs whose version is its id, as
/// one packed row. Blobs no checkpoint owns (the steps of an exit-durability run, the values a
/// prune kept for later checkpoints) stay in `kit_blobs`. Runs inside the migration's
/// transaction: a row that cannot be carried over leaves the whole file as it was.
fn pack_checkpoints(conn: &Connection) -> R<()> {
    conn.execute_batch(PACKED_TABLES)?;
    // Finding a checkpoint's blobs by version would otherwise scan its thread's blobs for every
    // checkpoint (the primary key leads with the channel).
    conn.execute_batch("CREATE INDEX kit_blobs_by_version ON kit_blobs (thread_id, ns, version)")?;
    let mut read = conn.prepare(
        "SELECT thread_id, ns, checkpoint_id, parent_id, step, source, created_at, metadata,
                channel_versions, body
           FROM kit_checkpoints",
    )?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let (thread_id, ns, id): (String, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
        pack_row(conn, row, &thread_id, &ns, &id).map_err(|fail| match fail {
            Fail::Checkpoint(CheckpointError::Corrupt(what)) => corrupt(format_args!(
                "the file was left as it was: checkpoint `{id}` of thread `{thread_id}` \
                 (namespace `{ns}`) cannot be carried to schema 3: {what}. It did not read back \
                 with the earlier kit either; delete that row from kit_checkpoints, or restore \
                 the file from a backup, and open it again"
            )),
            other => other,
        })?;
    }
    drop(rows);
    conn.execute_batch(
        "DELETE FROM kit_blobs WHERE EXISTS (
            SELECT 1 FROM kit_checkpoints AS c
             WHERE c.thread_id = kit_blobs.thread_id AND c.ns = kit_blobs.ns
               AND c.checkpoint_id = kit_blobs.version);
         DROP INDEX kit_blobs_by_version;
         DROP TABLE kit_checkpoints;
         ALTER TABLE kit_packed_checkpoints RENAME TO kit_checkpoints;",
    )?;
    Ok(())
}

/// One schema-2 checkpoint row and the blobs it owns, packed into `kit_packed_checkpoints`.
fn pack_row(
    conn: &Connection,
    row: &rusqlite::Row<'_>,
    thread_id: &str,
    ns: &str,
    id: &str,
) -> R<()> {
    let source: String = row.get(5)?;
    let source = CheckpointSource::parse(&source)
        .ok_or_else(|| corrupt(format_args!("unknown source `{source}`")))?;
    let metadata: serde_json::Value = parse_json(&row.get::<_, String>(7)?, "metadata", id)?;
    let versions: std::collections::BTreeMap<String, String> =
        parse_json(&row.get::<_, String>(8)?, "channel versions", id)?;
    let mut channel_versions = Vec::with_capacity(versions.len());
    for (channel, version) in &versions {
        channel_versions.push((stored_index(conn, channel)?, version.as_str()));
    }
    let mut owned = Vec::new();
    let mut blobs_of = conn.prepare_cached(
        "SELECT channel, prev_version, kind, data FROM kit_blobs
          WHERE thread_id = ?1 AND ns = ?2 AND version = ?3",
    )?;
    let mut found = blobs_of.query(params![thread_id, ns, id])?;
    while let Some(b) = found.next()? {
        let (channel, prev, kind): (String, Option<String>, String) =
            (b.get(0)?, b.get(1)?, b.get(2)?);
        let kind = BlobKind::parse(&kind)
            .ok_or_else(|| corrupt(format_args!("blob {channel} has unknown kind `{kind}`")))?;
        owned.push((
            stored_index(conn, &channel)?,
            prev,
            kind,
            bytes(b.get_ref(3)?)?,
        ));
    }
    let parent: Option<String> = row.get(3)?;
    let created_at: String = row.get(6)?;
    let body = bytes(row.get_ref(9)?)?;
    let own = Id::new(id);
    let buffer = packed::pack(
        id,
        &own,
        &Fields {
            parent_id: parent.as_deref(),
            parent_parsed: None,
            step: row.get(4)?,
            source,
            created_at: &created_at,
            metadata: packed::Metadata::Value(&metadata),
            channel_versions,
            body: &body,
            blobs: owned
                .iter()
                .map(|(channel, prev, kind, data)| BlobFields {
                    channel: *channel,
                    prev_version: prev.as_deref(),
                    kind: *kind,
                    data,
                })
                .collect(),
        },
    )
    .ok_or_else(|| corrupt("it is too large to pack (a head over 4 GiB)"))?;
    let (head, data) = packed::split(&buffer).ok_or_else(|| corrupt("it did not pack"))?;
    conn.prepare_cached(
        "INSERT INTO kit_packed_checkpoints (thread_id, ns, checkpoint_id, head, data)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![thread_id, ns, Key::from(&own), head, data])?;
    Ok(())
}

/// A stored body or blob as bytes, whether SQLite holds it as a BLOB or as TEXT.
fn bytes(value: rusqlite::types::ValueRef<'_>) -> R<Vec<u8>> {
    match value {
        rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => Ok(b.to_vec()),
        other => Err(corrupt(format_args!(
            "a body or blob of type {:?}",
            other.data_type()
        ))),
    }
}

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
            for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                match migration {
                    Migration::Sql(sql) => conn.execute_batch(sql)?,
                    Migration::Code(run) => run(conn)?,
                }
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
