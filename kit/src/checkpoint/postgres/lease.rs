//! Thread leases and rollbacks in PostgreSQL: each lease operation is one transaction holding a
//! transaction-scoped advisory lock on the thread, so two processes (or machines) never decide
//! on one thread at once. Transaction-scoped locks work behind a pooler in transaction mode.
//! Expiry is judged by the database's clock, so machines whose clocks drift apart still agree
//! on when a lease ran out.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::{PostgresCheckpointer, R};
use crate::checkpoint::lease::{self, LeaseOp, LeaseRow, LeaseState, MultitaskStrategy};
use crate::checkpoint::sql::stop_request;

/// Locks the thread's lease rows until the transaction ends (a row lock cannot: an idle thread
/// has no rows to lock).
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended('kit_thread_lease:' || $1, 0))";

/// The database's clock in milliseconds since the Unix epoch.
const NOW_MS: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl PostgresCheckpointer {
    pub(super) async fn lease_inner(
        &self,
        thread_id: &str,
        run_id: &str,
        op: LeaseOp,
        ttl: Duration,
    ) -> R<LeaseState> {
        let mut client = self.client("updating a thread lease").await?;
        // READ COMMITTED whatever the server's default: each statement must see what the
        // transaction holding the lock before this one committed.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
            .start()
            .await?;
        tx.execute(LOCK, &[&thread_id]).await?;
        let now_ms: i64 = tx.query_one(NOW_MS, &[]).await?.try_get(0)?;
        let before = lease_rows(&tx, thread_id).await?;
        let head: Option<String> = tx
            .query_opt(
                "SELECT head FROM kit_threads WHERE thread_id = $1 AND ns = ''",
                &[&thread_id],
            )
            .await?
            .map(|row| row.try_get::<_, Option<String>>(0))
            .transpose()?
            .flatten();
        let mut rows = before.clone();
        let state = lease::decide(&mut rows, run_id, op, now_ms, ttl, || {
            lease::marker_after(head.as_deref())
        });
        if let LeaseState::Running {
            rollback_from: Some(marker),
        } = &state
        {
            rollback_in(&tx, thread_id, marker).await?;
        }
        let (deleted, upserts) = lease::changes(&before, &rows);
        for run_id in deleted {
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM kit_thread_leases WHERE thread_id = $1 AND run_id = $2",
                )
                .await?;
            tx.execute(&stmt, &[&thread_id, &run_id]).await?;
        }
        for row in upserts {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO kit_thread_leases
                        (thread_id, run_id, ticket, running, expires_ms, stop, marker,
                         rollback_from)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT (thread_id, run_id) DO UPDATE SET
                        ticket = excluded.ticket, running = excluded.running,
                        expires_ms = excluded.expires_ms, stop = excluded.stop,
                        marker = excluded.marker, rollback_from = excluded.rollback_from",
                )
                .await?;
            tx.execute(
                &stmt,
                &[
                    &thread_id,
                    &row.run_id,
                    &row.ticket,
                    &row.running,
                    &row.expires_ms,
                    &row.stop.map(MultitaskStrategy::as_str),
                    &row.marker,
                    &row.rollback_from,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(state)
    }

    /// The thread's lease rows, with the database's clock.
    pub(super) async fn activity_inner(&self, thread_id: &str) -> R<(Vec<LeaseRow>, i64)> {
        let client = self.client("reading a thread lease").await?;
        let rows = lease_rows(&client, thread_id).await?;
        let now_ms: i64 = client.query_one(NOW_MS, &[]).await?.try_get(0)?;
        Ok((rows, now_ms))
    }

    pub(super) async fn rollback_inner(&self, thread_id: &str, marker: &str) -> R<u64> {
        let mut client = self.client("rolling back a run").await?;
        let tx = client.transaction().await?;
        let deleted = rollback_in(&tx, thread_id, marker).await?;
        tx.commit().await?;
        Ok(deleted)
    }
}

/// Deletes what a thread got after `marker` and moves each namespace's head back, inside `tx`.
async fn rollback_in(
    tx: &deadpool_postgres::Transaction<'_>,
    thread_id: &str,
    marker: &str,
) -> R<u64> {
    let deleted = tx
        .execute(
            "DELETE FROM kit_checkpoints WHERE thread_id = $1 AND checkpoint_id > $2",
            &[&thread_id, &marker],
        )
        .await?;
    tx.execute(
        "DELETE FROM kit_blobs WHERE thread_id = $1 AND version > $2",
        &[&thread_id, &marker],
    )
    .await?;
    tx.execute(
        "DELETE FROM kit_writes WHERE thread_id = $1 AND checkpoint_id > $2",
        &[&thread_id, &marker],
    )
    .await?;
    tx.execute(
        "UPDATE kit_threads t SET
            head = (SELECT MAX(c.checkpoint_id) FROM kit_checkpoints c
                     WHERE c.thread_id = t.thread_id AND c.ns = t.ns),
            checkpoints = (SELECT COUNT(*) FROM kit_checkpoints c
                     WHERE c.thread_id = t.thread_id AND c.ns = t.ns)
          WHERE t.thread_id = $1",
        &[&thread_id],
    )
    .await?;
    tx.execute(
        "DELETE FROM kit_threads WHERE thread_id = $1 AND checkpoints = 0",
        &[&thread_id],
    )
    .await?;
    Ok(deleted)
}

async fn lease_rows(client: &impl GenericClient, thread_id: &str) -> R<Vec<LeaseRow>> {
    let stmt = client
        .prepare_cached(
            "SELECT run_id, ticket, running, expires_ms, stop, marker, rollback_from
               FROM kit_thread_leases WHERE thread_id = $1 ORDER BY ticket",
        )
        .await?;
    let mut out = Vec::new();
    for row in client.query(&stmt, &[&thread_id]).await? {
        let stop = stop_request(thread_id, row.try_get(4)?)?;
        out.push(LeaseRow {
            run_id: row.try_get(0)?,
            ticket: row.try_get(1)?,
            running: row.try_get(2)?,
            expires_ms: row.try_get(3)?,
            stop,
            marker: row.try_get(5)?,
            rollback_from: row.try_get(6)?,
        });
    }
    Ok(out)
}
