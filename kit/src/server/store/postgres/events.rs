//! The thread event log in PostgreSQL: appends numbered from the thread's counter (the row
//! lock on the thread orders concurrent appends), reads from a cursor, pruning by age, and the
//! `LISTEN` connection that turns every process's appends into wake-ups.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio::sync::broadcast;
use tokio_postgres::NoTls;

use super::{ms, prepared, sql_error, unms};
use crate::server::store::{NOTIFY_CHANNEL, NewEvent, StoreError, StoredEvent, parse_namespace};

/// A NOTIFY payload must stay under 8000 bytes: longer thread ids are announced as an empty
/// payload, which wakes every follower (each re-reads its own thread).
const MAX_PAYLOAD: usize = 4000;

/// Appends `events` inside the caller's transaction and announces the thread (delivered when
/// the transaction commits); returns the number of the last event.
pub(super) async fn append(
    tx: &impl GenericClient,
    thread_id: &str,
    run_id: &str,
    events: &[NewEvent],
    now: u64,
) -> Result<u64, StoreError> {
    let op = "appending events";
    if events.is_empty() {
        return Ok(0);
    }
    let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
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
    let first = last - count + 1;
    let seqs: Vec<i64> = (first..=last).collect();
    let methods: Vec<&str> = events.iter().map(|e| e.method.as_str()).collect();
    let namespaces: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(&e.namespace).unwrap_or_else(|_| "[]".into()))
        .collect();
    let data: Vec<String> = events.iter().map(|e| e.data.to_string()).collect();
    tx.execute(
        &prepared(
            tx,
            "INSERT INTO kit_worker_events
            (thread_id, seq, run_id, method, namespace, data, created_at)
         SELECT $1, s, $2, m, n, d, $3
         FROM unnest($4::BIGINT[], $5::TEXT[], $6::TEXT[], $7::TEXT[]) AS u(s, m, n, d)",
        )
        .await?,
        &[
            &thread_id,
            &run_id,
            &ms(now),
            &seqs,
            &methods,
            &namespaces,
            &data,
        ],
    )
    .await
    .map_err(|e| sql_error(op, e))?;
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

/// Up to `limit` events of `thread_id` numbered above `after`.
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
                "SELECT seq, run_id, method, namespace, data, created_at FROM kit_worker_events
             WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
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
    let corrupt = |e: tokio_postgres::Error| StoreError::Corrupt(format!("an event row: {e}"));
    rows.iter()
        .map(|row| {
            let namespace: String = row.try_get(3).map_err(corrupt)?;
            let data: String = row.try_get(4).map_err(corrupt)?;
            Ok(StoredEvent {
                thread_id: thread_id.to_string(),
                seq: unms(row.try_get(0).map_err(corrupt)?),
                run_id: row.try_get(1).map_err(corrupt)?,
                method: row.try_get(2).map_err(corrupt)?,
                namespace: parse_namespace(&namespace),
                data: super::parse_json("data", &data)?,
                created_at: unms(row.try_get(5).map_err(corrupt)?),
            })
        })
        .collect()
}

/// Deletes events appended before `before`.
pub(super) async fn prune(client: &impl GenericClient, before: u64) -> Result<u64, StoreError> {
    client
        .execute(
            &prepared(
                client,
                "DELETE FROM kit_worker_events WHERE created_at < $1",
            )
            .await?,
            &[&ms(before)],
        )
        .await
        .map_err(|e| sql_error("pruning events", e))
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
