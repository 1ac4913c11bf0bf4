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

//! # Schema (version 3)
//!
//! ```text
//! kit_schema_version(version)                         one row: the schema version
//! kit_threads(thread_id, ns, head, updated_at, checkpoints)          PK (thread_id, ns)
//! kit_checkpoints(thread_id, ns, checkpoint_id, head, data)  PK (thread_id, ns, checkpoint_id)
//! kit_channels(idx, name)                              PK idx; name UNIQUE
//! kit_blobs(thread_id, ns, channel, version, prev_version, kind, data)
//!                                                      PK (thread_id, ns, channel, version)
//! kit_writes(thread_id, ns, checkpoint_id, task_id, channel, idx, value)
//!                                   PK (thread_id, ns, checkpoint_id, task_id, channel)
//! kit_thread_leases(thread_id, run_id, ticket, running, expires_ms, stop, marker,
//!                   rollback_from)                       PK (thread_id, run_id)
//! ```
//!
//! A step writes **one row**: `kit_checkpoints` holds a checkpoint packed as the in-memory
//! checkpointer packs it (`head`: parent, step, source, time, metadata, channel versions, the
//! executor's body and the headers of the blobs the step wrote; `data`: those blobs' bytes — a
//! delta or, once the deltas outweigh the value, a full snapshot; see the [module
//! docs](super)), and it moves the head in `kit_threads`. `checkpoint_id` holds a UUID as kit
//! makes them in 16 bytes and any other id as text. Ids in a row refer to the checkpoint itself
//! or its parent in one byte, channel names are indexes into `kit_channels`, and the time is
//! read from the id's UUIDv7 millisecond: so a step costs the same hundred-odd bytes at message
//! 10 and at message 10,000. `kit_blobs` holds only the blobs no checkpoint row owns: the steps
//! of an exit-durability run, and values a prune kept for the checkpoints that still read them.
//! Loading walks each channel's chain by primary-key lookups, reading each row once; a history
//! reads the heads only, never the blobs' bytes.
//!
//! `kit_thread_leases` (version 2) holds the runs that hold or wait for a thread (see
//! [`lease`](crate::checkpoint::lease)); a lease operation is one `BEGIN IMMEDIATE`
//! transaction.
//!
//! All tables are `WITHOUT ROWID`, clustered on their primary key, so a thread's rows sit
//! together and a checkpoint id range scan is an index walk.
//!
//! Opening a file migrates it forward (each migration in one transaction, under SQLite's write
//! lock so two processes opening a new file at once do not race): a version 2 file's checkpoints
//! and blobs are rewritten as packed rows, once, by the first kit of schema 3 that opens it
//! (stop the processes of the earlier kit first: they cannot read the new layout). A row that
//! cannot be carried over leaves the file as it was, with an error naming the row. A file whose
//! schema version is newer than this build knows is refused with
//! [`CheckpointError::SchemaTooNew`] before anything is written to it.
//!
//! Each process keeps the channel names it has read of `kit_channels`: names are only ever
//! added, and a name's index never changes, so the cache stays true for the file's life. Replace
//! the file under a running process (a restore from a backup) only after closing its
//! checkpointers.
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
//! W5 (100-node chain, 100 invokes): 101 checkpoint rows per invoke and no blob rows, about
//! 14 KB of file per invoke (schema 2, a row per blob and ids as text: 47 KB; Python
//! LangGraph's SqliteSaver: about 938 KB).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};

use super::retention::timestamp;
use super::sql;
use super::{
    CheckpointError, CheckpointMeta, CheckpointWrite, Checkpointer, LeaseOp, LeaseState,
    LoadedCheckpoint, PendingWrite, PruneReport, PruneStrategy, ThreadActivity, ThreadInfo,
};

mod channels;
mod conn;
mod key;
mod lease;
mod queries;
mod retention;
mod schema;

use channels::ChannelNames;
pub use conn::WAL_CHECKPOINT_BYTES;
use conn::{configure, open_connection};
use queries::{
    PutArgs, WritesArgs, delete_tx, head_of, load_tx, meta_of, newest, put_tx, put_writes_tx,
};
use retention::{PruneArgs, delete_before_tx, prune_tx};
pub use schema::SQLITE_SCHEMA_VERSION;
use schema::{check_version, migrate};

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
    /// The channel names of the file, as far as read.
    names: Arc<ChannelNames>,
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
                names: Arc::default(),
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
                names: Arc::default(),
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
}

#[async_trait::async_trait]
impl Checkpointer for SqliteCheckpointer {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        let bytes = write.blob_bytes();
        let names = self.inner.names.clone();
        let args = PutArgs { write, names };
        let added = self
            .write("writing a checkpoint", args, bytes, put_tx)
            .await?;
        self.inner.names.remember(added);
        Ok(())
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
        let names = self.inner.names.clone();
        self.read("loading a checkpoint", move |conn| {
            // One read transaction: a consistent snapshot of the thread.
            let tx = conn.unchecked_transaction()?;
            let out = load_tx(&tx, &names, &thread_id, &ns, checkpoint_id.as_deref())?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    async fn head(&self, thread_id: &str, ns: &str) -> Result<Option<String>, CheckpointError> {
        let (thread_id, ns) = (thread_id.to_string(), ns.to_string());
        self.read("reading a thread's head", move |conn| {
            Ok(head_of(conn, &thread_id, &ns)?.flatten())
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
        self.read("reading the history", move |conn| {
            // One read transaction: both kinds of ids from one snapshot.
            let tx = conn.unchecked_transaction()?;
            let rows = newest(&tx, &thread_id, &ns, limit)?;
            tx.commit()?;
            rows.iter()
                .map(|(id, head)| meta_of(&thread_id, id, head))
                .collect()
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.write("deleting a thread", thread_id.to_string(), 0, delete_tx)
            .await
    }

    async fn lease(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> Result<LeaseState, CheckpointError> {
        let args = lease::LeaseArgs {
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            op,
            ttl,
        };
        self.write("updating a thread lease", args, 0, lease::lease_tx)
            .await
    }

    async fn thread_activity(
        &self,
        thread_id: &str,
    ) -> Result<Option<ThreadActivity>, CheckpointError> {
        let thread_id = thread_id.to_string();
        let now = crate::checkpoint::lease::now_ms();
        self.read("reading a thread lease", move |conn| {
            Ok(ThreadActivity::of(
                &lease::lease_rows(conn, &thread_id)?,
                now,
            ))
        })
        .await
    }

    async fn rollback_after(&self, thread_id: &str, marker: &str) -> Result<u64, CheckpointError> {
        let args = (thread_id.to_string(), marker.to_string());
        self.write_blocking("rolling back a run", args, 0, lease::rollback_tx)
            .await
    }

    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        let args = PruneArgs {
            thread_id: thread_id.to_string(),
            strategy,
            names: self.inner.names.clone(),
        };
        self.write_blocking("pruning a thread", args, 0, prune_tx)
            .await
    }

    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        self.write_blocking(
            "deleting idle threads",
            timestamp(cutoff),
            0,
            delete_before_tx,
        )
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
