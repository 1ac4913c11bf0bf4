//! The PostgreSQL checkpointer: threads shared by many processes on many machines.
//!
//! # Design
//!
//! A [`deadpool_postgres`] connection pool (16 connections by default) in front of one
//! database. Every operation takes a connection, runs with cached prepared statements, and
//! gives the connection back; writing a checkpoint is a single statement (one round trip). Several checkpointers (in one process or many)
//! can share a database; [`PostgresCheckpointer::connect_in_schema`] puts the tables in a
//! PostgreSQL schema of their own (tests use one schema each).
//!
//! # Schema (version 1)
//!
//! The same tables as the SQLite back-end (see [`super::sqlite`]): `kit_schema_version`,
//! `kit_threads`, `kit_checkpoints`, `kit_blobs`, `kit_writes`. Ids are `TEXT COLLATE "C"` so
//! they sort byte-wise, as UUIDv7 strings must for history order; channel data is `bytea`;
//! the executor's body (opaque bytes) is `bytea` too; next nodes, metadata, channel versions
//! and pending writes are `jsonb`.
//!
//! A step moves the thread's head, inserts one checkpoint row and one blob row per changed
//! channel (from arrays), all in one statement of data-modifying CTEs: constant work per step,
//! whatever the length of the conversation. Loading walks every channel's delta chain in one recursive query.
//!
//! Connecting migrates the schema forward inside a transaction holding a transaction-level
//! advisory lock, so processes starting together do not race. A schema version newer than this
//! build knows is refused with [`CheckpointError::SchemaTooNew`] before anything is changed.
//!
//! # Concurrency
//!
//! [`Checkpointer::put`] is one statement whose first CTE moves the head —
//! `UPDATE kit_threads SET head = $new ... WHERE ... AND head = $expected RETURNING 1` — and
//! whose checkpoint and blob inserts select `FROM` that CTE, so they write only if the head
//! moved. The row lock serialises two writers on one thread, in any number of processes;
//! under `READ COMMITTED` the second writer's `UPDATE` re-checks the row after the first
//! commits, matches nothing, writes nothing, and the second gets
//! [`CheckpointError::Conflict`]. A thread's first checkpoint creates the row with
//! `INSERT ... ON CONFLICT DO UPDATE ... WHERE head IS NOT DISTINCT FROM $expected`, so two
//! writers creating the same thread conflict the same way. The conflict error's `found` head
//! is read afterwards, so it may be newer than the write that won. Writers on different
//! threads lock different rows and never wait for each other.
//!
//! # Durability
//!
//! A checkpoint is durable when its statement commits (PostgreSQL's WAL, with the server's
//! `synchronous_commit` setting).
//!
//! # Limits
//!
//! Connections are made without TLS (`NoTls`): use a local server, a private network or a TLS
//! terminating proxy.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::Row;

use super::sql::{self, corrupt, parse_json, to_text};
use super::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    Checkpointer, LoadedCheckpoint, PendingWrite, ThreadInfo, resolve_channels,
};
use crate::pg::{Database, describe};

/// The newest schema version this build knows.
pub const POSTGRES_SCHEMA_VERSION: i64 = 1;

/// Key of the advisory lock held while migrating (any constant unlikely to collide).
const MIGRATION_LOCK: i64 = 0x6b69_745f_6d69_6772; // "kit_migr"

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
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
];

/// Writes a checkpoint in one statement (so one round trip, atomic without a transaction):
/// `moved` advances the thread's head only from the expected one and returns a row if it did;
/// the checkpoint and its blobs are inserted from `moved`, so nothing is written on a
/// conflict. Parameters: $1 thread, $2 ns, $3 checkpoint id, $4 created_at, $5 expected head,
/// $6 parent, $7 step, $8 source, $9 next, $10 metadata, $11 channel versions, $12 body, and
/// the blobs as arrays: $13 channels, $14 versions, $15 previous versions, $16 kinds, $17 data.
macro_rules! put_statement {
    ($moved:literal) => {
        concat!(
            "WITH moved AS (",
            $moved,
            "), checkpoint AS (
                INSERT INTO kit_checkpoints
                    (thread_id, ns, checkpoint_id, parent_id, step, source, created_at,
                     next, metadata, channel_versions, body)
                SELECT $1, $2, $3, $6, $7, $8, $4,
                       $9::text::jsonb, $10::text::jsonb, $11::text::jsonb, $12
                  FROM moved
                ON CONFLICT (thread_id, ns, checkpoint_id) DO UPDATE SET
                    parent_id = excluded.parent_id, step = excluded.step,
                    source = excluded.source, created_at = excluded.created_at,
                    next = excluded.next, metadata = excluded.metadata,
                    channel_versions = excluded.channel_versions, body = excluded.body
            ), blobs AS (
                INSERT INTO kit_blobs
                    (thread_id, ns, channel, version, prev_version, kind, data)
                SELECT $1, $2, b.channel, b.version, b.prev_version, b.kind, b.data
                  FROM moved,
                       unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::bytea[])
                       AS b(channel, version, prev_version, kind, data)
                ON CONFLICT (thread_id, ns, channel, version) DO UPDATE SET
                    prev_version = excluded.prev_version, kind = excluded.kind,
                    data = excluded.data
            )
            SELECT count(*) FROM moved"
        )
    };
}

