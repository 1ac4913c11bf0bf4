//! The SQLite checkpointer: one file, the embedded durable default.
//!
//! # Design
//!
//! * **One file in WAL mode.** Readers never block the writer nor each other; SQLite allows one
//!   writer at a time per file, across every process that opens it.
//! * **Connections.** One writer connection (behind a mutex: SQLite serialises writers anyway,
//!   and queueing them in-process avoids lock polling) and a small pool of reader connections,
//!   each with a prepared statement cache. An in-memory database (`sqlite::memory:`) has only
//!   the writer connection, which then also serves reads.
//! * **Where the SQLite calls run.** rusqlite is synchronous. A write takes a few tens of
//!   microseconds, mostly SQLite's own work, so a write first tries to run *inline* on the
//!   calling task: when the writer connection is free and no other process holds the file's
//!   write lock (`BEGIN IMMEDIATE` with a zero busy timeout succeeds), the whole transaction
//!   runs without a thread hop. Otherwise (another task or process is writing) it moves to
//!   tokio's blocking pool and waits there, with the configured busy timeout, so an async
//!   worker thread never sleeps on a lock. With [`SqliteSynchronous::Full`] a commit waits
//!   for the disk, so writes always run on the blocking pool. Reads (`load`, `history`,
//!   `threads`) may walk long delta chains and always run on the blocking pool. Measured on W5
//!   (a 100-step chain, a checkpoint per step, release build, 2 shared cores, tokio
//!   `current_thread`): about 27 µs per step inline, against 51 µs (sync durability) and 67 µs
//!   (async) when every write went through `spawn_blocking` — the two thread hand-offs cost
//!   more than the write itself. A dedicated writer thread would pay the same hand-offs.
//! * **WAL checkpoints off the async runtime.** SQLite's automatic WAL checkpoint would run
//!   inside some commit and stall that step's task for milliseconds (it copies pages and syncs
//!   the file), so it is turned off on the writer. Instead, once about
//!   [`WAL_CHECKPOINT_BYTES`] were committed, a passive checkpoint runs on the blocking pool on
//!   a reader connection while writes go on; every fourth time it is followed by a
//!   `RESTART` checkpoint holding the writer connection, which only has the last frames left
//!   to copy, completes, and makes the next commit write the WAL from its start (a checkpoint
//!   racing a stream of writes never catches up, so without it the WAL would grow without
//!   bound; with it the WAL file stays around 20 MB under a constant stream of writes). Other
//!   processes opening the file keep SQLite's automatic checkpoint.

//! # Schema (version 1)
//!
//! ```text
//! kit_schema_version(version)                         one row: the schema version
//! kit_threads(thread_id, ns, head, updated_at, checkpoints)          PK (thread_id, ns)
//! kit_checkpoints(thread_id, ns, checkpoint_id, parent_id, step, source, created_at,
//!                 next, metadata, channel_versions, body)   PK (thread_id, ns, checkpoint_id)
//! kit_blobs(thread_id, ns, channel, version, prev_version, kind, data)
//!                                                      PK (thread_id, ns, channel, version)
//! kit_writes(thread_id, ns, checkpoint_id, task_id, channel, idx, value)
//!                                   PK (thread_id, ns, checkpoint_id, task_id, channel)
//! ```
//!
//! All tables are `WITHOUT ROWID`, clustered on their primary key, so a thread's rows sit
//! together and a checkpoint id range scan is an index walk. JSON columns are text; channel
//! data and the executor's body (opaque bytes) are BLOBs. A step inserts one `kit_checkpoints` row, one `kit_blobs` row per channel it
//! changed (a delta or, once the deltas outweigh the value, a full snapshot — see the
//! [module docs](super)) and updates one `kit_threads` row: the same few hundred bytes at
//! message 10 and at message 10,000. Loading walks each channel's chain with one recursive
//! query.
//!
//! Opening a file migrates it forward (each migration in one transaction, under SQLite's write
//! lock so two processes opening a new file at once do not race). A file whose schema version
//! is newer than this build knows is refused with [`CheckpointError::SchemaTooNew`] before
//! anything is written to it.
//!
//! # Concurrency
//!
//! [`Checkpointer::put`] reads the thread's head and inserts the checkpoint in one
//! `BEGIN IMMEDIATE` transaction: two writers on one thread (two tasks, or two processes
//! sharing the file) are serialised by SQLite's write lock, and the second sees the first's
//! head and gets [`CheckpointError::Conflict`]. Different threads only share that short write
//! lock; readers are never blocked.
//!
//! # Durability
//!
//! By default the file uses `synchronous = NORMAL`: a committed checkpoint survives a crash or
//! `SIGKILL` of the process (the WAL is in the operating system's cache), and the file is never
//! corrupted; a power loss may lose the last few commits. [`SqliteSynchronous::Full`] syncs the
//! WAL on every commit (survives power loss, costs a disk flush per step).
//!
//! The graph's durability mode decides *when* checkpoints reach the back-end (sync: before the
//! next step; async: while it runs, awaited before the run reports anything; exit: once at the
//! end); each [`Checkpointer::put`] is one transaction, durable when it returns.
//!
//! # Size
//!
//! W5 (100-node chain, 100 invokes): 101 checkpoint rows and 202 blob rows per invoke, about
//! 47 KB of file per invoke (Python LangGraph's SqliteSaver: about 938 KB).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::sql::{self, corrupt, parse_json, to_text};
use super::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    Checkpointer, LoadedCheckpoint, PendingWrite, ThreadInfo, resolve_channels,
};

