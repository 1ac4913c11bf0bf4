//! Checkpointing the store's write-ahead log on a thread of its own.
//!
//! In WAL mode SQLite checkpoints from the connection that commits, once the log has passed
//! 1,000 pages: it copies the log's pages back into the database file and syncs the file to
//! disk. The store has one database thread, which every call waits on, so each of those
//! checkpoints (a few milliseconds of copying and an `fsync`) held up every call queued
//! behind it. Here the database thread only notes that the log has grown; another connection
//! on another thread copies it back with a passive checkpoint, which never blocks a writer,
//! while the database thread goes on committing.
//!
//! If that thread falls far behind (the log passes [`INLINE_AT`] pages), the database thread
//! checkpoints itself, as SQLite would, so the log stays bounded whatever happens.
//!
//! The SQLite checkpointer (`checkpoint/sqlite/conn.rs`) takes its checkpoints off the hot path
//! too, counting the bytes it commits and checkpointing on tokio's blocking pool; the store
//! has no runtime of its own on its database thread, and SQLite's hook gives it exact pages.

use std::ffi::c_int;
use std::path::Path;
use std::sync::mpsc;

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;

use super::backend;
use crate::server::store::StoreError;

/// Log pages after which a checkpoint is asked for (SQLite's own default threshold).
const START_AT: c_int = 1000;

/// Log pages after which the database thread checkpoints itself, the background thread
/// being that far behind.
const INLINE_AT: c_int = 16 * START_AT;

/// Moves the checkpoints of `conn` (the store's connection to the file at `path`) to a thread
/// of its own. The thread ends when `conn` is closed.
pub(super) fn checkpoint_in_background(
    conn: &mut Connection,
    path: &Path,
) -> Result<(), StoreError> {
    let own = Connection::open(path).map_err(|e| backend("opening the log checkpointer", e))?;
    own.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| backend("configuring the log checkpointer", e))?;
    // One request is enough: a checkpoint copies every page logged before it starts.
    let (asks, asked) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("kit-sqlite-wal".into())
        .spawn(move || {
            while asked.recv().is_ok() {
                if let Err(e) = own.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!(error = %e, "could not checkpoint the run store's log; retrying after the next commit");
                }
            }
        })
        .map_err(|e| backend("starting the log checkpointer", e))?;
    // Replaces SQLite's automatic checkpoint, which is a hook of its own.
    conn.wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
        if pages >= INLINE_AT {
            if let Err(e) = wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                tracing::warn!(error = %e, pages, "could not checkpoint the run store's log");
            }
        } else if pages >= START_AT {
            // Full means a checkpoint is asked for already; gone means the thread ended.
            let _ = asks.try_send(());
        }
        Ok(())
    }))
    .map_err(|e| backend("moving log checkpoints to their own thread", e))
}
