//! The SQL stores' event log layout: a row per *batch* of events numbered `first..=last` from
//! the thread's counter, its events kept as one JSON text `[[method, namespace, data], …]`;
//! an append is one batch, or several when it holds more than [`MAX_BATCH_EVENTS`].
//!
//! A run appends its events in a few batches (most runs in one, with their end), and a row per
//! batch is one insert into the table and its indexes where a row per event was one per event:
//! about twenty for a short agent run. Readers pay instead: a read that starts in the middle of
//! a batch parses the batch's earlier events too (a batch holds at most [`MAX_BATCH_EVENTS`]
//! events of one append).

use serde_json::Value;

use super::{NewEvent, StoreError, StoredEvent};

/// The most events one stored batch holds. A reader parses whole batches, a page of events at
/// a time, so one append of many events (a model answer with thousands of tool calls) is
/// stored as several batches: in one, every page re-read the whole of it.
pub(crate) const MAX_BATCH_EVENTS: usize = 128;

/// One append's events in their stored form, made before they reach the database: one or
/// more batches, numbered in order.
pub(crate) struct Encoded {
    pub(crate) count: usize,
    /// Each batch: how many events it holds, and `[[method, namespace, data], …]`.
    pub(crate) batches: Vec<(usize, String)>,
}

impl Encoded {
    /// Each batch with the first and last numbers of its events, when the append's last
    /// event is numbered `last` (numbers come from the database: a corrupt counter must not
    /// overflow).
    pub(crate) fn numbered(&self, last: i64) -> impl Iterator<Item = (i64, i64, &str)> {
        let count = i64::try_from(self.count).unwrap_or(i64::MAX);
        let mut first = last.saturating_sub(count).saturating_add(1);
        self.batches.iter().map(move |(n, events)| {
            let n = i64::try_from(*n).unwrap_or(i64::MAX);
            let batch_last = first.saturating_add(n).saturating_sub(1);
            let numbered = (first, batch_last, events.as_str());
            first = batch_last.saturating_add(1);
            numbered
        })
    }
}

/// The stored form of `events`: batches of at most [`MAX_BATCH_EVENTS`].
pub(crate) fn encode(events: &[NewEvent]) -> Encoded {
    let batches = events
        .chunks(MAX_BATCH_EVENTS)
        .map(|chunk| (chunk.len(), encode_rows(chunk)))
        .collect();
    Encoded {
        count: events.len(),
        batches,
    }
}

/// `[[method, namespace, data], …]` of `events`.
fn encode_rows(events: &[NewEvent]) -> String {
    let rows: Vec<(&str, &[String], &Value)> = events
        .iter()
        .map(|e| (e.method.as_str(), e.namespace.as_slice(), &e.data))
        .collect();
    // Strings, string lists and JSON values always serialise.
    crate::json::to_string(&rows).unwrap_or_else(|_| "[]".to_string())
}

/// A row written by a store made before batches (one per event), as a batch of one. As that
/// layout was read, a namespace that is not a JSON list of strings is the root; data that is
/// not JSON is kept as a string (it used to fail every read).
pub(crate) fn encode_old_row(method: String, namespace: &str, data: String) -> String {
    encode_rows(&[NewEvent {
        method,
        namespace: super::parse_namespace(namespace),
        data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
    }])
}

/// A batch as read back.
pub(crate) struct Batch {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) run_id: String,
    pub(crate) events: String,
    pub(crate) created_at: i64,
}

impl Batch {
    /// How many of its events are numbered above `after`, counted from its numbers without
    /// parsing it (at least one: a read only fetches batches ending above `after`).
    pub(crate) fn count_above(&self, after: i64) -> usize {
        let from = self.first.max(after.saturating_add(1));
        let above = self.last.saturating_sub(from).saturating_add(1).max(1);
        usize::try_from(above).unwrap_or(usize::MAX)
    }
}

/// One stored event of a batch: method, namespace, data.
type Row = (String, Vec<String>, Value);

/// Up to `limit` events of `batches` (read for `thread_id`) numbered above `after`.
pub(crate) fn parse(
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
        for (seq, (method, namespace, data)) in (unsigned(first)..).zip(rows) {
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
                created_at: unsigned(created_at),
            });
        }
    }
    Ok(out)
}

/// A number read from the database as stored (never negative when kit wrote it).
fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
