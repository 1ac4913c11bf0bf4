//! The SQL of each operation: one statement per checkpoint write, and the reads.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::Row;

use super::{Fail, PostgresCheckpointer, R};
use crate::checkpoint::sql::{corrupt, parse_json, to_text};
use crate::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    LoadedCheckpoint, PendingWrite, ThreadInfo, resolve_channels,
};

/// Writes a checkpoint in one statement (so one round trip, atomic without a transaction):
/// `moved` advances the thread's head only from the expected one and returns a row if it did;
/// the checkpoint and its blobs are inserted from `moved`, so nothing is written on a
/// conflict, and an id the thread already has fails the statement (a unique violation on
/// `kit_checkpoints`): a stored checkpoint is never replaced. Parameters: $1 thread, $2 ns, $3 checkpoint id, $4 created_at, $5 expected head,
/// $6 parent, $7 step, $8 source, $9 next, $10 metadata, $11 channel versions, $12 body, and
/// the blobs as arrays: $13 channels, $14 versions, $15 previous versions, $16 kinds, $17 data.
macro_rules! put_statement {
    ($moved:literal) => {
        concat!(
            "WITH moved AS (",
            $moved,
            "), checkpoint AS (
                INSERT INTO kit_checkpoints
                    (thread_id, ns, checkpoint_id, parent_id, step, source, created_at,
                     next, metadata, channel_versions, body)
                SELECT $1, $2, $3, $6, $7, $8, $4,
                       $9::text::jsonb, $10::text::jsonb, $11::text::jsonb, $12
                  FROM moved
            ), blobs AS (
                INSERT INTO kit_blobs
                    (thread_id, ns, channel, version, prev_version, kind, data)
                SELECT $1, $2, b.channel, b.version, b.prev_version, b.kind, b.data
                  FROM moved,
                       unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::bytea[])
                       AS b(channel, version, prev_version, kind, data)
                ON CONFLICT (thread_id, ns, channel, version) DO UPDATE SET
                    prev_version = excluded.prev_version, kind = excluded.kind,
                    data = excluded.data
            )
            SELECT count(*) FROM moved"
        )
    };
}

/// The first checkpoint of a thread: the thread row may not exist yet, or exist with no head
/// (pending writes came first).
pub(super) const PUT_FIRST: &str = put_statement!(
    "INSERT INTO kit_threads AS t (thread_id, ns, head, updated_at, checkpoints)
     VALUES ($1, $2, $3, $4, 1)
     ON CONFLICT (thread_id, ns) DO UPDATE
        SET head = excluded.head, updated_at = excluded.updated_at,
            checkpoints = t.checkpoints + 1
      WHERE t.head IS NOT DISTINCT FROM $5::text
     RETURNING 1"
);

/// A later checkpoint: the head must still be the one this writer read.
pub(super) const PUT_NEXT: &str = put_statement!(
    "UPDATE kit_threads SET head = $3, updated_at = $4, checkpoints = checkpoints + 1
      WHERE thread_id = $1 AND ns = $2 AND head = $5::text
     RETURNING 1"
);

pub(super) const META_COLUMNS: &str =
    "checkpoint_id, parent_id, step, source, created_at, next::text, metadata::text";

pub(super) fn meta_from_row(row: &Row) -> R<CheckpointMeta> {
    let id: String = row.try_get(0)?;
    let source: String = row.try_get(3)?;
    let next: String = row.try_get(5)?;
    let metadata: String = row.try_get(6)?;
    Ok(CheckpointMeta {
        parent_id: row.try_get(1)?,
        step: row.try_get(2)?,
        source: CheckpointSource::parse(&source)
            .ok_or_else(|| corrupt(format_args!("checkpoint {id}: unknown source `{source}`")))?,
        created_at: row.try_get(4)?,
        next: parse_json(&next, "next nodes", &id)?,
        metadata: parse_json(&metadata, "metadata", &id)?,
        id,
    })
}

pub(super) async fn head_of(
    client: &impl deadpool_postgres::GenericClient,
    thread_id: &str,
    ns: &str,
) -> R<Option<Option<String>>> {
    let stmt = client
        .prepare_cached("SELECT head FROM kit_threads WHERE thread_id = $1 AND ns = $2")
        .await?;
    Ok(match client.query_opt(&stmt, &[&thread_id, &ns]).await? {
        Some(row) => Some(row.try_get(0)?),
        None => None,
    })
}

/// A put whose checkpoint id the thread already has, as the typed error; other failures as
/// they are.
fn duplicate_id(e: tokio_postgres::Error, w: &CheckpointWrite) -> Fail {
    let duplicate = e.as_db_error().is_some_and(|db| {
        *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.table() == Some("kit_checkpoints")
    });
    if !duplicate {
        return Fail::Sql(e);
    }
    Fail::Checkpoint(CheckpointError::DuplicateId {
        thread_id: w.thread_id.clone(),
        ns: w.ns.clone(),
        checkpoint_id: w.meta.id.clone(),
    })
}