/// The newest schema version this build knows.
pub const SQLITE_SCHEMA_VERSION: i64 = 1;

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
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
];

/// A WAL checkpoint runs on the blocking pool after the writer committed about this many bytes
/// to the WAL (SQLite's own automatic checkpoint is at 1000 pages, 4 MiB).
pub const WAL_CHECKPOINT_BYTES: u64 = 4 << 20;

/// Every this many checkpoints, one catches up holding the writer so the WAL starts over
/// (the WAL stays under about `WAL_CHECKPOINT_BYTES * WAL_RESTART_EVERY`).
const WAL_RESTART_EVERY: u64 = 4;

/// If background checkpoints fall behind (a loaded machine), the writer itself restarts the
/// WAL once this many bytes were written since the last checkpoint: a hard bound on the WAL
/// that does not depend on scheduling.
const WAL_HARD_LIMIT_BYTES: u64 = 6 * WAL_CHECKPOINT_BYTES;

/// WAL bytes a commit costs besides its data: a few B-tree pages of 4 KiB (measured: about
/// six per checkpoint written).
const COMMIT_PAGES_BYTES: u64 = 6 * 4096;

/// Idle reader connections kept open.
const MAX_IDLE_READERS: usize = 8;

/// How SQLite syncs the file (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqliteSynchronous {
    /// Survives a crash or kill of the process; a power loss may lose the last commits (never
    /// corrupts the file). The default.
    #[default]
    Normal,
    /// Also survives a power loss: the WAL is synced on every commit (one disk flush per
    /// checkpoint written).
    Full,
}

/// Options of [`SqliteCheckpointer::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How the file is synced.
    pub synchronous: SqliteSynchronous,
    /// How long a write waits for another process holding the file's write lock before failing.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: SqliteSynchronous::Normal,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Checkpoints in one SQLite file (WAL mode). Cheap to clone; clones share the connections.
///
/// ```no_run
/// # fn main() -> Result<(), kit::checkpoint::CheckpointError> {
/// use std::sync::Arc;
/// use kit::checkpoint::SqliteCheckpointer;
/// let checkpointer = Arc::new(SqliteCheckpointer::open("agent.sqlite")?);
/// let same = SqliteCheckpointer::open_url("sqlite://agent.sqlite")?;
/// # let _ = (checkpointer, same);
/// # Ok(())
/// # }
/// ```
///
/// See the [module docs](self) for the design, schema, concurrency and durability.
#[derive(Clone)]
pub struct SqliteCheckpointer {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where the database is, for messages (`:memory:` for an in-memory one).
    location: String,
    path: Option<PathBuf>,
    options: SqliteOptions,
    writer: Mutex<Connection>,
    /// Idle reader connections; `None` for an in-memory database (reads use the writer).
    readers: Option<Mutex<Vec<Connection>>>,
    /// Approximate bytes written to the WAL since the last checkpoint.
    wal_bytes: AtomicU64,
    /// Checkpoints started.
    wal_rounds: AtomicU64,
    checkpointing: AtomicBool,
}

