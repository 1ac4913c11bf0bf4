//! Pruning a thread and deleting idle threads, each in one write transaction.

use rusqlite::{Transaction, params};

use super::queries::delete_tx;
use super::{Fail, R};
use crate::checkpoint::retention::{BlobRow, CheckpointRow, plan};
use crate::checkpoint::{PruneReport, PruneStrategy};

/// Prunes every namespace of thread `args.0` as `args.1` says.
pub(super) fn prune_tx(tx: &Transaction<'_>, args: &(String, PruneStrategy)) -> R<PruneReport> {
    let (thread_id, strategy) = args;
    let namespaces: Vec<(String, Option<String>)> = tx
        .prepare_cached("SELECT ns, head FROM kit_threads WHERE thread_id = ?1")?
        .query_map([thread_id], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut report = PruneReport::default();
    for (ns, head) in namespaces {
        report.add(prune_ns(tx, thread_id, &ns, head.as_deref(), *strategy)?);
    }
    Ok(report)
}

fn prune_ns(
    tx: &Transaction<'_>,
    thread_id: &str,
    ns: &str,
    head: Option<&str>,
    strategy: PruneStrategy,
) -> R<PruneReport> {
    // Links only: no channel data or bodies are read.
    let checkpoints: Vec<CheckpointRow> = tx
        .prepare_cached(
            "SELECT checkpoint_id, parent_id, channel_versions FROM kit_checkpoints
              WHERE thread_id = ?1 AND ns = ?2",
        )?
        .query_map(params![thread_id, ns], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    let blobs: Vec<BlobRow> = tx
        .prepare_cached(
            "SELECT channel, version, prev_version, kind FROM kit_blobs
              WHERE thread_id = ?1 AND ns = ?2",
        )?
        .query_map(params![thread_id, ns], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<Result<_, _>>()?;

    let plan = plan(thread_id, head, &checkpoints, &blobs, strategy).map_err(Fail::Checkpoint)?;

    let mut report = PruneReport::default();
    {
        let mut drop_checkpoint = tx.prepare_cached(
            "DELETE FROM kit_checkpoints WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
        )?;
        let mut drop_writes = tx.prepare_cached(
            "DELETE FROM kit_writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
        )?;
        for id in &plan.checkpoints {
            report.checkpoints += drop_checkpoint.execute(params![thread_id, ns, id])? as u64;
            report.writes += drop_writes.execute(params![thread_id, ns, id])? as u64;
        }
        let mut drop_blob = tx.prepare_cached(
            "DELETE FROM kit_blobs
              WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4",
        )?;
        for (channel, version) in &plan.blobs {
            report.blobs += drop_blob.execute(params![thread_id, ns, channel, version])? as u64;
        }
    }
    tx.prepare_cached("UPDATE kit_threads SET checkpoints = ?3 WHERE thread_id = ?1 AND ns = ?2")?
        .execute(params![thread_id, ns, plan.kept as i64])?;
    Ok(report)
}

/// Deletes every thread whose newest checkpoint was written before `cutoff` (RFC 3339 text, as
/// the checkpoints' times are stored); returns their ids.
pub(super) fn delete_before_tx(tx: &Transaction<'_>, cutoff: &String) -> R<Vec<String>> {
    let idle: Vec<String> = tx
        .prepare_cached(
            "SELECT thread_id FROM kit_threads GROUP BY thread_id
             HAVING COALESCE(MAX(updated_at), '') < ?1",
        )?
        .query_map([cutoff], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for thread_id in &idle {
        delete_tx(tx, thread_id)?;
    }
    Ok(idle)
}
