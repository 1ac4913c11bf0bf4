//! The thread event log in PostgreSQL: a row per batch of an append (events numbered from the
//! thread's counter, laid out as [`batch`](crate::server::store::batch) says; the row lock on
//! the thread orders concurrent appends), reads from a cursor, pruning by age, and the
//! `LISTEN` connection that turns every process's appends into wake-ups.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio::sync::broadcast;
use tokio_postgres::NoTls;

use super::{ms, prepared, sql_error, unms};
use crate::server::store::batch::{self, Batch, encode_old_row};
use crate::server::store::{NOTIFY_CHANNEL, NewEvent, StoreError, StoredEvent};

/// A NOTIFY payload must stay under 8000 bytes: longer thread ids are announced as an empty
/// payload, which wakes every follower (each re-reads its own thread).
const MAX_PAYLOAD: usize = 4000;

/// Rows of the older layout moved per statement.
const MOVE_CHUNK: i64 = 1000;

/// A store made by an older kit kept a row per event in `kit_worker_events`: each becomes a
/// batch of one, inside the caller's transaction (which holds the migration lock, so workers
/// starting together move the rows once), and the old table is dropped.
pub(super) async fn migrate(tx: &impl GenericClient) -> Result<(), StoreError> {
    let op = "moving the event log of an older store to one row per batch";
    let old: bool = tx
        .query_one("SELECT to_regclass('kit_worker_events') IS NOT NULL", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| sql_error(op, e))?;
    if !old {
        return Ok(());
    }
    let mut after: Option<(String, i64)> = None;
    loop {
        // Keyset pages in primary-key order: memory stays bounded whatever the log's size.
        let select = "SELECT thread_id, seq, run_id, method, namespace, data, created_at
                      FROM kit_worker_events";
        let rows = match &after {
            None => {
                tx.query(
                    &format!("{select} ORDER BY thread_id, seq LIMIT $1"),
                    &[&MOVE_CHUNK],
                )
                .await
            }
            Some((thread, seq)) => {
                tx.query(
                    &format!(
                        "{select} WHERE (thread_id, seq) > ($1, $2) \
                         ORDER BY thread_id, seq LIMIT $3"
                    ),
                    &[thread, seq, &MOVE_CHUNK],
                )
                .await
            }
        }
        .map_err(|e| sql_error(op, e))?;
        let Some(last) = rows.last() else { break };
        after = Some((
            last.try_get(0).map_err(|e| sql_error(op, e))?,
            last.try_get(1).map_err(|e| sql_error(op, e))?,
        ));
        let mut threads = Vec::with_capacity(rows.len());
        let mut seqs = Vec::with_capacity(rows.len());
        let mut runs = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        let mut times = Vec::with_capacity(rows.len());
        for row in &rows {
            let get = |e| sql_error(op, e);
            threads.push(row.try_get::<_, String>(0).map_err(get)?);
            seqs.push(row.try_get::<_, i64>(1).map_err(get)?);
            runs.push(row.try_get::<_, String>(2).map_err(get)?);
            let namespace: String = row.try_get(4).map_err(get)?;
            texts.push(encode_old_row(
                row.try_get(3).map_err(get)?,
                &namespace,
                row.try_get(5).map_err(get)?,
            ));
            times.push(row.try_get::<_, i64>(6).map_err(get)?);
        }
        tx.execute(
            "INSERT INTO kit_worker_event_batches
                (thread_id, last_seq, first_seq, run_id, events, created_at)
             SELECT t, s, s, r, e, c
             FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[])
                AS u(t, s, r, e, c)
             ON CONFLICT DO NOTHING",
            &[&threads, &seqs, &runs, &texts, &times],
        )
        .await
        .map_err(|e| sql_error(op, e))?;
    }
    tx.batch_execute("DROP TABLE kit_worker_events")
        .await
        .map_err(|e| sql_error(op, e))
}