impl PostgresCheckpointer {
    /// One statement, so one round trip: move the head (only from the expected one), and
    /// write the checkpoint and its blobs only if it moved.
    pub(super) async fn put_inner(&self, w: &CheckpointWrite) -> R<()> {
        let client = self.client("writing a checkpoint").await?;
        let sql = match w.expected_head {
            None => PUT_FIRST,
            Some(_) => PUT_NEXT,
        };
        let next = to_text(&w.meta.next)?;
        let metadata = match &w.meta.metadata {
            serde_json::Value::Null => "{}".to_string(),
            other => to_text(other)?,
        };
        let versions = to_text(&*w.channel_versions)?;
        let channels: Vec<&str> = w.blobs.iter().map(|b| b.channel.as_str()).collect();
        let blob_versions: Vec<&str> = w.blobs.iter().map(|b| b.version.as_str()).collect();
        let prevs: Vec<Option<&str>> = w.blobs.iter().map(|b| b.prev_version.as_deref()).collect();
        let kinds: Vec<&str> = w.blobs.iter().map(|b| b.kind.as_str()).collect();
        let data: Vec<&[u8]> = w.blobs.iter().map(|b| b.data.as_slice()).collect();
        let stmt = client.prepare_cached(sql).await?;
        let moved: i64 = client
            .query_one(
                &stmt,
                &[
                    &w.thread_id,
                    &w.ns,
                    &w.meta.id,
                    &w.meta.created_at,
                    &w.expected_head,
                    &w.meta.parent_id,
                    &w.meta.step,
                    &w.meta.source.as_str(),
                    &next,
                    &metadata,
                    &versions,
                    &w.body,
                    &channels,
                    &blob_versions,
                    &prevs,
                    &kinds,
                    &data,
                ],
            )
            .await
            .map_err(|e| duplicate_id(e, w))?
            .try_get(0)?;
        if moved == 0 {
            let found = head_of(&client, &w.thread_id, &w.ns).await?.flatten();
            return Err(Fail::Checkpoint(CheckpointError::Conflict {
                thread_id: w.thread_id.clone(),
                expected: w.expected_head.clone(),
                found,
            }));
        }
        Ok(())
    }

