//! The SQL of each operation, inside one transaction.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::channels::{Added, ChannelNames};
use super::key::{Key, id_of};
use super::{Fail, R};
use crate::checkpoint::packed::{self, BlobFields, Fields, Id};
use crate::checkpoint::sql::{corrupt, parse_json, to_text};
use crate::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointWrite, LoadedCheckpoint,
    PendingWrite, resolve_channels,
};

pub(super) fn head_of(conn: &Connection, thread_id: &str, ns: &str) -> R<Option<Option<String>>> {
    Ok(conn
        .prepare_cached("SELECT head FROM kit_threads WHERE thread_id = ?1 AND ns = ?2")?
        .query_row(params![thread_id, ns], |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?)
}

/// A checkpoint to write, and the channel names of the file.
pub(super) struct PutArgs {
    pub(super) write: CheckpointWrite,
    pub(super) names: Arc<ChannelNames>,
}

/// Moves the head of the write's thread to its checkpoint if it is still the one the writer
/// expects, else fails with [`CheckpointError::Conflict`]. One statement on the usual path.
fn move_head(tx: &Connection, w: &CheckpointWrite) -> R<()> {
    let moved = tx
        .prepare_cached(
            "UPDATE kit_threads SET head = ?3, updated_at = ?4, checkpoints = checkpoints + 1
              WHERE thread_id = ?1 AND ns = ?2 AND head IS ?5",
        )?
        .execute(params![
            w.thread_id,
            w.ns,
            w.meta.id,
            w.meta.created_at,
            w.expected_head
        ])?;
    if moved == 1 {
        return Ok(());
    }
    match head_of(tx, &w.thread_id, &w.ns)? {
        None if w.expected_head.is_none() => {
            tx.prepare_cached(
                "INSERT INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
                 VALUES (?1, ?2, ?3, ?4, 1)",
            )?
            .execute(params![w.thread_id, w.ns, w.meta.id, w.meta.created_at])?;
            Ok(())
        }
        found => Err(Fail::Checkpoint(CheckpointError::Conflict {
            thread_id: w.thread_id.clone(),
            expected: w.expected_head.clone(),
            found: found.flatten(),
        })),
    }
}

/// Writes a checkpoint as one packed row (with the blobs whose version is its id) and moves the
/// thread's head; returns the channel names it gave an index.
pub(super) fn put_tx(tx: &Connection, a: &PutArgs) -> R<Added> {
    let w = &a.write;
    move_head(tx, w)?;
    let mut added = Added::new();
    let mut channel_versions = Vec::with_capacity(w.channel_versions.len());
    for (channel, version) in w.channel_versions.iter() {
        channel_versions.push((a.names.index(tx, channel, &mut added)?, version.as_str()));
    }
    let mut blobs = Vec::with_capacity(w.blobs.len());
    for b in w.blobs.iter().filter(|b| b.version == w.meta.id) {
        blobs.push(BlobFields {
            channel: a.names.index(tx, &b.channel, &mut added)?,
            prev_version: b.prev_version.as_deref(),
            kind: b.kind,
            data: &b.data,
        });
    }
    let own = Id::new(&w.meta.id);
    let buffer = packed::pack(
        &w.meta.id,
        &own,
        &Fields {
            parent_id: w.meta.parent_id.as_deref(),
            parent_parsed: None,
            step: w.meta.step,
            source: w.meta.source,
            created_at: &w.meta.created_at,
            metadata: packed::Metadata::Value(&w.meta.metadata),
            channel_versions,
            body: &w.body,
            blobs,
        },
    )
    .ok_or_else(|| Fail::Checkpoint(packed::too_large(&w.meta.id)))?;
    let (head, data) = packed::split(&buffer)
        .ok_or_else(|| corrupt(format_args!("checkpoint {} did not pack", w.meta.id)))?;
    // A plain INSERT: an id the thread already has is refused, never replaced (the caller's
    // transaction then rolls back the head it moved).
    tx.prepare_cached(
        "INSERT INTO kit_checkpoints (thread_id, ns, checkpoint_id, head, data)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![w.thread_id, w.ns, Key::from(&own), head, data])
    .map_err(|e| match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            Fail::Checkpoint(CheckpointError::DuplicateId {
                thread_id: w.thread_id.clone(),
                ns: w.ns.clone(),
                checkpoint_id: w.meta.id.clone(),
            })
        }
        _ => Fail::Sql(e),
    })?;
    // Blobs of steps that have no checkpoint of their own (exit durability).
    let mut orphan = None;
    for b in w.blobs.iter().filter(|b| b.version != w.meta.id) {
        let insert = match &mut orphan {
            Some(insert) => insert,
            None => orphan.insert(tx.prepare_cached(
                "INSERT OR REPLACE INTO kit_blobs
                    (thread_id, ns, channel, version, prev_version, kind, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?),
        };
        insert.execute(params![
            w.thread_id,
            w.ns,
            b.channel,
            b.version,
            b.prev_version,
            b.kind.as_str(),
            b.data
        ])?;
    }
    Ok(added)
}

pub(super) struct WritesArgs {
    pub(super) thread_id: String,
    pub(super) ns: String,
    pub(super) checkpoint_id: String,
    pub(super) writes: Vec<PendingWrite>,
}

pub(super) fn put_writes_tx(tx: &Connection, a: &WritesArgs) -> R<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
         VALUES (?1, ?2, NULL, NULL, 0)",
    )?
    .execute(params![a.thread_id, a.ns])?;
    // The next position is read once per batch: read per write, it scanned the checkpoint's
    // writes each time (`idx` is not indexed), quadratic in a step of many tasks. A write that
    // replaces one keeps its place, so positions may skip; only their order is read.
    let next: i64 = tx
        .prepare_cached(
            "SELECT COALESCE(MAX(idx) + 1, 0) FROM kit_writes
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
        )?
        .query_row(params![a.thread_id, a.ns, a.checkpoint_id], |row| {
            row.get(0)
        })?;
    let mut upsert = tx.prepare_cached(
        "INSERT INTO kit_writes (thread_id, ns, checkpoint_id, task_id, channel, idx, value)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel)
         DO UPDATE SET value = excluded.value",
    )?;
    for (idx, w) in (next..).zip(&a.writes) {
        let value = to_text(&w.value)?;
        upsert.execute(params![
            a.thread_id,
            a.ns,
            a.checkpoint_id,
            w.task_id,
            w.channel,
            idx,
            value
        ])?;
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // the argument type is fixed by `write`
pub(super) fn delete_tx(tx: &Connection, thread_id: &String) -> R<()> {
    for table in [
        "kit_blobs",
        "kit_writes",
        "kit_checkpoints",
        "kit_threads",
        "kit_thread_leases",
    ] {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = ?1"))?
            .execute([thread_id])?;
    }
    Ok(())
}

/// A checkpoint row's head read back as its metadata.
pub(super) fn meta_of(thread_id: &str, id: &Id, head: &[u8]) -> R<CheckpointMeta> {
    let text = id.to_string();
    let fields = packed::unpack(&text, head).ok_or_else(|| unreadable(thread_id, &text))?;
    Ok(fields.meta(text))
}

/// A checkpoint row that does not read back: damaged in the file.
fn unreadable(thread_id: &str, id: &str) -> Fail {
    corrupt(format_args!(
        "thread `{thread_id}`, checkpoint `{id}`: its row could not be read back (the file is \
         damaged); load an earlier checkpoint by id, or delete the thread"
    ))
}

/// The newest `limit` checkpoints of (thread, ns) as (id, head), newest first. Ids of the two
/// stored kinds (UUIDs, text) are read apart, each in index order, and merged as their texts
/// order (see [`super::key`]).
pub(super) fn newest(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    limit: Option<usize>,
) -> R<Vec<(Id, Vec<u8>)>> {
    let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    let mut kinds = Vec::with_capacity(2);
    for range in ["checkpoint_id >= X''", "checkpoint_id < X''"] {
        // `LIMIT ?3 + 0`: SQLite prepares a statement with a bare `LIMIT ?` again on every run.
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT checkpoint_id, head FROM kit_checkpoints
              WHERE thread_id = ?1 AND ns = ?2 AND {range}
              ORDER BY checkpoint_id DESC LIMIT ?3 + 0"
        ))?;
        let mut rows = stmt.query(params![thread_id, ns, limit])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push((id_of(row.get_ref(0)?)?, row.get::<_, Vec<u8>>(1)?));
        }
        kinds.push(out);
    }
    let texts = kinds.pop().unwrap_or_default();
    let uuids = kinds.pop().unwrap_or_default();
    if texts.is_empty() {
        return Ok(uuids);
    }
    let mut merged: Vec<(Id, Vec<u8>)> = uuids.into_iter().chain(texts).collect();
    merged.sort_by(|a, b| b.0.cmp_id(&a.0));
    if limit >= 0 {
        merged.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    Ok(merged)
}

