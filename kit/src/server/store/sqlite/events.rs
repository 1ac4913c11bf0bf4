//! The thread event log in SQLite: appends numbered from the thread's counter, reads from a
//! cursor, pruning by age.

use rusqlite::{Connection, params};

use super::{backend, ms, unms};
use crate::server::store::{NewEvent, StoreError, StoredEvent, parse_namespace};

/// An event with its columns as stored: made before the store's database thread sees it.
pub(super) struct Encoded {
    method: String,
    namespace: String,
    data: String,
}

/// The stored columns of `events`.
pub(super) fn encode(events: &[NewEvent]) -> Vec<Encoded> {
    events
        .iter()
        .map(|event| Encoded {
            method: event.method.clone(),
            namespace: serde_json::to_string(&event.namespace).unwrap_or_else(|_| "[]".into()),
            data: event.data.to_string(),
        })
        .collect()
}

/// Appends `events` inside the caller's transaction; returns the number of the last one.
pub(super) fn append(
    conn: &Connection,
    thread_id: &str,
    run_id: &str,
    events: &[Encoded],
    now: u64,
) -> Result<u64, StoreError> {
    let op = "appending events";
    if events.is_empty() {
        return Ok(0);
    }
    let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
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
    let mut seq = last - count;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO kit_worker_events
                (thread_id, seq, run_id, method, namespace, data, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(|e| backend(op, e))?;
    for event in events {
        seq += 1;
        insert
            .execute(params![
                thread_id,
                seq,
                run_id,
                event.method,
                event.namespace,
                event.data,
                ms(now)
            ])
            .map_err(|e| backend(op, e))?;
    }
    Ok(unms(last))
}

/// Up to `limit` events of `thread_id` numbered above `after`.
pub(super) fn read(
    conn: &Connection,
    thread_id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let rows = conn
        .prepare_cached(
            // `+ 0`: SQLite prepares a statement with a bare `LIMIT ?` again on every run.
            "SELECT seq, run_id, method, namespace, data, created_at FROM kit_worker_events
             WHERE thread_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3 + 0",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    thread_id,
                    ms(after),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                },
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| backend("reading events", e))?;
    rows.into_iter()
        .map(|(seq, run_id, method, namespace, data, created_at)| {
            Ok(StoredEvent {
                thread_id: thread_id.to_string(),
                seq: unms(seq),
                run_id,
                method,
                namespace: parse_namespace(&namespace),
                data: super::parse_json("data", &data)?,
                created_at: unms(created_at),
            })
        })
        .collect()
}

/// Deletes events appended before `before`.
pub(super) fn prune(conn: &Connection, before: u64) -> Result<u64, StoreError> {
    conn.prepare_cached("DELETE FROM kit_worker_events WHERE created_at < ?1")
        .and_then(|mut s| s.execute(params![ms(before)]))
        .map(|n| n as u64)
        .map_err(|e| backend("pruning events", e))
}
