//! Connections: the writer, the idle readers, the blocking pool, and WAL upkeep.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{Inner, R, SqliteCheckpointer, SqliteOptions, SqliteSynchronous, is_busy, sql_error};
use crate::checkpoint::CheckpointError;

/// A WAL checkpoint runs on the blocking pool after the writer committed about this many bytes
/// to the WAL (SQLite's own automatic checkpoint is at 1000 pages, 4 MiB).
pub const WAL_CHECKPOINT_BYTES: u64 = 4 << 20;

/// Every this many checkpoints, one catches up holding the writer so the WAL starts over
/// (the WAL stays under about `WAL_CHECKPOINT_BYTES * WAL_RESTART_EVERY`).
pub(super) const WAL_RESTART_EVERY: u64 = 4;

/// If background checkpoints fall behind (a loaded machine), the writer itself restarts the
/// WAL once this many bytes were written since the last checkpoint: a hard bound on the WAL
/// that does not depend on scheduling.
pub(super) const WAL_HARD_LIMIT_BYTES: u64 = 6 * WAL_CHECKPOINT_BYTES;

/// WAL bytes a commit costs besides its data: a few B-tree pages of 4 KiB (measured: about
/// six per checkpoint written).
pub(super) const COMMIT_PAGES_BYTES: u64 = 6 * 4096;

/// Idle reader connections kept open.
pub(super) const MAX_IDLE_READERS: usize = 8;

impl SqliteCheckpointer {
    /// Runs a read on the blocking pool with a reader connection.
    pub(super) async fn read<T: Send + 'static>(
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
    pub(super) async fn write<D: Send + 'static, T: Send + 'static>(
        &self,
        op: &'static str,
        data: D,
        data_bytes: usize,
        f: fn(&Connection, &D) -> R<T>,
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
        self.write_blocking(op, data, data_bytes, f).await
    }

    /// Runs a write transaction on the blocking pool: for the writes that may take long
    /// (pruning, deleting many threads), which must never hold up an async worker thread.
    pub(super) async fn write_blocking<D: Send + 'static, T: Send + 'static>(
        &self,
        op: &'static str,
        data: D,
        data_bytes: usize,
        f: fn(&Connection, &D) -> R<T>,
    ) -> Result<T, CheckpointError> {
        let weight = COMMIT_PAGES_BYTES + data_bytes as u64;
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
    pub(super) fn after_commit<T>(&self, result: &R<T>, weight: u64) {
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

/// Runs `f` in one `BEGIN IMMEDIATE` transaction: committed if it succeeds, rolled back if it
/// or the commit fails, or if `f` panics. `BEGIN` and `COMMIT` are prepared once per connection
/// (rusqlite's `Transaction` parses them again for every write, a tenth of a checkpoint's cost).
pub(super) fn run_write<D, T>(
    conn: &mut Connection,
    busy: Duration,
    data: &D,
    f: fn(&Connection, &D) -> R<T>,
) -> R<T> {
    conn.busy_timeout(busy)?;
    // A transaction left open (a ROLLBACK that failed) would refuse every later BEGIN and keep
    // the file's write lock: close it first.
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let open = OpenTransaction(conn);
    let out = f(open.0, data)?;
    open.0.prepare_cached("COMMIT")?.execute([])?;
    Ok(out)
}

/// Rolls back a transaction still open when dropped: after an error, a failed commit, or a
/// panic unwinding out of the operation (the writer connection is shared, and its mutex is
/// taken again after a panic).
struct OpenTransaction<'c>(&'c Connection);

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}

impl Inner {
    /// Runs `f` with an idle reader connection (opening one if none is idle), or with the
    /// writer connection for an in-memory database.
    pub(super) fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> R<T>) -> R<T> {
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

pub(super) fn open_connection(
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

pub(super) fn configure(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap_or(-1)
    }

    #[test]
    fn a_write_that_fails_or_panics_leaves_no_transaction_open() {
        let mut conn = Connection::open_in_memory().expect("opens");
        conn.execute_batch("CREATE TABLE t (x INTEGER)")
            .expect("creates");
        let insert: fn(&Connection, &i64) -> R<()> = |c, x| {
            c.execute("INSERT INTO t VALUES (?1)", [x])?;
            Ok(())
        };
        let fail: fn(&Connection, &i64) -> R<()> = |c, x| {
            c.execute("INSERT INTO t VALUES (?1)", [x])?;
            Err(crate::checkpoint::sql::corrupt("refused"))
        };
        let panic: fn(&Connection, &i64) -> R<()> = |c, x| {
            c.execute("INSERT INTO t VALUES (?1)", [x]).ok();
            panic!("an operation panicked");
        };
        assert!(run_write(&mut conn, Duration::ZERO, &1, insert).is_ok());
        assert!(run_write(&mut conn, Duration::ZERO, &2, fail).is_err());
        assert!(conn.is_autocommit(), "the failed write was rolled back");
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_write(&mut conn, Duration::ZERO, &3, panic)
        }));
        assert!(unwound.is_err());
        assert!(conn.is_autocommit(), "the panicked write was rolled back");
        // A transaction someone left open is closed before the next write.
        conn.execute_batch("BEGIN; INSERT INTO t VALUES (4)")
            .expect("opens one");
        assert!(run_write(&mut conn, Duration::ZERO, &5, insert).is_ok());
        let rows: Vec<i64> = conn
            .prepare("SELECT x FROM t ORDER BY x")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("reads");
        assert_eq!(rows, [1, 5]);
        assert_eq!(count(&conn), 2);
    }
}
