//! The SQL of each operation, inside one transaction.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::{Fail, R};
use crate::checkpoint::sql::{corrupt, parse_json, to_text};
use crate::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    LoadedCheckpoint, PendingWrite, resolve_channels,
};

pub(super) fn head_of(conn: &Connection, thread_id: &str, ns: &str) -> R<Option<Option<String>>> {
    Ok(conn
        .prepare_cached("SELECT head FROM kit_threads WHERE thread_id = ?1 AND ns = ?2")?
        .query_row(params![thread_id, ns], |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?)
}

pub(super) fn put_tx(tx: &rusqlite::Transaction<'_>, w: &CheckpointWrite) -> R<()> {
    let found = head_of(tx, &w.thread_id, &w.ns)?.flatten();
    if found != w.expected_head {
        return Err(Fail::Checkpoint(CheckpointError::Conflict {
            thread_id: w.thread_id.clone(),
            expected: w.expected_head.clone(),
            found,
        }));
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT OR REPLACE INTO kit_blobs
                (thread_id, ns, channel, version, prev_version, kind, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for b in &w.blobs {
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
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO kit_checkpoints
            (thread_id, ns, checkpoint_id, parent_id, step, source, created_at, next, metadata,
             channel_versions, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        w.thread_id,
        w.ns,
        w.meta.id,
        w.meta.parent_id,
        w.meta.step,
        w.meta.source.as_str(),
        w.meta.created_at,
        to_text(&w.meta.next)?,
        to_text(&metadata(&w.meta.metadata))?,
        to_text(&w.channel_versions)?,
        w.body,
    ])?;
    tx.prepare_cached(
        "INSERT INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
         VALUES (?1, ?2, ?3, ?4, 1)
         ON CONFLICT (thread_id, ns) DO UPDATE SET
            head = excluded.head, updated_at = excluded.updated_at,
            checkpoints = checkpoints + 1",
    )?
    .execute(params![w.thread_id, w.ns, w.meta.id, w.meta.created_at])?;
    Ok(())
}

/// Metadata as stored: `null` becomes `{}` (as the memory back-end returns it).
pub(super) fn metadata(value: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    match value {
        serde_json::Value::Null => {
            std::borrow::Cow::Owned(serde_json::Value::Object(Default::default()))
        }
        other => std::borrow::Cow::Borrowed(other),
    }
}

pub(super) struct WritesArgs {
    pub(super) thread_id: String,
    pub(super) ns: String,
    pub(super) checkpoint_id: String,
    pub(super) writes: Vec<PendingWrite>,
}

pub(super) fn put_writes_tx(tx: &rusqlite::Transaction<'_>, a: &WritesArgs) -> R<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
         VALUES (?1, ?2, NULL, NULL, 0)",
    )?
    .execute(params![a.thread_id, a.ns])?;
    let mut upsert = tx.prepare_cached(
        "INSERT INTO kit_writes (thread_id, ns, checkpoint_id, task_id, channel, idx, value)
         VALUES (?1, ?2, ?3, ?4, ?5,
                 (SELECT COALESCE(MAX(idx) + 1, 0) FROM kit_writes
                   WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3),
                 ?6)
         ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel)
         DO UPDATE SET value = excluded.value",
    )?;
    for w in &a.writes {
        let value = to_text(&w.value)?;
        upsert.execute(params![
            a.thread_id,
            a.ns,
            a.checkpoint_id,
            w.task_id,
            w.channel,
            value
        ])?;
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // the argument type is fixed by `write`
pub(super) fn delete_tx(tx: &rusqlite::Transaction<'_>, thread_id: &String) -> R<()> {
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

pub(super) fn meta_from_row(row: &rusqlite::Row<'_>) -> R<CheckpointMeta> {
    let id: String = row.get(0)?;
    let source: String = row.get(3)?;
    let next: String = row.get(5)?;
    let metadata: String = row.get(6)?;
    Ok(CheckpointMeta {
        parent_id: row.get(1)?,
        step: row.get(2)?,
        source: CheckpointSource::parse(&source)
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: unknown source `{source}`")))?,
        created_at: row.get(4)?,
        next: parse_json(&next, "next nodes", &id)?,
        metadata: parse_json(&metadata, "metadata", &id)?,
        id,
    })
}

pub(super) const META_COLUMNS: &str =
    "checkpoint_id, parent_id, step, source, created_at, next, metadata";

pub(super) fn load_tx(
    conn: &Connection,
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
    let row = conn
        .prepare_cached(&format!(
            "SELECT {META_COLUMNS}, channel_versions, body FROM kit_checkpoints
              WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3"
        ))?
        .query_row(params![thread_id, ns, id], |row| {
            Ok((
                meta_from_row(row),
                row.get::<_, String>(7)?,
                row.get::<_, Vec<u8>>(8)?,
            ))
        })
        .optional()?;
    let Some((meta, versions_text, body)) = row else {
        return Err(Fail::Checkpoint(CheckpointError::NotFound {
            thread_id: thread_id.to_string(),
            checkpoint_id: id.to_string(),
        }));
    };
    let meta = meta?;
    let channel_versions = parse_json(&versions_text, "channel versions", id)?;

    // Walk every channel's chain back to its full value in one recursive query. UNION (not
    // UNION ALL) drops a row already seen, so a chain that loops in a damaged file ends after
    // one lap instead of growing until memory runs out; resolve_channels then reports it.
    let mut blobs: HashMap<(String, String), ChannelBlob> = HashMap::new();
    {
        let mut stmt = conn.prepare_cached(
            "WITH RECURSIVE chain(channel, version, prev_version, kind) AS (
                SELECT b.channel, b.version, b.prev_version, b.kind
                  FROM json_each(?3) AS cv
                  JOIN kit_blobs AS b
                    ON b.thread_id = ?1 AND b.ns = ?2 AND b.channel = cv.key
                   AND b.version = cv.value
                UNION
                SELECT b.channel, b.version, b.prev_version, b.kind
                  FROM chain AS c
                  JOIN kit_blobs AS b
                    ON b.thread_id = ?1 AND b.ns = ?2 AND b.channel = c.channel
                   AND b.version = c.prev_version
                 WHERE c.kind = 'delta'
             )
             SELECT c.channel, c.version, c.prev_version, c.kind, b.data
               FROM chain AS c
               JOIN kit_blobs AS b
                 ON b.thread_id = ?1 AND b.ns = ?2 AND b.channel = c.channel
                AND b.version = c.version",
        )?;
        let mut rows = stmt.query(params![thread_id, ns, versions_text])?;
        while let Some(row) = rows.next()? {
            let kind: String = row.get(3)?;
            let blob = ChannelBlob {
                channel: row.get(0)?,
                version: row.get(1)?,
                prev_version: row.get(2)?,
                kind: BlobKind::parse(&kind).ok_or_else(|| {
                    corrupt(format_args!("checkpoint {id}: unknown blob kind `{kind}`"))
                })?,
                data: row.get(4)?,
            };
            blobs.insert((blob.channel.clone(), blob.version.clone()), blob);
        }
    }
    let channels = resolve_channels(&channel_versions, |channel, version| {
        Ok(blobs.remove(&(channel.to_string(), version.to_string())))
    })
    .map_err(|e| e.in_checkpoint(thread_id, id))?;

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
