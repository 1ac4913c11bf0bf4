//! Thread leases and rollbacks in the SQLite file: each lease operation is one `BEGIN
//! IMMEDIATE` transaction, so SQLite's write lock makes it atomic across every process sharing
//! the file.

use std::time::Duration;

use std::cmp::Ordering;
use std::collections::HashMap;

use rusqlite::{Connection, params};

use super::R;
use super::key::{Key, id_of};
use super::queries::head_of;
use crate::checkpoint::lease::{self, LeaseOp, LeaseRow, LeaseState, MultitaskStrategy};
use crate::checkpoint::packed::Id;
use crate::checkpoint::sql::stop_request;

/// A lease operation to run in a write transaction.
pub(super) struct LeaseArgs {
    pub(super) thread_id: String,
    pub(super) run_id: String,
    pub(super) op: LeaseOp,
    pub(super) ttl: Duration,
}

/// One lease operation; a rollback it hands over runs in the same transaction.
pub(super) fn lease_tx(tx: &Connection, args: &LeaseArgs) -> R<LeaseState> {
    let before = lease_rows(tx, &args.thread_id)?;
    let head = head_of(tx, &args.thread_id, "")?.flatten();
    let mut rows = before.clone();
    // Read under the write lock: a busy wait for the lock does not age the judgement.
    let state = lease::decide(
        &mut rows,
        &args.run_id,
        args.op,
        lease::now_ms(),
        args.ttl,
        || lease::marker_after(head.as_deref()),
    );
    if let LeaseState::Running {
        rollback_from: Some(marker),
    } = &state
    {
        rollback_tx(tx, &(args.thread_id.clone(), marker.clone()))?;
    }
    let (deleted, upserts) = lease::changes(&before, &rows);
    for run_id in deleted {
        tx.prepare_cached("DELETE FROM kit_thread_leases WHERE thread_id = ?1 AND run_id = ?2")?
            .execute(params![args.thread_id, run_id])?;
    }
    for row in upserts {
        tx.prepare_cached(
            "INSERT INTO kit_thread_leases
                    (thread_id, run_id, ticket, running, expires_ms, stop, marker, rollback_from)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (thread_id, run_id) DO UPDATE SET
                    ticket = excluded.ticket, running = excluded.running,
                    expires_ms = excluded.expires_ms, stop = excluded.stop,
                    marker = excluded.marker, rollback_from = excluded.rollback_from",
        )?
        .execute(params![
            args.thread_id,
            row.run_id,
            row.ticket,
            row.running,
            row.expires_ms,
            row.stop.map(MultitaskStrategy::as_str),
            row.marker,
            row.rollback_from,
        ])?;
    }
    Ok(state)
}

/// The lease rows of a thread (expired ones included: [`lease::decide`] drops them).
pub(super) fn lease_rows(conn: &Connection, thread_id: &str) -> R<Vec<LeaseRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, ticket, running, expires_ms, stop, marker, rollback_from
           FROM kit_thread_leases WHERE thread_id = ?1 ORDER BY ticket",
    )?;
    let mut rows = stmt.query([thread_id])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let stop = stop_request(thread_id, row.get(4)?)?;
        out.push(LeaseRow {
            run_id: row.get(0)?,
            ticket: row.get(1)?,
            running: row.get(2)?,
            expires_ms: row.get(3)?,
            stop,
            marker: row.get(5)?,
            rollback_from: row.get(6)?,
        });
    }
    Ok(out)
}

/// Deletes what a thread got after `marker` and moves each namespace's head back.
pub(super) fn rollback_tx(tx: &Connection, args: &(String, String)) -> R<u64> {
    let (thread_id, marker) = args;
    // Ids of both stored kinds, compared as their texts (see `super::key`): keys only, no data.
    let mut ids: Vec<(String, Id)> = Vec::new();
    {
        let mut stmt = tx
            .prepare_cached("SELECT ns, checkpoint_id FROM kit_checkpoints WHERE thread_id = ?1")?;
        let mut rows = stmt.query([thread_id])?;
        while let Some(row) = rows.next()? {
            ids.push((row.get(0)?, id_of(row.get_ref(1)?)?));
        }
    }
    // Each namespace's newest remaining checkpoint and how many remain.
    let mut remaining: HashMap<String, (Option<Id>, i64)> = HashMap::new();
    let mut deleted = 0u64;
    let mut drop = tx.prepare_cached(
        "DELETE FROM kit_checkpoints WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
    )?;
    for (ns, id) in ids {
        if id.cmp_str(marker) == Ordering::Greater {
            drop.execute(params![thread_id, ns, Key::from(&id)])?;
            deleted += 1;
            continue;
        }
        let (newest, count) = remaining.entry(ns).or_default();
        *count += 1;
        if newest
            .as_ref()
            .is_none_or(|n| id.cmp_id(n) == Ordering::Greater)
        {
            *newest = Some(id);
        }
    }
    tx.prepare_cached("DELETE FROM kit_blobs WHERE thread_id = ?1 AND version > ?2")?
        .execute(params![thread_id, marker])?;
    tx.prepare_cached("DELETE FROM kit_writes WHERE thread_id = ?1 AND checkpoint_id > ?2")?
        .execute(params![thread_id, marker])?;
    let namespaces: Vec<String> = tx
        .prepare_cached("SELECT ns FROM kit_threads WHERE thread_id = ?1")?
        .query_map([thread_id], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut update = tx.prepare_cached(
        "UPDATE kit_threads SET head = ?3, checkpoints = ?4 WHERE thread_id = ?1 AND ns = ?2",
    )?;
    for ns in namespaces {
        let (head, count) = remaining.remove(&ns).unwrap_or_default();
        update.execute(params![thread_id, ns, head.map(|h| h.to_string()), count])?;
    }
    tx.prepare_cached("DELETE FROM kit_threads WHERE thread_id = ?1 AND checkpoints = 0")?
        .execute([thread_id])?;
    Ok(deleted)
}