/// Appends `events` inside the caller's transaction, as one batch, and announces the thread
/// (delivered when the transaction commits); returns the number of the last event.
pub(super) async fn append(
    tx: &impl GenericClient,
    thread_id: &str,
    run_id: &str,
    events: &[NewEvent],
    now: u64,
) -> Result<u64, StoreError> {
    let op = "appending events";
    // Encoded before the thread's row is locked, which holds back its other appends.
    let batch = batch::encode(events);
    if batch.count == 0 {
        return Ok(0);
    }
    let count = i64::try_from(batch.count).unwrap_or(i64::MAX);
    let row = tx
        .query_opt(
            &prepared(
                tx,
                "UPDATE kit_worker_threads SET event_seq = event_seq + $2
             WHERE thread_id = $1 RETURNING event_seq",
            )
            .await?,
            &[&thread_id, &count],
        )
        .await
        .map_err(|e| sql_error(op, e))?
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "events were appended to thread `{thread_id}`, which has no row"
            ))
        })?;
    let last: i64 = row
        .try_get(0)
        .map_err(|e| StoreError::Corrupt(format!("a thread row: {e}")))?;
    let insert = prepared(
        tx,
        "INSERT INTO kit_worker_event_batches
            (thread_id, last_seq, first_seq, run_id, events, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .await?;
    for (first, batch_last, events) in batch.numbered(last) {
        tx.execute(
            &insert,
            &[&thread_id, &batch_last, &first, &run_id, &events, &ms(now)],
        )
        .await
        .map_err(|e| sql_error(op, e))?;
    }
    let payload = if thread_id.len() <= MAX_PAYLOAD {
        thread_id
    } else {
        ""
    };
    tx.execute(
        &prepared(tx, "SELECT pg_notify($1, $2)").await?,
        &[&NOTIFY_CHANNEL, &payload],
    )
    .await
    .map_err(|e| sql_error(op, e))?;
    Ok(unms(last))
}

/// Up to `limit` events of `thread_id` numbered above `after`. Only the batches those events
/// need are fetched (every batch holds at least one event above `after`, so `limit` batches
/// are enough) and parsed.
pub(super) async fn read(
    client: &impl GenericClient,
    thread_id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let rows = client
        .query(
            &prepared(
                client,
                "SELECT first_seq, last_seq, run_id, events, created_at
             FROM kit_worker_event_batches
             WHERE thread_id = $1 AND last_seq > $2 ORDER BY last_seq LIMIT $3",
            )
            .await?,
            &[
                &thread_id,
                &ms(after),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await
        .map_err(|e| sql_error("reading events", e))?;
    let corrupt =
        |e: tokio_postgres::Error| StoreError::Corrupt(format!("an event batch row: {e}"));
    let mut batches = Vec::new();
    let mut events: usize = 0;
    for row in &rows {
        if events >= limit {
            break;
        }
        let batch = Batch {
            first: row.try_get(0).map_err(corrupt)?,
            last: row.try_get(1).map_err(corrupt)?,
            run_id: row.try_get(2).map_err(corrupt)?,
            events: row.try_get(3).map_err(corrupt)?,
            created_at: row.try_get(4).map_err(corrupt)?,
        };
        events = events.saturating_add(batch.count_above(ms(after)));
        batches.push(batch);
    }
    batch::parse(thread_id, batches, after, limit)
}

/// Deletes the batches appended before `before`; returns how many events they held.
pub(super) async fn prune(client: &impl GenericClient, before: u64) -> Result<u64, StoreError> {
    let row = client
        .query_one(
            &prepared(
                client,
                "WITH gone AS (
                    DELETE FROM kit_worker_event_batches WHERE created_at < $1
                    RETURNING last_seq - first_seq + 1 AS n)
                 SELECT COALESCE(SUM(n), 0)::BIGINT FROM gone",
            )
            .await?,
            &[&ms(before)],
        )
        .await
        .map_err(|e| sql_error("pruning events", e))?;
    let pruned: i64 = row
        .try_get(0)
        .map_err(|e| StoreError::Corrupt(format!("a count of pruned events: {e}")))?;
    Ok(unms(pruned))
}

/// Keeps a connection that `LISTEN`s for appends and forwards each thread id to `notices`,
/// reconnecting with a growing pause when the connection is lost. Ends (closing its
/// connection) once no receiver of `notices` is left.
pub(super) async fn listen(config: tokio_postgres::Config, notices: broadcast::Sender<String>) {
    let mut pause = Duration::from_millis(100);
    while notices.receiver_count() > 0 {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let tx = notices.clone();
                // The connection does its I/O only while polled: drive it beside the LISTEN.
                let driver = tokio::spawn(async move { forward(messages, &tx).await });
                match client
                    .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
                    .await
                {
                    Ok(()) => {
                        pause = Duration::from_millis(100);
                        // Appends made while (re)connecting were not heard: wake everyone.
                        let _ = notices.send(String::new());
                        let _ = driver.await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %crate::pg::describe(&e), "could not LISTEN for worker events; retrying");
                        driver.abort();
                    }
                }
                drop(client);
            }
            Err(e) => {
                tracing::warn!(error = %crate::pg::describe(&e), "could not open the LISTEN connection for worker events; retrying");
            }
        }
        if notices.receiver_count() == 0 {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// Forwards notifications until the connection breaks or nobody listens any more.
async fn forward<S>(messages: S, notices: &broadcast::Sender<String>)
where
    S: futures::Stream<Item = Result<tokio_postgres::AsyncMessage, tokio_postgres::Error>>,
{
    use futures::StreamExt;
    tokio::pin!(messages);
    let mut check = tokio::time::interval(Duration::from_secs(2));
    loop {
        let message = tokio::select! {
            m = messages.next() => m,
            _ = check.tick() => {
                if notices.receiver_count() == 0 {
                    return;
                }
                continue;
            }
        };
        match message {
            Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                let _ = notices.send(n.payload().to_string());
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %crate::pg::describe(&e), "the LISTEN connection for worker events broke; reconnecting");
                return;
            }
            None => return,
        }
    }
}