impl std::fmt::Debug for SqliteCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteCheckpointer")
            .field("location", &self.inner.location)
            .field("options", &self.inner.options)
            .finish()
    }
}

/// An error of a SQLite operation.
type Fail = sql::Fail<rusqlite::Error>;
type R<T> = sql::R<T, rusqlite::Error>;

impl sql::DriverError for rusqlite::Error {}

fn is_busy(e: &Fail) -> bool {
    matches!(e, Fail::Sql(e) if matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    ))
}

impl Inner {
    fn error(&self, op: &str, fail: Fail) -> CheckpointError {
        match fail {
            Fail::Checkpoint(e) => e,
            Fail::Sql(e) => sql_error(&self.location, op, &self.options, e),
        }
    }
}

fn sql_error(
    location: &str,
    op: &str,
    options: &SqliteOptions,
    e: rusqlite::Error,
) -> CheckpointError {
    let hint = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "another process held the database's write lock for longer than the busy timeout \
             ({:?}); retry, or raise SqliteOptions::busy_timeout",
            options.busy_timeout
        ),
        Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen) => {
            "check that the file and its directory exist and are writable by this process"
                .to_string()
        }
        Some(ErrorCode::DiskFull) => "free some disk space and retry".to_string(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            "the file is not a kit SQLite checkpoint database (or is damaged); point the \
             checkpointer at another file"
                .to_string()
        }
        _ => "check the file and retry".to_string(),
    };
    CheckpointError::Backend(format!("SQLite {op} on {location} failed: {e}; {hint}"))
}

