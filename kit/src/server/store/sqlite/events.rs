//! The thread event log in SQLite: one row per append (a batch of events numbered from the
//! thread's counter), read from a cursor, pruned by age.
//!
//! A run appends its events in a few batches (most runs in one, with their end), and a row per
//! batch is one insert into the table and its two indexes where a row per event was one per
//! event: about twenty for a short agent run. Readers pay instead: a read that starts in the
//! middle of a batch parses the batch's earlier events too (a batch holds at most what one
//! append wrote).

use rusqlite::{Connection, params};
use serde_json::Value;

use super::{backend, ms, unms};
use crate::server::store::{NewEvent, StoreError, StoredEvent, parse_namespace};

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
/// batch of one, in one transaction. As that layout was read, a namespace that is not a JSON
/// list of strings is the root; data that is not JSON is kept as a string (it used to fail
/// every read).
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

/// Copies every row of `kit_worker_events` into a batch of its own, reading its namespace and
/// data as that layout was read.
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
        let data: String = row.get(5)?;
        let event = NewEvent {
            method: row.get(3)?,
            namespace: parse_namespace(&row.get::<_, String>(4)?),
            data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
        };
        insert.execute(params![
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
            encode(std::slice::from_ref(&event)).events,
            row.get::<_, i64>(6)?
        ])?;
    }
    Ok(())
}

/// A batch of events as stored: made before the store's database thread sees it.
pub(super) struct Encoded {
    count: usize,
    /// `[[method, namespace, data], …]`
    events: String,
}

/// The stored form of `events`.
pub(super) fn encode(events: &[NewEvent]) -> Encoded {
    let rows: Vec<(&str, &[String], &Value)> = events
        .iter()
        .map(|e| (e.method.as_str(), e.namespace.as_slice(), &e.data))
        .collect();
    Encoded {
        count: events.len(),
        // Strings, string lists and JSON values always serialise.
        events: crate::json::to_string(&rows).unwrap_or_else(|_| "[]".to_string()),
    }
}

/// Appends `batch` inside the caller's transaction; returns the number of its last event.
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
    conn.prepare_cached(
        "INSERT INTO kit_worker_event_batches
            (thread_id, last_seq, first_seq, run_id, events, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            thread_id,
            last,
            // Numbers come from the file: a corrupt counter must not overflow.
            last.saturating_sub(count).saturating_add(1),
            run_id,
            batch.events,
            ms(now)
        ])
    })
    .map_err(|e| backend(op, e))?;
    Ok(unms(last))
}

/// One stored event of a batch: method, namespace, data.
type Row = (String, Vec<String>, Value);

/// A batch as stored; [`parse`] turns it into events, on the caller's side of the database
/// thread.
pub(super) struct Batch {
    first: i64,
    last: i64,
    run_id: String,
    events: String,
    created_at: i64,
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
        let from = batch.first.max(ms(after).saturating_add(1));
        let above = batch.last.saturating_sub(from).saturating_add(1).max(1);
        events = events.saturating_add(usize::try_from(above).unwrap_or(usize::MAX));
        batches.push(batch);
    }
    Ok(batches)
}

/// Up to `limit` events of `batches` (read for `thread_id`) numbered above `after`.
pub(super) fn parse(
    thread_id: &str,
    batches: Vec<Batch>,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut out = Vec::new();
    for Batch {
        first,
        last,
        run_id,
        events,
        created_at,
    } in batches
    {
        let rows: Vec<Row> = serde_json::from_str(&events).map_err(|e| {
            StoreError::Corrupt(format!(
                "the events {first}..={last} of thread `{thread_id}` are not a list of \
                 [method, namespace, data]: {e}"
            ))
        })?;
        if i64::try_from(rows.len()).ok() != last.checked_sub(first).and_then(|d| d.checked_add(1))
        {
            return Err(StoreError::Corrupt(format!(
                "the batch of events {first}..={last} of thread `{thread_id}` holds {} events",
                rows.len()
            )));
        }
        for (seq, (method, namespace, data)) in (unms(first)..).zip(rows) {
            if seq <= after {
                continue;
            }
            if out.len() == limit {
                return Ok(out);
            }
            out.push(StoredEvent {
                thread_id: thread_id.to_string(),
                seq,
                run_id: run_id.clone(),
                method,
                namespace,
                data,
                created_at: unms(created_at),
            });
        }
    }
    Ok(out)
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