/// The first checkpoint of a thread: the thread row may not exist yet, or exist with no head
/// (pending writes came first).
const PUT_FIRST: &str = put_statement!(
    "INSERT INTO kit_threads AS t (thread_id, ns, head, updated_at, checkpoints)
     VALUES ($1, $2, $3, $4, 1)
     ON CONFLICT (thread_id, ns) DO UPDATE
        SET head = excluded.head, updated_at = excluded.updated_at,
            checkpoints = t.checkpoints + 1
      WHERE t.head IS NOT DISTINCT FROM $5::text
     RETURNING 1"
);

/// A later checkpoint: the head must still be the one this writer read.
const PUT_NEXT: &str = put_statement!(
    "UPDATE kit_threads SET head = $3, updated_at = $4, checkpoints = checkpoints + 1
      WHERE thread_id = $1 AND ns = $2 AND head = $5::text
     RETURNING 1"
);

/// Checkpoints in a PostgreSQL database, through a connection pool. Cheap to clone; clones
/// share the pool.
///
/// ```no_run
/// # async fn demo() -> Result<(), kit::checkpoint::CheckpointError> {
/// use std::sync::Arc;
/// use kit::checkpoint::PostgresCheckpointer;
/// let checkpointer =
///     Arc::new(PostgresCheckpointer::connect("postgres://kit:secret@db.internal/kit").await?);
/// # let _ = checkpointer;
/// # Ok(())
/// # }
/// ```
///
/// See the [module docs](self) for the design, schema and concurrency.
#[derive(Clone)]
pub struct PostgresCheckpointer {
    db: Database,
}

impl std::fmt::Debug for PostgresCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCheckpointer")
            .field("location", &self.db.location)
            .field("schema", &self.db.schema)
            .finish()
    }
}

/// An error of a PostgreSQL operation.
type Fail = sql::Fail<tokio_postgres::Error>;
type R<T> = sql::R<T, tokio_postgres::Error>;

impl sql::DriverError for tokio_postgres::Error {}