impl SqliteCheckpointer {
    /// Opens (creating if needed) the database file at `path` with default options, switches it
    /// to WAL mode and migrates its schema.
    ///
    /// This is a blocking call (it opens the file and may migrate it); call it at start-up.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        let location = path.display().to_string();
        let writer = open_connection(&path, &location, &options)?;
        check_version(&writer, &location, &options)?;
        let mode: String = writer
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| sql_error(&location, "switching to WAL mode", &options, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(CheckpointError::Backend(format!(
                "SQLite could not switch {location} to WAL mode (it reports `{mode}`); use a \
                 file on a local file system"
            )));
        }
        migrate(&writer, &location, &options)?;
        // WAL checkpoints run off the hot path (see the module docs).
        writer
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| sql_error(&location, "configuring the connection", &options, e))?;
        Ok(SqliteCheckpointer {
            inner: Arc::new(Inner {
                location,
                path: Some(path),
                options,
                writer: Mutex::new(writer),
                readers: Some(Mutex::new(Vec::new())),
                wal_bytes: AtomicU64::new(0),
                wal_rounds: AtomicU64::new(0),
                checkpointing: AtomicBool::new(false),
            }),
        })
    }

    /// A private in-memory database (gone when the last clone is dropped).
    pub fn in_memory() -> Result<Self, CheckpointError> {
        let options = SqliteOptions::default();
        let location = ":memory:".to_string();
        let writer = Connection::open_in_memory()
            .map_err(|e| sql_error(&location, "opening", &options, e))?;
        configure(&writer, &location, &options)?;
        migrate(&writer, &location, &options)?;
        Ok(SqliteCheckpointer {
            inner: Arc::new(Inner {
                location,
                path: None,
                options,
                writer: Mutex::new(writer),
                readers: None,
                wal_bytes: AtomicU64::new(0),
                wal_rounds: AtomicU64::new(0),
                checkpointing: AtomicBool::new(false),
            }),
        })
    }

    /// Opens a database from a URL: `sqlite:///absolute/path`, `sqlite://relative/path` (or
    /// `sqlite:relative/path`), or `sqlite::memory:`.
    pub fn open_url(url: &str) -> Result<Self, CheckpointError> {
        let Some(rest) = url.strip_prefix("sqlite:") else {
            return Err(CheckpointError::Backend(format!(
                "`{url}` is not a SQLite URL; use sqlite:///absolute/path, \
                 sqlite://relative/path or sqlite::memory:"
            )));
        };
        if rest == ":memory:" || rest == "//:memory:" {
            return Self::in_memory();
        }
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(CheckpointError::Backend(format!(
                "the SQLite URL `{url}` names no file; use sqlite:///absolute/path or \
                 sqlite://relative/path"
            )));
        }
        Self::open(path)
    }

    /// The database file, or `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Runs a read on the blocking pool with a reader connection.
    async fn read<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> R<T> + Send + 'static,
    ) -> Result<T, CheckpointError> {
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            inner.with_reader(f).map_err(|e| inner.error(op, e))
        })
        .await;
        match joined {
            Ok(result) => result,
            Err(e) => Err(CheckpointError::Backend(format!(
                "SQLite {op} on {} did not finish: {e}",
                self.inner.location
            ))),
        }
    }

    /// Runs a write transaction: inline when the writer is free and the file's write lock can be
    /// taken at once, otherwise on the blocking pool (see the module docs).
    async fn write<D: Send + 'static, T: Send + 'static>(
        &self,
        op: &'static str,
        data: D,
        data_bytes: usize,
        f: fn(&rusqlite::Transaction<'_>, &D) -> R<T>,
    ) -> Result<T, CheckpointError> {
        let weight = COMMIT_PAGES_BYTES + data_bytes as u64;
        // With `synchronous = FULL` every commit waits for the disk: never on the runtime.
        let inline = self.inner.options.synchronous == SqliteSynchronous::Normal;
        if let (true, Ok(mut conn)) = (inline, self.inner.writer.try_lock()) {
            match run_write(&mut conn, Duration::ZERO, &data, f) {
                Err(e) if is_busy(&e) => {}
                result => {
                    drop(conn);
                    self.after_commit(&result, weight);
                    return result.map_err(|e| self.inner.error(op, e));
                }
            }
        }
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut conn = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            let result = run_write(&mut conn, inner.options.busy_timeout, &data, f);
            drop(conn);
            result
        })
        .await;
        match joined {
            Ok(result) => {
                self.after_commit(&result, weight);
                result.map_err(|e| self.inner.error(op, e))
            }
            Err(e) => Err(CheckpointError::Backend(format!(
                "SQLite {op} on {} did not finish: {e}",
                self.inner.location
            ))),
        }
    }

    /// Adds a commit's approximate WAL bytes; past [`WAL_CHECKPOINT_BYTES`], starts a WAL
    /// checkpoint on the blocking pool.
    fn after_commit<T>(&self, result: &R<T>, weight: u64) {
        if result.is_err() || self.inner.readers.is_none() {
            return;
        }
        let total = self.inner.wal_bytes.fetch_add(weight, Ordering::Relaxed) + weight;
        if total >= WAL_HARD_LIMIT_BYTES {
            // Background checkpoints are behind: restart the WAL now, holding the writer (the
            // next writes wait for it: back-pressure instead of an unbounded file).
            let conn = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            let _ = conn.busy_timeout(self.inner.options.busy_timeout);
            if conn
                .query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))
                .is_ok()
            {
                self.inner.wal_bytes.store(0, Ordering::Relaxed);
            }
            return;
        }
        if total < WAL_CHECKPOINT_BYTES || self.inner.checkpointing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.wal_bytes.store(0, Ordering::Relaxed);
        let round = self.inner.wal_rounds.fetch_add(1, Ordering::Relaxed) + 1;
        let inner = self.inner.clone();
        let started = tokio::task::spawn_blocking(move || {
            // Best effort: a checkpoint that cannot finish (another process reads an old
            // snapshot) is retried next time.
            // 1. The bulk of the work (copying pages, syncing the file) on a reader connection,
            //    while this process goes on writing.
            let _ = inner.with_reader(|conn| {
                conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
                Ok(())
            });
            // 2. Now and then, catch up holding the writer, so that the checkpoint completes
            //    and the next write starts the WAL over: a checkpoint racing a stream of writes
            //    never catches up, and the WAL would grow without bound. Only the frames
            //    written since step 1 are left to copy; writers wait on the blocking pool.
            //    RESTART also waits (up to the busy timeout) for readers on an old snapshot. It
            //    keeps the WAL file's size and overwrites it from the start: truncating it
            //    (TRUNCATE) made every cycle grow the file again, and those size changes stalled
            //    concurrent commits behind the file system's journal (W5 p95 per step: about
            //    80 µs with RESTART, 110-400 µs with TRUNCATE).
            if round.is_multiple_of(WAL_RESTART_EVERY) {
                let conn = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
                let _ = conn.busy_timeout(inner.options.busy_timeout);
                let _ = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
            }
            inner.checkpointing.store(false, Ordering::Release);
        });
        drop(started);
    }
}

