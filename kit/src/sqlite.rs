//! What the SQLite back-ends built on it share (the long-term store; the checkpointer keeps its
//! own tuned copy of these patterns in `checkpoint/sqlite/conn.rs`): one file in WAL mode, one
//! writer connection and a few idle readers, every call on tokio's blocking pool, write
//! transactions taken with `BEGIN IMMEDIATE`, schema versions migrated forward under the write
//! lock, and driver errors described with what to check.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

/// Idle reader connections kept open.
const MAX_IDLE_READERS: usize = 4;

/// How long a write waits for another process holding the file's write lock.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A SQLite database: a file, or a private in-memory one. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where it is, for messages (`:memory:` for an in-memory one).
    location: String,
    path: Option<PathBuf>,
    writer: Mutex<Connection>,
    /// Idle readers; `None` in memory (reads use the writer).
    readers: Option<Mutex<Vec<Connection>>>,
}

/// A failure inside a database call: the driver's, or the caller's own error `E`.
pub(crate) enum Fail<E> {
    /// The driver failed.
    Sql(rusqlite::Error),
    /// A connection could not be opened (already described).
    Open(String),
    /// The caller's error.
    Own(E),
}

impl<E> From<rusqlite::Error> for Fail<E> {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

impl Database {
    /// Opens (creating if needed) the file at `path` in WAL mode with `synchronous = NORMAL`.
    /// A blocking call: make it at start-up.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let location = path.display().to_string();
        let writer = connect(path, &location)?;
        let mode: String = writer
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| describe(&location, "switching to WAL mode", &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!(
                "SQLite could not switch {location} to WAL mode (it reports `{mode}`); use a \
                 file on a local file system"
            ));
        }
        Ok(Database {
            inner: Arc::new(Inner {
                location,
                path: Some(path.to_path_buf()),
                writer: Mutex::new(writer),
                readers: Some(Mutex::new(Vec::new())),
            }),
        })
    }

    /// A private in-memory database, gone with the last clone.
    pub(crate) fn in_memory() -> Result<Self, String> {
        let location = ":memory:".to_string();
        let writer =
            Connection::open_in_memory().map_err(|e| describe(&location, "opening", &e))?;
        writer
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| describe(&location, "configuring the connection", &e))?;
        Ok(Database {
            inner: Arc::new(Inner {
                location,
                path: None,
                writer: Mutex::new(writer),
                readers: None,
            }),
        })
    }

    /// Where the database is, for messages.
    pub(crate) fn location(&self) -> &str {
        &self.inner.location
    }

    /// The file, or `None` in memory.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Migrates the schema forward: `migrations[i]` takes it from version `i` to `i + 1`; the
    /// version lives in the one-row table `version_table`. Runs under the write lock, so two
    /// processes opening a new file do not both migrate it. A version newer than
    /// `migrations.len()` is returned as `Err(Ok(found))` before anything is written.
    pub(crate) fn migrate(
        &self,
        version_table: &'static str,
        migrations: &'static [&'static str],
    ) -> Result<(), Result<i64, String>> {
        let supported = i64::try_from(migrations.len()).unwrap_or(i64::MAX);
        let conn = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
        let run = || -> Result<Option<i64>, rusqlite::Error> {
            let found = stored_version(&conn, version_table)?;
            if found > supported {
                return Ok(Some(found));
            }
            if found < supported {
                conn.execute_batch(&format!(
                    "CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL)"
                ))?;
                for sql in migrations.iter().skip(usize::try_from(found).unwrap_or(0)) {
                    conn.execute_batch(sql)?;
                }
                conn.execute(&format!("DELETE FROM {version_table}"), [])?;
                conn.execute(
                    &format!("INSERT INTO {version_table} (version) VALUES (?1)"),
                    [supported],
                )?;
            }
            Ok(None)
        };
        let result = conn
            .execute_batch("BEGIN IMMEDIATE")
            .and_then(|()| run())
            .and_then(|newer| conn.execute_batch("COMMIT").map(|()| newer));
        match result {
            Ok(None) => Ok(()),
            Ok(Some(found)) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(Ok(found))
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(Err(describe(self.location(), "migrating the schema", &e)))
            }
        }
    }

    /// Runs `f` with a reader connection on the blocking pool. The outer error says the call
    /// itself failed (described), the inner one is `f`'s.
    pub(crate) async fn read<T, E>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T, Fail<E>> + Send + 'static,
    ) -> Result<Result<T, E>, String>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || inner.with_reader(f)).await;
        self.settle(op, joined)
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction on the writer, on the blocking pool;
    /// commits when it returns `Ok`.
    pub(crate) async fn write<T, E>(
        &self,
        op: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, Fail<E>> + Send + 'static,
    ) -> Result<Result<T, E>, String>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut conn = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await;
        self.settle(op, joined)
    }

    fn settle<T, E>(
        &self,
        op: &str,
        joined: Result<Result<T, Fail<E>>, tokio::task::JoinError>,
    ) -> Result<Result<T, E>, String> {
        match joined {
            Ok(Ok(v)) => Ok(Ok(v)),
            Ok(Err(Fail::Own(e))) => Ok(Err(e)),
            Ok(Err(Fail::Sql(e))) => Err(describe(self.location(), op, &e)),
            Ok(Err(Fail::Open(e))) => Err(e),
            Err(e) => Err(format!(
                "SQLite {op} on {} did not finish: {e}",
                self.location()
            )),
        }
    }
}

impl Inner {
    fn with_reader<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, Fail<E>>,
    ) -> Result<T, Fail<E>> {
        let (Some(pool), Some(path)) = (&self.readers, &self.path) else {
            let conn = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            return f(&conn);
        };
        let idle = pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => connect(path, &self.location).map_err(Fail::Open)?,
        };
        let out = f(&conn);
        let mut pool = pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        out
    }
}

/// Opens and configures one connection to the file.
fn connect(path: &Path, location: &str) -> Result<Connection, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| describe(location, "opening", &e))?;
    conn.set_prepared_statement_cache_capacity(32);
    conn.busy_timeout(BUSY_TIMEOUT)
        .and_then(|()| conn.pragma_update(None, "synchronous", "NORMAL"))
        .map_err(|e| describe(location, "configuring the connection", &e))?;
    Ok(conn)
}

/// The schema version stored in `table` (0 when it does not exist yet).
fn stored_version(conn: &Connection, table: &str) -> rusqlite::Result<i64> {
    let exists = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if !exists {
        return Ok(0);
    }
    Ok(conn
        .query_row(&format!("SELECT MAX(version) FROM {table}"), [], |row| {
            row.get::<_, Option<i64>>(0)
        })?
        .unwrap_or(0))
}

/// A driver error with the operation, the database and what to check.
pub(crate) fn describe(location: &str, op: &str, e: &rusqlite::Error) -> String {
    let hint = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "another process held the database's write lock for longer than {BUSY_TIMEOUT:?}; \
             retry"
        ),
        Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen) => {
            "check that the file and its directory exist and are writable by this process"
                .to_string()
        }
        Some(ErrorCode::DiskFull) => "free some disk space and retry".to_string(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            "the file is not a SQLite database (or is damaged); point kit at another file"
                .to_string()
        }
        _ => "check the file and retry".to_string(),
    };
    format!("SQLite {op} on {location} failed: {e}; {hint}")
}
