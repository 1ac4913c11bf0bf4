//! The thread that owns a SQLite store's connection and commits in groups.
//!
//! Every store call is a job sent to this thread. The thread takes every job waiting when it
//! wakes, runs them inside one `BEGIN IMMEDIATE … COMMIT` (each job keeps its own atomicity
//! with a savepoint), and answers each job only after the commit. Under load the writes of
//! many runs — a claim, a few run ends, a few new runs — share one transaction and one
//! write of the pages they touch (the WAL frames of the threads and runs tables and their
//! indexes), instead of one each; when idle a job is a transaction of its own, as before.
//! The thread also replaces a hop to tokio's blocking pool and a mutex per call.
//!
//! What a caller sees is unchanged: its call returns once its work is committed (or failed
//! and rolled back). A job that fails rolls back its savepoint and nothing else. When the
//! commit itself fails, every job of the group is answered with that error (none of their
//! work was kept).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

use rusqlite::Connection;

use super::backend;
use crate::server::store::StoreError;

/// The most jobs committed together (bounds the latency a job adds to its group).
const MAX_GROUP: usize = 256;

/// Called once the group's fate is known: `None` when it committed, else why not.
pub(super) type Reply = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// Work on the connection; returns how to answer its caller.
pub(super) type Job = Box<dyn FnOnce(&mut Connection) -> Reply + Send>;

/// Starts the thread that owns `conn`; it ends once every sender of the returned channel is
/// gone (the store and its clones dropped), after the jobs already sent.
pub(super) fn spawn(conn: Connection) -> Result<mpsc::Sender<Job>, StoreError> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("kit-sqlite-runs".into())
        .spawn(move || serve(conn, &rx))
        .map_err(|e| backend("starting the database thread", e))?;
    Ok(tx)
}

fn serve(mut conn: Connection, rx: &mpsc::Receiver<Job>) {
    let mut waiting: Vec<Job> = Vec::new();
    loop {
        if waiting.is_empty() {
            match rx.recv() {
                Ok(job) => waiting.push(job),
                Err(_) => return,
            }
        }
        while waiting.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => waiting.push(job),
                Err(_) => break,
            }
        }
        let group = std::mem::take(&mut waiting);
        // IMMEDIATE even for one job: the write lock is taken (waiting out the busy timeout
        // if another connection, such as a checkpointer on the same file, holds it) before
        // anything is read, so a read-then-write job never fails to upgrade its snapshot.
        if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
            // No group transaction to be had: each job's savepoint is its own transaction
            // (and reports its own error).
            for job in group {
                if let Some(reply) = run(&mut conn, job) {
                    reply(None);
                }
            }
            continue;
        }
        let mut replies: Vec<Reply> = Vec::with_capacity(group.len());
        let mut jobs = group.into_iter();
        let mut lost = None;
        for job in jobs.by_ref() {
            if let Some(reply) = run(&mut conn, job) {
                replies.push(reply);
            }
            if conn.is_autocommit() {
                // The job's failure rolled back the whole transaction (SQLite does so on some
                // I/O and disk-full errors): nothing of the group was kept.
                lost = Some(backend(
                    "committing a group of writes",
                    "the transaction was rolled back by an earlier error in its group",
                ));
                break;
            }
        }
        // Jobs after a lost transaction go around again, in a new group.
        waiting.extend(jobs);
        let failure = match lost {
            Some(e) => Some(e),
            None => conn
                .execute_batch("COMMIT")
                .err()
                .map(|e| backend("committing a group of writes", e)),
        };
        if failure.is_some() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for reply in replies {
            reply(failure.as_ref());
        }
    }
}

/// Runs one job; `None` when it panicked (its caller then hears that the database task
/// failed, as its reply is dropped; the savepoint it held was rolled back while unwinding).
fn run(conn: &mut Connection, job: Job) -> Option<Reply> {
    std::panic::catch_unwind(AssertUnwindSafe(|| job(conn))).ok()
}