fn run_write<D, T>(
    conn: &mut Connection,
    busy: Duration,
    data: &D,
    f: fn(&rusqlite::Transaction<'_>, &D) -> R<T>,
) -> R<T> {
    conn.busy_timeout(busy)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = f(&tx, data)?;
    tx.commit()?;
    Ok(out)
}

impl Inner {
    /// Runs `f` with an idle reader connection (opening one if none is idle), or with the
    /// writer connection for an in-memory database.
    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> R<T>) -> R<T> {
        let (Some(pool), Some(path)) = (&self.readers, &self.path) else {
            let conn = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            return f(&conn);
        };
        let idle = pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => open_connection(path, &self.location, &self.options)?,
        };
        let out = f(&conn);
        let mut pool = pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        out
    }
}

fn open_connection(
    path: &Path,
    location: &str,
    options: &SqliteOptions,
) -> Result<Connection, CheckpointError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| sql_error(location, "opening", options, e))?;
    configure(&conn, location, options)?;
    Ok(conn)
}

fn configure(
    conn: &Connection,
    location: &str,
    options: &SqliteOptions,
) -> Result<(), CheckpointError> {
    let sync = match options.synchronous {
        SqliteSynchronous::Normal => "NORMAL",
        SqliteSynchronous::Full => "FULL",
    };
    conn.set_prepared_statement_cache_capacity(32);
    conn.busy_timeout(options.busy_timeout)
        .and_then(|()| conn.pragma_update(None, "synchronous", sync))
        .map_err(|e| sql_error(location, "configuring the connection", options, e))
}