    pub(super) async fn put_writes_inner(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: &[PendingWrite],
    ) -> R<()> {
        let mut client = self.client("writing pending writes").await?;
        let tx = client.transaction().await?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO kit_threads (thread_id, ns, head, updated_at, checkpoints)
                 VALUES ($1, $2, NULL, NULL, 0) ON CONFLICT (thread_id, ns) DO NOTHING",
            )
            .await?;
        tx.execute(&stmt, &[&thread_id, &ns]).await?;
        // The next position is read once per batch: read per write, it scanned the
        // checkpoint's writes each time (`idx` is not indexed), quadratic in a step of many
        // tasks. A write that replaces one keeps its place, so positions may skip.
        let next = tx
            .prepare_cached(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM kit_writes
                  WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3",
            )
            .await?;
        let next: i32 = tx
            .query_one(&next, &[&thread_id, &ns, &checkpoint_id])
            .await?
            .try_get(0)?;
        let upsert = tx
            .prepare_cached(
                "INSERT INTO kit_writes
                    (thread_id, ns, checkpoint_id, task_id, channel, idx, value)
                 VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb)
                 ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel)
                 DO UPDATE SET value = excluded.value",
            )
            .await?;
        for (i, w) in writes.iter().enumerate() {
            let idx = i32::try_from(i)
                .ok()
                .and_then(|i| next.checked_add(i))
                .ok_or_else(|| {
                    CheckpointError::Backend(format!(
                        "checkpoint `{checkpoint_id}` has more pending writes than an INTEGER \
                         position holds; finish or delete the thread"
                    ))
                })?;
            let value = to_text(&w.value)?;
            tx.execute(
                &upsert,
                &[
                    &thread_id,
                    &ns,
                    &checkpoint_id,
                    &w.task_id,
                    &w.channel,
                    &idx,
                    &value,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn load_inner(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> R<Option<LoadedCheckpoint>> {
        let mut client = self.client("loading a checkpoint").await?;
        // A consistent snapshot of the thread.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let head = match head_of(&tx, thread_id, ns).await? {
            Some(head) => head,
            None => {
                let stmt = tx
                    .prepare_cached("SELECT 1 FROM kit_threads WHERE thread_id = $1 LIMIT 1")
                    .await?;
                let known = tx.query_opt(&stmt, &[&thread_id]).await?.is_some();
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
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS}, channel_versions::text, body FROM kit_checkpoints
                  WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3"
            ))
            .await?;
        let Some(row) = tx.query_opt(&stmt, &[&thread_id, &ns, &id]).await? else {
            return Err(Fail::Checkpoint(CheckpointError::NotFound {
                thread_id: thread_id.to_string(),
                checkpoint_id: id.to_string(),
            }));
        };
        let meta = meta_from_row(&row)?;
        let channel_versions: BTreeMap<String, String> =
            parse_json(&row.try_get::<_, String>(7)?, "channel versions", id)?;
        let body: Vec<u8> = row.try_get(8)?;

        // Walk every channel's chain back to its full value in one recursive query (UNION
        // ends a chain that loops after one lap; resolve_channels reports it).
        let names: Vec<&str> = channel_versions.keys().map(String::as_str).collect();
        let versions: Vec<&str> = channel_versions.values().map(String::as_str).collect();
        let stmt = tx
            .prepare_cached(
                "WITH RECURSIVE chain(channel, version, prev_version, kind) AS (
                    SELECT b.channel, b.version, b.prev_version, b.kind
                      FROM unnest($3::text[], $4::text[]) AS cv(channel, version)
                      JOIN kit_blobs AS b
                        ON b.thread_id = $1 AND b.ns = $2 AND b.channel = cv.channel
                       AND b.version = cv.version
                    UNION
                    SELECT b.channel, b.version, b.prev_version, b.kind
                      FROM chain AS c
                      JOIN kit_blobs AS b
                        ON b.thread_id = $1 AND b.ns = $2 AND b.channel = c.channel
                       AND b.version = c.prev_version
                     WHERE c.kind = 'delta'
                 )
                 SELECT c.channel, c.version, c.prev_version, c.kind, b.data
                   FROM chain AS c
                   JOIN kit_blobs AS b
                     ON b.thread_id = $1 AND b.ns = $2 AND b.channel = c.channel
                    AND b.version = c.version",
            )
            .await?;
        let rows = tx
            .query(&stmt, &[&thread_id, &ns, &names, &versions])
            .await?;
        let mut blobs: HashMap<(String, String), ChannelBlob> = HashMap::with_capacity(rows.len());
        for row in rows {
            let kind: String = row.try_get(3)?;
            let blob = ChannelBlob {
                channel: row.try_get(0)?,
                version: row.try_get(1)?,
                prev_version: row.try_get(2)?,
                kind: BlobKind::parse(&kind).ok_or_else(|| {
                    corrupt(format_args!("checkpoint {id}: unknown blob kind `{kind}`"))
                })?,
                data: row.try_get(4)?,
            };
            blobs.insert((blob.channel.clone(), blob.version.clone()), blob);
        }
        let channels = resolve_channels(&channel_versions, |channel, version| {
            Ok(blobs.remove(&(channel.to_string(), version.to_string())))
        })
        .map_err(|e| e.in_checkpoint(thread_id, id))?;

        let stmt = tx
            .prepare_cached(
                "SELECT task_id, channel, value::text FROM kit_writes
                  WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3
                  ORDER BY idx, task_id, channel",
            )
            .await?;
        let mut pending_writes = Vec::new();
        for row in tx.query(&stmt, &[&thread_id, &ns, &id]).await? {
            pending_writes.push(PendingWrite {
                task_id: row.try_get(0)?,
                channel: row.try_get(1)?,
                value: parse_json(&row.try_get::<_, String>(2)?, "pending write", id)?,
            });
        }
        tx.commit().await?;
        Ok(Some(LoadedCheckpoint {
            meta,
            channel_versions,
            channels,
            body,
            pending_writes,
            head,
        }))
    }

    pub(super) async fn history_inner(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> R<Vec<CheckpointMeta>> {
        let client = self.client("reading the history").await?;
        let limit: Option<i64> = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS} FROM kit_checkpoints
                  WHERE thread_id = $1 AND ns = $2 ORDER BY checkpoint_id DESC LIMIT $3"
            ))
            .await?;
        client
            .query(&stmt, &[&thread_id, &ns, &limit])
            .await?
            .iter()
            .map(meta_from_row)
            .collect()
    }

    pub(super) async fn delete_inner(&self, thread_id: &str) -> R<()> {
        let mut client = self.client("deleting a thread").await?;
        let tx = client.transaction().await?;
        for table in [
            "kit_blobs",
            "kit_writes",
            "kit_checkpoints",
            "kit_threads",
            "kit_thread_leases",
        ] {
            let stmt = tx
                .prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = $1"))
                .await?;
            tx.execute(&stmt, &[&thread_id]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn threads_inner(&self) -> R<Vec<ThreadInfo>> {
        let client = self.client("listing threads").await?;
        let stmt = client
            .prepare_cached(
                "SELECT thread_id, MAX(updated_at) AS updated,
                        SUM(CASE WHEN ns = '' THEN checkpoints ELSE 0 END)::BIGINT AS n
                   FROM kit_threads GROUP BY thread_id
                 HAVING SUM(CASE WHEN ns = '' THEN checkpoints ELSE 0 END) > 0
                  ORDER BY updated DESC, thread_id",
            )
            .await?;
        let mut out = Vec::new();
        for row in client.query(&stmt, &[]).await? {
            out.push(ThreadInfo {
                thread_id: row.try_get(0)?,
                updated_at: row.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                checkpoints: u64::try_from(row.try_get::<_, i64>(2)?).unwrap_or(0),
            });
        }
        Ok(out)
    }
}