impl PostgresCheckpointer {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`), checks
    /// that the server is reachable, and creates or migrates the tables in the connection's
    /// default schema.
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        Self::build(url, None).await
    }

    /// [`connect`](Self::connect), with the tables in the PostgreSQL schema `schema` (created
    /// if needed): a lower-case identifier such as `kit_test_42`.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, CheckpointError> {
        Self::build(url, Some(schema)).await
    }

    async fn build(url: &str, schema: Option<&str>) -> Result<Self, CheckpointError> {
        let db = Database::open(url, schema, "kit").map_err(CheckpointError::Backend)?;
        let checkpointer = PostgresCheckpointer { db };
        checkpointer.migrate().await?;
        Ok(checkpointer)
    }

    /// The PostgreSQL schema holding the tables, if one was given.
    pub fn schema(&self) -> Option<&str> {
        self.db.schema.as_deref()
    }

    /// Drops the schema given to [`connect_in_schema`](Self::connect_in_schema) with all its
    /// tables (tests use it to clean up). Does nothing without a schema.
    pub async fn drop_schema(&self) -> Result<(), CheckpointError> {
        self.db.drop_schema().await.map_err(|e| {
            CheckpointError::Backend(format!(
                "PostgreSQL dropping the schema on {} failed: {e}",
                self.db.location
            ))
        })
    }

    fn error(&self, op: &str, fail: Fail) -> CheckpointError {
        match fail {
            Fail::Checkpoint(e) => e,
            Fail::Sql(e) => {
                let hint = if e.is_closed() || e.as_db_error().is_none() {
                    "check that the server is running and reachable, and retry"
                } else {
                    "check the database (permissions, disk space) and retry"
                };
                CheckpointError::Backend(format!(
                    "PostgreSQL {op} on {} failed: {}; {hint}",
                    self.db.location,
                    describe(&e)
                ))
            }
        }
    }

    async fn client(&self, op: &str) -> Result<deadpool_postgres::Object, CheckpointError> {
        self.db
            .client()
            .await
            .map_err(|e| CheckpointError::Backend(format!("PostgreSQL {op}: {e}")))
    }

    async fn migrate(&self) -> Result<(), CheckpointError> {
        let op = "migrating the schema";
        let mut client = self.client(op).await?;
        // Read-only check first: a database from a newer kit is left untouched.
        let found = stored_version(&client)
            .await
            .map_err(|e| self.error(op, e))?;
        if found > POSTGRES_SCHEMA_VERSION {
            return Err(CheckpointError::SchemaTooNew {
                found,
                supported: POSTGRES_SCHEMA_VERSION,
            });
        }
        if found == POSTGRES_SCHEMA_VERSION {
            return Ok(());
        }
        let run = async {
            let tx = client.transaction().await?;
            self.db.begin_migration(&tx, MIGRATION_LOCK).await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS kit_schema_version (version BIGINT NOT NULL)",
            )
            .await?;
            // Another process may have migrated while we waited for the lock.
            let found: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM kit_schema_version",
                    &[],
                )
                .await?
                .try_get(0)?;
            if found > POSTGRES_SCHEMA_VERSION {
                return Err(Fail::Checkpoint(CheckpointError::SchemaTooNew {
                    found,
                    supported: POSTGRES_SCHEMA_VERSION,
                }));
            }
            for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                tx.batch_execute(sql).await?;
            }
            if found < POSTGRES_SCHEMA_VERSION {
                tx.execute("DELETE FROM kit_schema_version", &[]).await?;
                tx.execute(
                    "INSERT INTO kit_schema_version (version) VALUES ($1)",
                    &[&POSTGRES_SCHEMA_VERSION],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        };
        run.await.map_err(|e| self.error(op, e))
    }
}

/// The stored schema version (0 when the tables do not exist yet); reads only.
async fn stored_version(client: &tokio_postgres::Client) -> R<i64> {
    let exists: bool = client
        .query_one("SELECT to_regclass('kit_schema_version') IS NOT NULL", &[])
        .await?
        .try_get(0)?;
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM kit_schema_version",
            &[],
        )
        .await?
        .try_get(0)?)
}

const META_COLUMNS: &str =
    "checkpoint_id, parent_id, step, source, created_at, next::text, metadata::text";

fn meta_from_row(row: &Row) -> R<CheckpointMeta> {
    let id: String = row.try_get(0)?;
    let source: String = row.try_get(3)?;
    let next: String = row.try_get(5)?;
    let metadata: String = row.try_get(6)?;
    Ok(CheckpointMeta {
        parent_id: row.try_get(1)?,
        step: row.try_get(2)?,
        source: CheckpointSource::parse(&source)
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: unknown source `{source}`")))?,
        created_at: row.try_get(4)?,
        next: parse_json(&next, "next nodes", &id)?,
        metadata: parse_json(&metadata, "metadata", &id)?,
        id,
    })
}

async fn head_of(
    client: &impl deadpool_postgres::GenericClient,
    thread_id: &str,
    ns: &str,
) -> R<Option<Option<String>>> {
    let stmt = client
        .prepare_cached("SELECT head FROM kit_threads WHERE thread_id = $1 AND ns = $2")
        .await?;
    Ok(match client.query_opt(&stmt, &[&thread_id, &ns]).await? {
        Some(row) => Some(row.try_get(0)?),
        None => None,
    })
}

impl PostgresCheckpointer {
    /// One statement, so one round trip: move the head (only from the expected one), and
    /// write the checkpoint and its blobs only if it moved.
    async fn put_inner(&self, w: &CheckpointWrite) -> R<()> {
        let client = self.client("writing a checkpoint").await?;
        let sql = match w.expected_head {
            None => PUT_FIRST,
            Some(_) => PUT_NEXT,
        };
        let next = to_text(&w.meta.next)?;
        let metadata = match &w.meta.metadata {
            serde_json::Value::Null => "{}".to_string(),
            other => to_text(other)?,
        };
        let versions = to_text(&w.channel_versions)?;
        let channels: Vec<&str> = w.blobs.iter().map(|b| b.channel.as_str()).collect();
        let blob_versions: Vec<&str> = w.blobs.iter().map(|b| b.version.as_str()).collect();
        let prevs: Vec<Option<&str>> = w.blobs.iter().map(|b| b.prev_version.as_deref()).collect();
        let kinds: Vec<&str> = w.blobs.iter().map(|b| b.kind.as_str()).collect();
        let data: Vec<&[u8]> = w.blobs.iter().map(|b| b.data.as_slice()).collect();
        let stmt = client.prepare_cached(sql).await?;
        let moved: i64 = client
            .query_one(
                &stmt,
                &[
                    &w.thread_id,
                    &w.ns,
                    &w.meta.id,
                    &w.meta.created_at,
                    &w.expected_head,
                    &w.meta.parent_id,
                    &w.meta.step,
                    &w.meta.source.as_str(),
                    &next,
                    &metadata,
                    &versions,
                    &w.body,
                    &channels,
                    &blob_versions,
                    &prevs,
                    &kinds,
                    &data,
                ],
            )
            .await?
            .try_get(0)?;
        if moved == 0 {
            let found = head_of(&client, &w.thread_id, &w.ns).await?.flatten();
            return Err(Fail::Checkpoint(CheckpointError::Conflict {
                thread_id: w.thread_id.clone(),
                expected: w.expected_head.clone(),
                found,
            }));
        }
        Ok(())
    }

    async fn put_writes_inner(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: &[PendingWrite],
    ) -> R<()> {
        let mut client = self.client("writing pending writes").await?;
        let tx = client.transaction().await?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
                 VALUES ($1, $2, NULL, NULL, 0) ON CONFLICT (thread_id, ns) DO NOTHING",
            )
            .await?;
        tx.execute(&stmt, &[&thread_id, &ns]).await?;
        let upsert = tx
            .prepare_cached(
                "INSERT INTO kit_writes
                    (thread_id, ns, checkpoint_id, task_id, channel, idx, value)
                 VALUES ($1, $2, $3, $4, $5,
                         (SELECT COALESCE(MAX(idx) + 1, 0) FROM kit_writes
                           WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3),
                         $6::text::jsonb)
                 ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel)
                 DO UPDATE SET value = excluded.value",
            )
            .await?;
        for w in writes {
            let value = to_text(&w.value)?;
            tx.execute(
                &upsert,
                &[
                    &thread_id,
                    &ns,
                    &checkpoint_id,
                    &w.task_id,
                    &w.channel,
                    &value,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn load_inner(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> R<Option<LoadedCheckpoint>> {
        let mut client = self.client("loading a checkpoint").await?;
        // A consistent snapshot of the thread.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let head = match head_of(&tx, thread_id, ns).await? {
            Some(head) => head,
            None => {
                let stmt = tx
                    .prepare_cached("SELECT 1 FROM kit_threads WHERE thread_id = $1 LIMIT 1")
                    .await?;
                let known = tx.query_opt(&stmt, &[&thread_id]).await?.is_some();
                return match (known, checkpoint_id) {
                    (false, Some(id)) => Err(Fail::Checkpoint(CheckpointError::NotFound {
                        thread_id: thread_id.to_string(),
                        checkpoint_id: id.to_string(),
                    })),
                    _ => Ok(None),
                };
            }
        };
        let Some(head) = head else {
            return Ok(None);
        };
        let id = checkpoint_id.unwrap_or(&head);
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS}, channel_versions::text, body FROM kit_checkpoints
                  WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3"
            ))
            .await?;
        let Some(row) = tx.query_opt(&stmt, &[&thread_id, &ns, &id]).await? else {
            return Err(Fail::Checkpoint(CheckpointError::NotFound {
                thread_id: thread_id.to_string(),
                checkpoint_id: id.to_string(),
            }));
        };
        let meta = meta_from_row(&row)?;
        let channel_versions: BTreeMap<String, String> =
            parse_json(&row.try_get::<_, String>(7)?, "channel versions", id)?;
        let body: Vec<u8> = row.try_get(8)?;

        // Walk every channel's chain back to its full value in one recursive query.
        let names: Vec<&str> = channel_versions.keys().map(String::as_str).collect();
        let versions: Vec<&str> = channel_versions.values().map(String::as_str).collect();
        let stmt = tx
            .prepare_cached(
                "WITH RECURSIVE chain(channel, version, prev_version, kind, data, depth) AS (
                    SELECT b.channel, b.version, b.prev_version, b.kind, b.data, 0
                      FROM unnest($3::text[], $4::text[]) AS cv(channel, version)
                      JOIN kit_blobs AS b
                        ON b.thread_id = $1 AND b.ns = $2 AND b.channel = cv.channel
                       AND b.version = cv.version
                    UNION ALL
                    SELECT b.channel, b.version, b.prev_version, b.kind, b.data, c.depth + 1
                      FROM chain AS c
                      JOIN kit_blobs AS b
                        ON b.thread_id = $1 AND b.ns = $2 AND b.channel = c.channel
                       AND b.version = c.prev_version
                     WHERE c.kind = 'delta' AND c.depth < 10000000
                 )
                 SELECT channel, version, prev_version, kind, data FROM chain",
            )
            .await?;
        let rows = tx
            .query(&stmt, &[&thread_id, &ns, &names, &versions])
            .await?;
        let mut blobs: HashMap<(String, String), ChannelBlob> = HashMap::with_capacity(rows.len());
        for row in rows {
            let kind: String = row.try_get(3)?;
            let blob = ChannelBlob {
                channel: row.try_get(0)?,
                version: row.try_get(1)?,
                prev_version: row.try_get(2)?,
                kind: BlobKind::parse(&kind).ok_or_else(|| {
                    corrupt(format_args!("checkpoint {id}: unknown blob kind `{kind}`"))
                })?,
                data: row.try_get(4)?,
            };
            blobs.insert((blob.channel.clone(), blob.version.clone()), blob);
        }
        let channels = resolve_channels(&channel_versions, |channel, version| {
            blobs.get(&(channel.to_string(), version.to_string()))
        })?;

        let stmt = tx
            .prepare_cached(
                "SELECT task_id, channel, value::text FROM kit_writes
                  WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3
                  ORDER BY idx, task_id, channel",
            )
            .await?;
        let mut pending_writes = Vec::new();
        for row in tx.query(&stmt, &[&thread_id, &ns, &id]).await? {
            pending_writes.push(PendingWrite {
                task_id: row.try_get(0)?,
                channel: row.try_get(1)?,
                value: parse_json(&row.try_get::<_, String>(2)?, "pending write", id)?,
            });
        }
        tx.commit().await?;
        Ok(Some(LoadedCheckpoint {
            meta,
            channel_versions,
            channels,
            body,
            pending_writes,
            head,
        }))
    }

    async fn history_inner(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> R<Vec<CheckpointMeta>> {
        let client = self.client("reading the history").await?;
        let limit: Option<i64> = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS} FROM kit_checkpoints
                  WHERE thread_id = $1 AND ns = $2 ORDER BY checkpoint_id DESC LIMIT $3"
            ))
            .await?;
        client
            .query(&stmt, &[&thread_id, &ns, &limit])
            .await?
            .iter()
            .map(meta_from_row)
            .collect()
    }

    async fn delete_inner(&self, thread_id: &str) -> R<()> {
        let mut client = self.client("deleting a thread").await?;
        let tx = client.transaction().await?;
        for table in ["kit_blobs", "kit_writes", "kit_checkpoints", "kit_threads"] {
            let stmt = tx
                .prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = $1"))
                .await?;
            tx.execute(&stmt, &[&thread_id]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn threads_inner(&self) -> R<Vec<ThreadInfo>> {
        let client = self.client("listing threads").await?;
        let stmt = client
            .prepare_cached(
                "SELECT thread_id, MAX(updated_at) AS updated,
                        SUM(CASE WHEN ns = '' THEN checkpoints ELSE 0 END)::BIGINT AS n
                   FROM kit_threads GROUP BY thread_id
                 HAVING SUM(CASE WHEN ns = '' THEN checkpoints ELSE 0 END) > 0
                  ORDER BY updated DESC, thread_id",
            )
            .await?;
        let mut out = Vec::new();
        for row in client.query(&stmt, &[]).await? {
            out.push(ThreadInfo {
                thread_id: row.try_get(0)?,
                updated_at: row.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                checkpoints: u64::try_from(row.try_get::<_, i64>(2)?).unwrap_or(0),
            });
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl Checkpointer for PostgresCheckpointer {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        self.put_inner(&write)
            .await
            .map_err(|e| self.error("writing a checkpoint", e))
    }

    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        self.put_writes_inner(thread_id, ns, checkpoint_id, &writes)
            .await
            .map_err(|e| self.error("writing pending writes", e))
    }

    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        self.load_inner(thread_id, ns, checkpoint_id)
            .await
            .map_err(|e| self.error("loading a checkpoint", e))
    }

    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError> {
        self.history_inner(thread_id, ns, limit)
            .await
            .map_err(|e| self.error("reading the history", e))
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.delete_inner(thread_id)
            .await
            .map_err(|e| self.error("deleting a thread", e))
    }

    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        self.threads_inner()
            .await
            .map_err(|e| self.error("listing threads", e))
    }
}
