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
//! # Schema (version 2)
//!
//! The same tables as the SQLite back-end (see [`super::sqlite`]): `kit_schema_version`,
//! `kit_threads`, `kit_checkpoints`, `kit_blobs`, `kit_writes`, and (version 2)
//! `kit_thread_leases`, whose every change is one transaction holding a transaction-scoped
//! advisory lock on its thread (see [`lease`](crate::checkpoint::lease)). Ids are `TEXT COLLATE "C"` so
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

use super::retention::timestamp;
use super::sql;
use super::{
    CheckpointError, CheckpointMeta, CheckpointWrite, Checkpointer, LeaseOp, LeaseState,
    LoadedCheckpoint, PendingWrite, PruneReport, PruneStrategy, ThreadActivity, ThreadInfo,
};
use crate::pg::{Database, describe};

mod lease;
mod queries;
mod retention;
mod schema;

pub use schema::POSTGRES_SCHEMA_VERSION;

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

    async fn head(&self, thread_id: &str, ns: &str) -> Result<Option<String>, CheckpointError> {
        let client = self.client("reading a thread's head").await?;
        queries::head_of(&client, thread_id, ns)
            .await
            .map(Option::flatten)
            .map_err(|e| self.error("reading a thread's head", e))
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

    async fn lease(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: std::time::Duration,
    ) -> Result<LeaseState, CheckpointError> {
        self.lease_inner(thread_id, run_id, op, ttl)
            .await
            .map_err(|e| self.error("updating a thread lease", e))
    }

    async fn thread_activity(
        &self,
        thread_id: &str,
    ) -> Result<Option<ThreadActivity>, CheckpointError> {
        let (rows, now_ms) = self
            .activity_inner(thread_id)
            .await
            .map_err(|e| self.error("reading a thread lease", e))?;
        Ok(ThreadActivity::of(&rows, now_ms))
    }

    async fn rollback_after(&self, thread_id: &str, marker: &str) -> Result<u64, CheckpointError> {
        self.rollback_inner(thread_id, marker)
            .await
            .map_err(|e| self.error("rolling back a run", e))
    }

    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        self.prune_inner(thread_id, strategy)
            .await
            .map_err(|e| self.error("pruning a thread", e))
    }

    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        self.delete_before_inner(&timestamp(cutoff))
            .await
            .map_err(|e| self.error("deleting idle threads", e))
    }

    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        self.threads_inner()
            .await
            .map_err(|e| self.error("listing threads", e))
    }
}