/// A checkpoint row: its head and the bytes of the blobs it wrote.
type Row = (Vec<u8>, Vec<u8>);

fn row_of(conn: &Connection, thread_id: &str, ns: &str, id: &str) -> R<Option<Row>> {
    Ok(conn
        .prepare_cached(
            "SELECT head, data FROM kit_checkpoints
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3",
        )?
        .query_row(params![thread_id, ns, Key::of(id)], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?)
}

pub(super) fn load_tx(
    conn: &Connection,
    names: &ChannelNames,
    thread_id: &str,
    ns: &str,
    checkpoint_id: Option<&str>,
) -> R<Option<LoadedCheckpoint>> {
    let head = match head_of(conn, thread_id, ns)? {
        Some(head) => head,
        None => {
            let known = conn
                .prepare_cached("SELECT 1 FROM kit_threads WHERE thread_id = ?1 LIMIT 1")?
                .query_row([thread_id], |_| Ok(()))
                .optional()?
                .is_some();
            return match (known, checkpoint_id) {
                (false, Some(id)) => Err(Fail::Checkpoint(CheckpointError::NotFound {
                    thread_id: thread_id.to_string(),
                    checkpoint_id: id.to_string(),
                })),
                _ => Ok(None),
            };
        }
    };
    let Some(head) = head else {
        return Ok(None);
    };
    let id = checkpoint_id.unwrap_or(&head);
    let Some(row) = row_of(conn, thread_id, ns, id)? else {
        return Err(Fail::Checkpoint(CheckpointError::NotFound {
            thread_id: thread_id.to_string(),
            checkpoint_id: id.to_string(),
        }));
    };
    let fields = packed::unpack(id, &row.0).ok_or_else(|| unreadable(thread_id, id))?;
    let meta = fields.meta(id.to_string());
    let body = fields.body.to_vec();
    let mut channel_versions = BTreeMap::new();
    let mut index_of = HashMap::new();
    for (index, version) in fields.channel_versions {
        let name = names.name(conn, index)?;
        index_of.insert(name.clone(), index);
        channel_versions.insert(name, version);
    }

    // Each blob is read from the row of the checkpoint that wrote it (a lookup by primary
    // key), else from the blobs no checkpoint owns. Rows are read once per load.
    let mut rows: HashMap<String, Option<Row>> = HashMap::new();
    rows.insert(id.to_string(), Some(row));
    let mut take = |channel: &str, version: &str| -> R<Option<ChannelBlob>> {
        if !rows.contains_key(version) {
            let row = row_of(conn, thread_id, ns, version)?;
            rows.insert(version.to_string(), row);
        }
        if let (Some(Some((head, data))), Some(&index)) = (rows.get(version), index_of.get(channel))
        {
            // Named with the checkpoint being loaded by `in_checkpoint` below.
            let blobs = packed::unpack_blobs(version, head, data).ok_or_else(|| {
                corrupt(format_args!(
                    "the row of checkpoint `{version}`, which holds a value this checkpoint \
                     reads, could not be read back (the file is damaged)"
                ))
            })?;
            if let Some(b) = blobs.into_iter().find(|b| b.channel == index) {
                return Ok(Some(ChannelBlob {
                    channel: channel.to_string(),
                    version: version.to_string(),
                    prev_version: b.prev_version,
                    kind: b.kind,
                    data: b.data.to_vec(),
                }));
            }
        }
        orphan_blob(conn, thread_id, ns, channel, version)
    };
    let mut failure = None;
    let channels = resolve_channels(&channel_versions, |channel, version| {
        take(channel, version).map_err(|fail| match fail {
            Fail::Checkpoint(e) => e,
            Fail::Sql(e) => {
                let text = e.to_string();
                failure = Some(e);
                CheckpointError::Backend(text)
            }
        })
    });
    if let Some(e) = failure {
        return Err(Fail::Sql(e));
    }
    let channels = channels.map_err(|e| Fail::Checkpoint(e.in_checkpoint(thread_id, id)))?;

    let mut pending_writes = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT task_id, channel, value FROM kit_writes
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3 ORDER BY idx",
        )?;
        let mut rows = stmt.query(params![thread_id, ns, id])?;
        while let Some(row) = rows.next()? {
            let value: String = row.get(2)?;
            pending_writes.push(PendingWrite {
                task_id: row.get(0)?,
                channel: row.get(1)?,
                value: parse_json(&value, "pending write", id)?,
            });
        }
    }
    Ok(Some(LoadedCheckpoint {
        meta,
        channel_versions,
        channels,
        body,
        pending_writes,
        head,
    }))
}

/// A blob no checkpoint row holds (see the module docs).
fn orphan_blob(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    channel: &str,
    version: &str,
) -> R<Option<ChannelBlob>> {
    let row = conn
        .prepare_cached(
            "SELECT prev_version, kind, data FROM kit_blobs
              WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4",
        )?
        .query_row(params![thread_id, ns, channel, version], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Vec<u8>>(2)?,
            ))
        })
        .optional()?;
    let Some((prev_version, kind, data)) = row else {
        return Ok(None);
    };
    let kind = BlobKind::parse(&kind).ok_or_else(|| {
        corrupt(format_args!(
            "blob {channel}@{version} has unknown kind `{kind}`"
        ))
    })?;
    Ok(Some(ChannelBlob {
        channel: channel.to_string(),
        version: version.to_string(),
        prev_version,
        kind,
        data,
    }))
}
