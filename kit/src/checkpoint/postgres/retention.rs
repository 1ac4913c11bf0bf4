//! Pruning a thread and deleting idle threads, each in one transaction that locks the threads'
//! rows, so a writer on the same thread waits for it (and then conflicts if its thread is gone).

use std::collections::HashMap;

use deadpool_postgres::Transaction;

use super::{Fail, PostgresCheckpointer, R};
use crate::checkpoint::retention::{BlobRow, CheckpointRow, plan};
use crate::checkpoint::{PruneReport, PruneStrategy};

/// A deleted thread's rows, its lease rows included (a run still holding it stops at its next
/// renewal).
const TABLES: [&str; 5] = [
    "kit_blobs",
    "kit_writes",
    "kit_checkpoints",
    "kit_threads",
    "kit_thread_leases",
];

impl PostgresCheckpointer {
    pub(super) async fn prune_inner(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> R<PruneReport> {
        let mut client = self.client("pruning a thread").await?;
        let tx = client.transaction().await?;
        // Locks the thread's rows: a checkpoint write on it waits until the prune commits.
        let stmt = tx
            .prepare_cached(
                "SELECT ns, head FROM kit_threads WHERE thread_id = $1 ORDER BY ns FOR UPDATE",
            )
            .await?;
        let mut namespaces = Vec::new();
        for row in tx.query(&stmt, &[&thread_id]).await? {
            namespaces.push((
                row.try_get::<_, String>(0)?,
                row.try_get::<_, Option<String>>(1)?,
            ));
        }
        let mut report = PruneReport::default();
        for (ns, head) in &namespaces {
            report.add(prune_ns(&tx, thread_id, ns, head.as_deref(), strategy).await?);
        }
        tx.commit().await?;
        Ok(report)
    }

    pub(super) async fn delete_before_inner(&self, cutoff: &str) -> R<Vec<String>> {
        let mut client = self.client("deleting idle threads").await?;
        let tx = client.transaction().await?;
        let stmt = tx
            .prepare_cached(
                "SELECT thread_id FROM kit_threads GROUP BY thread_id
                 HAVING COALESCE(MAX(updated_at), '') < $1",
            )
            .await?;
        let candidates: Vec<String> = tx
            .query(&stmt, &[&cutoff])
            .await?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()?;
        if candidates.is_empty() {
            return Ok(candidates);
        }
        // Lock the candidates' rows and judge them again: a writer may have moved one on since.
        let stmt = tx
            .prepare_cached(
                "SELECT thread_id, COALESCE(updated_at, '') FROM kit_threads
                  WHERE thread_id = ANY($1) ORDER BY thread_id, ns FOR UPDATE",
            )
            .await?;
        let mut newest: HashMap<String, String> = HashMap::new();
        for row in tx.query(&stmt, &[&candidates]).await? {
            let (thread, updated): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            let slot = newest.entry(thread).or_default();
            if updated > *slot {
                *slot = updated;
            }
        }
        let mut idle: Vec<String> = newest
            .into_iter()
            .filter(|(_, updated)| updated.as_str() < cutoff)
            .map(|(thread, _)| thread)
            .collect();
        idle.sort();
        for table in TABLES {
            let stmt = tx
                .prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = ANY($1)"))
                .await?;
            tx.execute(&stmt, &[&idle]).await?;
        }
        tx.commit().await?;
        Ok(idle)
    }
}

async fn prune_ns(
    tx: &Transaction<'_>,
    thread_id: &str,
    ns: &str,
    head: Option<&str>,
    strategy: PruneStrategy,
) -> R<PruneReport> {
    // Links only: no channel data or bodies are read.
    let stmt = tx
        .prepare_cached(
            "SELECT checkpoint_id, parent_id, channel_versions::text FROM kit_checkpoints
              WHERE thread_id = $1 AND ns = $2",
        )
        .await?;
    let mut checkpoints: Vec<CheckpointRow> = Vec::new();
    for row in tx.query(&stmt, &[&thread_id, &ns]).await? {
        checkpoints.push((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
    }
    let stmt = tx
        .prepare_cached(
            "SELECT channel, version, prev_version, kind FROM kit_blobs
              WHERE thread_id = $1 AND ns = $2",
        )
        .await?;
    let mut blobs: Vec<BlobRow> = Vec::new();
    for row in tx.query(&stmt, &[&thread_id, &ns]).await? {
        blobs.push((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ));
    }

    let plan = plan(thread_id, head, &checkpoints, &blobs, strategy).map_err(Fail::Checkpoint)?;
    let (channels, versions): (Vec<&str>, Vec<&str>) = plan.blobs.iter().copied().unzip();
    let mut report = PruneReport::default();
    let stmt = tx
        .prepare_cached(
            "DELETE FROM kit_checkpoints
              WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = ANY($3)",
        )
        .await?;
    report.checkpoints = tx
        .execute(&stmt, &[&thread_id, &ns, &plan.checkpoints])
        .await?;
    let stmt = tx
        .prepare_cached(
            "DELETE FROM kit_writes WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = ANY($3)",
        )
        .await?;
    report.writes = tx
        .execute(&stmt, &[&thread_id, &ns, &plan.checkpoints])
        .await?;
    let stmt = tx
        .prepare_cached(
            "DELETE FROM kit_blobs AS b
              USING unnest($3::text[], $4::text[]) AS gone(channel, version)
              WHERE b.thread_id = $1 AND b.ns = $2
                AND b.channel = gone.channel AND b.version = gone.version",
        )
        .await?;
    report.blobs = tx
        .execute(&stmt, &[&thread_id, &ns, &channels, &versions])
        .await?;
    let stmt = tx
        .prepare_cached("UPDATE kit_threads SET checkpoints = $3 WHERE thread_id = $1 AND ns = $2")
        .await?;
    let kept_count = plan.kept as i64;
    tx.execute(&stmt, &[&thread_id, &ns, &kept_count]).await?;
    Ok(report)
}
