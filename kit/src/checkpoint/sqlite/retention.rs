//! Pruning a thread and deleting idle threads, each in one write transaction.

use rusqlite::{Connection, params};

use super::channels::ChannelNames;
use super::key::{Key, id_of};
use super::queries::delete_tx;
use super::{Fail, R};
use crate::checkpoint::packed;
use crate::checkpoint::retention::{HeldRow, LooseBlob, plan_held};
use crate::checkpoint::sql::corrupt;
use crate::checkpoint::{BlobKind, PruneReport, PruneStrategy};

/// What a prune needs: the thread, the strategy and the file's channel names.
pub(super) struct PruneArgs {
    pub(super) thread_id: String,
    pub(super) strategy: PruneStrategy,
    pub(super) names: std::sync::Arc<ChannelNames>,
}

/// Prunes every namespace of the thread as the strategy says.
pub(super) fn prune_tx(tx: &Connection, args: &PruneArgs) -> R<PruneReport> {
    let namespaces: Vec<(String, Option<String>)> = tx
        .prepare_cached("SELECT ns, head FROM kit_threads WHERE thread_id = ?1")?
        .query_map([&args.thread_id], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut report = PruneReport::default();
    for (ns, head) in namespaces {
        report.add(prune_ns(tx, args, &ns, head.as_deref())?);
    }
    Ok(report)
}

fn prune_ns(tx: &Connection, args: &PruneArgs, ns: &str, head: Option<&str>) -> R<PruneReport> {
    let thread_id = args.thread_id.as_str();
    // Links only: the heads of the rows, not the blobs' data.
    let mut rows = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT checkpoint_id, head FROM kit_checkpoints WHERE thread_id = ?1 AND ns = ?2",
        )?;
        let mut found = stmt.query(params![thread_id, ns])?;
        while let Some(row) = found.next()? {
            let id = id_of(row.get_ref(0)?)?.to_string();
            let head: Vec<u8> = row.get(1)?;
            rows.push(held_row(tx, &args.names, id, &head)?);
        }
    }
    let loose: Vec<LooseBlob> = tx
        .prepare_cached(
            "SELECT channel, version, prev_version, kind FROM kit_blobs
              WHERE thread_id = ?1 AND ns = ?2",
        )?
        .query_map(params![thread_id, ns], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get::<_, String>(3)?,
            ))
        })?
        .map(|row| {
            let (channel, version, prev_version, kind): (String, String, _, String) = row?;
            let kind = BlobKind::parse(&kind).ok_or_else(|| {
                corrupt(format_args!(
                    "thread `{thread_id}`: blob {channel}@{version} has unknown kind `{kind}`; \
                     nothing was pruned"
                ))
            })?;
            Ok(LooseBlob {
                channel,
                version,
                kind,
                prev_version,
            })
        })
        .collect::<R<_>>()?;

    let plan = plan_held(head, &rows, &loose, args.strategy).map_err(Fail::Checkpoint)?;

    let mut report = PruneReport {
        checkpoints: plan.removed.len() as u64,
        blobs: plan.blobs_removed,
        writes: 0,
    };
    // Blobs a kept checkpoint still reads move to kit_blobs before their row goes.
    let mut keep_apart = tx.prepare_cached(
        "INSERT OR REPLACE INTO kit_blobs
            (thread_id, ns, channel, version, prev_version, kind, data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (i, channel) in &plan.keep_apart {
        let id = rows[*i].id.as_str();
        let (head, data): (Vec<u8>, Vec<u8>) = tx
            .prepare_cached(
                "SELECT head, data FROM kit_checkpoints
                  WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
            )?
            .query_row(params![thread_id, ns, Key::of(id)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        let blobs = packed::unpack_blobs(id, &head, &data)
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: unreadable blobs")))?;
        let blob = rows[*i]
            .blobs
            .iter()
            .position(|(c, ..)| c == channel)
            .and_then(|at| blobs.get(at))
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: no blob of `{channel}`")))?;
        keep_apart.execute(params![
            thread_id,
            ns,
            channel,
            id,
            blob.prev_version,
            blob.kind.as_str(),
            blob.data
        ])?;
    }
    let mut drop_checkpoint = tx.prepare_cached(
        "DELETE FROM kit_checkpoints WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
    )?;
    let mut drop_writes = tx.prepare_cached(
        "DELETE FROM kit_writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
    )?;
    for &i in &plan.removed {
        let id = rows[i].id.as_str();
        drop_checkpoint.execute(params![thread_id, ns, Key::of(id)])?;
        report.writes += drop_writes.execute(params![thread_id, ns, id])? as u64;
    }
    let mut drop_blob = tx.prepare_cached(
        "DELETE FROM kit_blobs
          WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4",
    )?;
    for &i in &plan.drop_loose {
        drop_blob.execute(params![thread_id, ns, loose[i].channel, loose[i].version])?;
    }
    tx.prepare_cached("UPDATE kit_threads SET checkpoints = ?3 WHERE thread_id = ?1 AND ns = ?2")?
        .execute(params![thread_id, ns, plan.kept as i64])?;
    Ok(report)
}

/// A checkpoint row as pruning sees it, from its head.
fn held_row(tx: &Connection, names: &ChannelNames, id: String, head: &[u8]) -> R<HeldRow> {
    let unreadable = || {
        corrupt(format_args!(
            "checkpoint {id}: unreadable row; nothing was pruned"
        ))
    };
    let fields = packed::unpack(&id, head).ok_or_else(unreadable)?;
    let mut versions = Vec::with_capacity(fields.channel_versions.len());
    for (index, version) in fields.channel_versions {
        versions.push((names.name(tx, index)?, version));
    }
    let mut blobs = Vec::new();
    for b in packed::blob_heads(&id, head).ok_or_else(unreadable)? {
        blobs.push((names.name(tx, b.channel)?, b.kind, b.prev_version));
    }
    Ok(HeldRow {
        id,
        parent_id: fields.parent_id,
        versions,
        blobs,
    })
}

/// Deletes every thread whose newest checkpoint was written before `cutoff` (RFC 3339 text, as
/// the checkpoints' times are stored); returns their ids.
pub(super) fn delete_before_tx(tx: &Connection, cutoff: &String) -> R<Vec<String>> {
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