/// The schema version stored in the file (0 for a new file); reads only.
fn stored_version(conn: &Connection) -> rusqlite::Result<i64> {
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

fn check_version(
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

fn migrate(
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

fn head_of(conn: &Connection, thread_id: &str, ns: &str) -> R<Option<Option<String>>> {
    Ok(conn
        .prepare_cached("SELECT head FROM kit_threads WHERE thread_id = ?1 AND ns = ?2")?
        .query_row(params![thread_id, ns], |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?)
}

fn put_tx(tx: &rusqlite::Transaction<'_>, w: &CheckpointWrite) -> R<()> {
    let found = head_of(tx, &w.thread_id, &w.ns)?.flatten();
    if found != w.expected_head {
        return Err(Fail::Checkpoint(CheckpointError::Conflict {
            thread_id: w.thread_id.clone(),
            expected: w.expected_head.clone(),
            found,
        }));
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT OR REPLACE INTO kit_blobs
                (thread_id, ns, channel, version, prev_version, kind, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for b in &w.blobs {
            insert.execute(params![
                w.thread_id,
                w.ns,
                b.channel,
                b.version,
                b.prev_version,
                b.kind.as_str(),
                b.data
            ])?;
        }
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO kit_checkpoints
            (thread_id, ns, checkpoint_id, parent_id, step, source, created_at, next, metadata,
             channel_versions, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        w.thread_id,
        w.ns,
        w.meta.id,
        w.meta.parent_id,
        w.meta.step,
        w.meta.source.as_str(),
        w.meta.created_at,
        to_text(&w.meta.next)?,
        to_text(&metadata(&w.meta.metadata))?,
        to_text(&w.channel_versions)?,
        w.body,
    ])?;
    tx.prepare_cached(
        "INSERT INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
         VALUES (?1, ?2, ?3, ?4, 1)
         ON CONFLICT (thread_id, ns) DO UPDATE SET
            head = excluded.head, updated_at = excluded.updated_at,
            checkpoints = checkpoints + 1",
    )?
    .execute(params![w.thread_id, w.ns, w.meta.id, w.meta.created_at])?;
    Ok(())
}

/// Metadata as stored: `null` becomes `{}` (as the memory back-end returns it).
fn metadata(value: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    match value {
        serde_json::Value::Null => {
            std::borrow::Cow::Owned(serde_json::Value::Object(Default::default()))
        }
        other => std::borrow::Cow::Borrowed(other),
    }
}

struct WritesArgs {
    thread_id: String,
    ns: String,
    checkpoint_id: String,
    writes: Vec<PendingWrite>,
}

fn put_writes_tx(tx: &rusqlite::Transaction<'_>, a: &WritesArgs) -> R<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
         VALUES (?1, ?2, NULL, NULL, 0)",
    )?
    .execute(params![a.thread_id, a.ns])?;
    let mut upsert = tx.prepare_cached(
        "INSERT INTO kit_writes (thread_id, ns, checkpoint_id, task_id, channel, idx, value)
         VALUES (?1, ?2, ?3, ?4, ?5,
                 (SELECT COALESCE(MAX(idx) + 1, 0) FROM kit_writes
                   WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3),
                 ?6)
         ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel)
         DO UPDATE SET value = excluded.value",
    )?;
    for w in &a.writes {
        let value = to_text(&w.value)?;
        upsert.execute(params![
            a.thread_id,
            a.ns,
            a.checkpoint_id,
            w.task_id,
            w.channel,
            value
        ])?;
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // the argument type is fixed by `write`
fn delete_tx(tx: &rusqlite::Transaction<'_>, thread_id: &String) -> R<()> {
    for table in ["kit_blobs", "kit_writes", "kit_checkpoints", "kit_threads"] {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = ?1"))?
            .execute([thread_id])?;
    }
    Ok(())
}

fn meta_from_row(row: &rusqlite::Row<'_>) -> R<CheckpointMeta> {
    let id: String = row.get(0)?;
    let source: String = row.get(3)?;
    let next: String = row.get(5)?;
    let metadata: String = row.get(6)?;
    Ok(CheckpointMeta {
        parent_id: row.get(1)?,
        step: row.get(2)?,
        source: CheckpointSource::parse(&source)
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: unknown source `{source}`")))?,
        created_at: row.get(4)?,
        next: parse_json(&next, "next nodes", &id)?,
        metadata: parse_json(&metadata, "metadata", &id)?,
        id,
    })
}

const META_COLUMNS: &str = "checkpoint_id, parent_id, step, source, created_at, next, metadata";

fn load_tx(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    checkpoint_id: Option<&str>,
) -> R<Option<LoadedCheckpoint>> {
    let head = match head_of(conn, thread_id, ns)? {
        Some(head) => head,
        None => {
            let known = conn
                .prepare_cached("SELECT 1 FROM kit_threads WHERE thread_id = ?1 LIMIT 1")?
                .query_row([thread_id], |_| Ok(()))
                .optional()?
                .is_some();
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
    let row = conn
        .prepare_cached(&format!(
            "SELECT {META_COLUMNS}, channel_versions, body FROM kit_checkpoints
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3"
        ))?
        .query_row(params![thread_id, ns, id], |row| {
            Ok((
                meta_from_row(row),
                row.get::<_, String>(7)?,
                row.get::<_, Vec<u8>>(8)?,
            ))
        })
        .optional()?;
    let Some((meta, versions_text, body)) = row else {
        return Err(Fail::Checkpoint(CheckpointError::NotFound {
            thread_id: thread_id.to_string(),
            checkpoint_id: id.to_string(),
        }));
    };
    let meta = meta?;
    let channel_versions = parse_json(&versions_text, "channel versions", id)?;

    // Walk every channel's chain back to its full value in one recursive query.
    let mut blobs: HashMap<(String, String), ChannelBlob> = HashMap::new();
    {
        let mut stmt = conn.prepare_cached(
            "WITH RECURSIVE chain(channel, version, prev_version, kind, data, depth) AS (
                SELECT b.channel, b.version, b.prev_version, b.kind, b.data, 0
                  FROM json_each(?3) AS cv
                  JOIN kit_blobs AS b
                    ON b.thread_id = ?1 AND b.ns = ?2 AND b.channel = cv.key
                   AND b.version = cv.value
                UNION ALL
                SELECT b.channel, b.version, b.prev_version, b.kind, b.data, c.depth + 1
                  FROM chain AS c
                  JOIN kit_blobs AS b
                    ON b.thread_id = ?1 AND b.ns = ?2 AND b.channel = c.channel
                   AND b.version = c.prev_version
                 WHERE c.kind = 'delta' AND c.depth < 10000000
             )
             SELECT channel, version, prev_version, kind, data FROM chain",
        )?;
        let mut rows = stmt.query(params![thread_id, ns, versions_text])?;
        while let Some(row) = rows.next()? {
            let kind: String = row.get(3)?;
            let blob = ChannelBlob {
                channel: row.get(0)?,
                version: row.get(1)?,
                prev_version: row.get(2)?,
                kind: BlobKind::parse(&kind).ok_or_else(|| {
                    corrupt(format_args!("checkpoint {id}: unknown blob kind `{kind}`"))
                })?,
                data: row.get(4)?,
            };
            blobs.insert((blob.channel.clone(), blob.version.clone()), blob);
        }
    }
    let channels = resolve_channels(&channel_versions, |channel, version| {
        blobs.get(&(channel.to_string(), version.to_string()))
    })?;

    let mut pending_writes = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT task_id, channel, value FROM kit_writes
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3 ORDER BY idx",
        )?;
        let mut rows = stmt.query(params![thread_id, ns, id])?;
        while let Some(row) = rows.next()? {
            let value: String = row.get(2)?;
            pending_writes.push(PendingWrite {
                task_id: row.get(0)?,
                channel: row.get(1)?,
                value: parse_json(&value, "pending write", id)?,
            });
        }
    }
    Ok(Some(LoadedCheckpoint {
        meta,
        channel_versions,
        channels,
        body,
        pending_writes,
        head,
    }))
}

#[async_trait::async_trait]
impl Checkpointer for SqliteCheckpointer {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        let bytes = write.blob_bytes();
        self.write("writing a checkpoint", write, bytes, put_tx)
            .await
    }

    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        let args = WritesArgs {
            thread_id: thread_id.to_string(),
            ns: ns.to_string(),
            checkpoint_id: checkpoint_id.to_string(),
            writes,
        };
        self.write("writing pending writes", args, 0, put_writes_tx)
            .await
    }

    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        let (thread_id, ns) = (thread_id.to_string(), ns.to_string());
        let checkpoint_id = checkpoint_id.map(String::from);
        self.read("loading a checkpoint", move |conn| {
            // One read transaction: a consistent snapshot of the thread.
            let tx = conn.unchecked_transaction()?;
            let out = load_tx(&tx, &thread_id, &ns, checkpoint_id.as_deref())?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError> {
        let (thread_id, ns) = (thread_id.to_string(), ns.to_string());
        let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        self.read("reading the history", move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {META_COLUMNS} FROM kit_checkpoints
                  WHERE thread_id = ?1 AND ns = ?2 ORDER BY checkpoint_id DESC LIMIT ?3"
            ))?;
            let mut rows = stmt.query(params![thread_id, ns, limit])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(meta_from_row(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.write("deleting a thread", thread_id.to_string(), 0, delete_tx)
            .await
    }

    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        self.read("listing threads", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT thread_id, MAX(updated_at) AS updated,
                        SUM(CASE WHEN ns = '' THEN checkpoints ELSE 0 END) AS n
                   FROM kit_threads GROUP BY thread_id HAVING n > 0
                  ORDER BY updated DESC, thread_id",
            )?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(ThreadInfo {
                    thread_id: row.get(0)?,
                    updated_at: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    checkpoints: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                });
            }
            Ok(out)
        })
        .await
    }
}
