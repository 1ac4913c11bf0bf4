//! The thread event log in SQLite: a row per batch of an append (events numbered from the
//! thread's counter, laid out as [`batch`](crate::server::store::batch) says), read from a
//! cursor, pruned by age.

use rusqlite::{Connection, params};

use super::{backend, ms, unms};
use crate::server::store::StoreError;
use crate::server::store::batch::{Batch, Encoded, encode_old_row};

/// The table and its age index; [`migrate`] moves the rows of the table kit used before.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kit_worker_event_batches (
    thread_id  TEXT NOT NULL,
    last_seq   INTEGER NOT NULL,
    first_seq  INTEGER NOT NULL,
    run_id     TEXT NOT NULL,
    events     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, last_seq)
);
CREATE INDEX IF NOT EXISTS kit_worker_event_batches_age
    ON kit_worker_event_batches (created_at);
";

/// A store made by an older kit kept a row per event in `kit_worker_events`: each becomes a
/// batch of one ([`encode_old_row`]), in one transaction, and the old table is dropped.
pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let old: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kit_worker_events'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| backend("reading the table layout", e))?;
    if old == 0 {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")
        .and_then(|()| move_rows(conn))
        .and_then(|()| conn.execute_batch("DROP TABLE kit_worker_events; COMMIT"))
        .map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            backend(
                "moving the event log of an older store to one row per batch",
                e,
            )
        })
}

/// Copies every row of `kit_worker_events` into a batch of its own.
fn move_rows(conn: &Connection) -> rusqlite::Result<()> {
    let mut insert = conn.prepare(
        "INSERT INTO kit_worker_event_batches
            (thread_id, last_seq, first_seq, run_id, events, created_at)
         VALUES (?1, ?2, ?2, ?3, ?4, ?5)",
    )?;
    let mut select = conn.prepare(
        "SELECT thread_id, seq, run_id, method, namespace, data, created_at
         FROM kit_worker_events",
    )?;
    let mut rows = select.query([])?;
    while let Some(row) = rows.next()? {
        let events = encode_old_row(row.get(3)?, &row.get::<_, String>(4)?, row.get(5)?);
        insert.execute(params![
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
            events,
            row.get::<_, i64>(6)?
        ])?;
    }
    Ok(())
}

/// Appends `batch` inside the caller's transaction (a row per batch of it); returns the number
/// of its last event.
pub(super) fn append(
    conn: &Connection,
    thread_id: &str,
    run_id: &str,
    batch: &Encoded,
    now: u64,
) -> Result<u64, StoreError> {
    let op = "appending events";
    if batch.count == 0 {
        return Ok(0);
    }
    let count = i64::try_from(batch.count).unwrap_or(i64::MAX);
    let last: i64 = conn
        .prepare_cached(
            "UPDATE kit_worker_threads SET event_seq = event_seq + ?2
             WHERE thread_id = ?1 RETURNING event_seq",
        )
        .and_then(|mut s| s.query_row(params![thread_id, count], |r| r.get(0)))
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => StoreError::Corrupt(format!(
                "events were appended to thread `{thread_id}`, which has no row"
            )),
            other => backend(op, other),
        })?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO kit_worker_event_batches
            (thread_id, last_seq, first_seq, run_id, events, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(|e| backend(op, e))?;
    for (first, batch_last, events) in batch.numbered(last) {
        insert
            .execute(params![
                thread_id,
                batch_last,
                first,
                run_id,
                events,
                ms(now)
            ])
            .map_err(|e| backend(op, e))?;
    }
    Ok(unms(last))
}

/// The batches of `thread_id` holding its first `limit` events numbered above `after`: no
/// more than those events need (counted from the batches' numbers, without parsing them).
pub(super) fn read(
    conn: &Connection,
    thread_id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Batch>, StoreError> {
    let op = "reading events";
    let mut statement = conn
        .prepare_cached(
            // `+ 0`: SQLite prepares a statement with a bare `LIMIT ?` again on every run.
            "SELECT first_seq, last_seq, run_id, events, created_at
             FROM kit_worker_event_batches
             WHERE thread_id = ?1 AND last_seq > ?2 ORDER BY last_seq LIMIT ?3 + 0",
        )
        .map_err(|e| backend(op, e))?;
    // Every batch holds at least one event above `after`: `limit` batches are enough.
    let mut rows = statement
        .query(params![
            thread_id,
            ms(after),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ])
        .map_err(|e| backend(op, e))?;
    let mut batches = Vec::new();
    let mut events: usize = 0;
    while events < limit {
        let Some(row) = rows.next().map_err(|e| backend(op, e))? else {
            break;
        };
        let batch = Batch {
            first: row.get(0).map_err(|e| backend(op, e))?,
            last: row.get(1).map_err(|e| backend(op, e))?,
            run_id: row.get(2).map_err(|e| backend(op, e))?,
            events: row.get(3).map_err(|e| backend(op, e))?,
            created_at: row.get(4).map_err(|e| backend(op, e))?,
        };
        events = events.saturating_add(batch.count_above(ms(after)));
        batches.push(batch);
    }
    Ok(batches)
}

/// Deletes the batches appended before `before`; returns how many events they held.
pub(super) fn prune(conn: &Connection, before: u64) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "DELETE FROM kit_worker_event_batches WHERE created_at < ?1
         RETURNING last_seq - first_seq + 1",
    )
    .and_then(|mut s| {
        s.query_map(params![ms(before)], |r| r.get::<_, i64>(0))?
            .try_fold(0u64, |sum, n| Ok(sum.saturating_add(unms(n?))))
    })
    .map_err(|e| backend("pruning events", e))
}
