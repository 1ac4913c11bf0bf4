//! The PostgreSQL run store: one queue shared by many worker processes.

mod events;

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::broadcast;
use tokio_postgres::Row;

use super::{
    Finish, NOTICE_CAPACITY, NewEvent, NewRun, RUN_COLUMNS, RecoverAction, RunInput, RunRecord,
    RunStatus, RunStore, StoreError, StoredEvent, ThreadRecord, recovered,
};
use crate::pg::{Database, is_current, record_version, stored_version};

/// Serialises table creation between processes starting together.
const MIGRATION_LOCK: i64 = 0x6b69_7477_6f72_6b72; // "kitworkr"

/// The table holding the schema version.
const VERSION_TABLE: &str = "kit_worker_schema_version";

/// The newest schema version of the worker's tables this build knows. Version 1 is
/// [`SCHEMA`]; its statements also bring the unversioned tables of older kits up to date.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kit_worker_threads (
    thread_id   TEXT COLLATE \"C\" PRIMARY KEY,
    graph_id    TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}',
    values_json TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS kit_worker_runs (
    seq                BIGSERIAL PRIMARY KEY,
    run_id             TEXT COLLATE \"C\" NOT NULL UNIQUE,
    thread_id          TEXT COLLATE \"C\" NOT NULL,
    graph_id           TEXT NOT NULL,
    status             TEXT NOT NULL,
    input_kind         TEXT NOT NULL,
    input              TEXT NOT NULL,
    output             TEXT,
    error              TEXT,
    metadata           TEXT NOT NULL DEFAULT '{}',
    multitask_strategy TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    cancel_requested   BOOLEAN NOT NULL DEFAULT FALSE,
    worker_id          TEXT,
    lease_until        BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    started_at         BIGINT,
    finished_at        BIGINT
);
CREATE INDEX IF NOT EXISTS kit_worker_runs_status ON kit_worker_runs (status, seq);
CREATE INDEX IF NOT EXISTS kit_worker_runs_thread ON kit_worker_runs (thread_id, seq);
-- The runs of a thread that have not ended (read by every new run on the thread).
CREATE INDEX IF NOT EXISTS kit_worker_runs_active ON kit_worker_runs (thread_id, seq)
    WHERE status IN ('pending', 'running');
-- Owners (added after the first release: existing rows belong to the shared identity).
ALTER TABLE kit_worker_threads ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT '';
ALTER TABLE kit_worker_runs ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT '';
-- The thread event log (added with resumable streams).
ALTER TABLE kit_worker_threads ADD COLUMN IF NOT EXISTS event_seq BIGINT NOT NULL DEFAULT 0;
-- One row per append: events `first_seq..=last_seq` as `[[method, namespace, data], …]` (a
-- row per event before; `events::migrate` moves those).
CREATE TABLE IF NOT EXISTS kit_worker_event_batches (
    thread_id  TEXT COLLATE \"C\" NOT NULL,
    last_seq   BIGINT NOT NULL,
    first_seq  BIGINT NOT NULL,
    run_id     TEXT NOT NULL,
    events     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (thread_id, last_seq)
);
CREATE INDEX IF NOT EXISTS kit_worker_event_batches_age
    ON kit_worker_event_batches (created_at);
";

/// A [`RunStore`] in PostgreSQL: several worker processes (on several machines) share one
/// queue. Runs are claimed with `FOR UPDATE SKIP LOCKED`, so no run is handed to two
/// workers; a worker holds a lease on each run it executes, and a run whose lease expired
/// (its worker died) is recovered by any live worker.
///
/// Connections are made without TLS: use a local server, a private network or a TLS
/// terminating proxy. Besides its pool, a store that serves thread streams keeps one more
/// connection, `LISTEN`ing for the events other workers append (opened by the first stream,
/// closed once no stream is left).
#[derive(Clone)]
pub struct PostgresRunStore {
    db: Database,
    /// The wake-up channel and the task `LISTEN`ing for it, started by the first
    /// [`event_notices`](RunStore::event_notices).
    listener: Arc<Mutex<Option<Listener>>>,
}

struct Listener {
    notices: broadcast::Sender<String>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PostgresRunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresRunStore")
            .field("location", &self.db.location)
            .field("schema", &self.db.schema)
            .finish()
    }
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn unms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn parse_json(column: &str, text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("column `{column}` is not JSON: {e}")))
}

fn sql_error(op: &str, e: tokio_postgres::Error) -> StoreError {
    let hint = if e.is_closed() || e.as_db_error().is_none() {
        "check that the server is running and reachable"
    } else {
        "check the database (permissions, disk space)"
    };
    let detail = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    };
    StoreError::Backend {
        op: op.to_string(),
        message: format!("{detail}; {hint}"),
    }
}

/// `sql` as a statement prepared once per pooled connection (deadpool's statement cache):
/// run as plain text, every statement cost a Parse round trip and a fresh plan on the server
/// (W7: about 15 statements per run).
pub(super) async fn prepared(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    client
        .prepare_cached(sql)
        .await
        .map_err(|e| sql_error("preparing a statement", e))
}

fn run_from_row(row: &Row) -> Result<RunRecord, StoreError> {
    let get = |e: tokio_postgres::Error| StoreError::Corrupt(format!("a run row: {e}"));
    let run_id: String = row.try_get(0).map_err(get)?;
    let status: String = row.try_get(3).map_err(get)?;
    let input_kind: String = row.try_get(4).map_err(get)?;
    let input: String = row.try_get(5).map_err(get)?;
    let output: Option<String> = row.try_get(6).map_err(get)?;
    let metadata: String = row.try_get(8).map_err(get)?;
    let attempts: i32 = row.try_get(10).map_err(get)?;
    Ok(RunRecord {
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("run `{run_id}` has status `{status}`")))?,
        thread_id: row.try_get(1).map_err(get)?,
        graph_id: row.try_get(2).map_err(get)?,
        input: RunInput::from_parts(&input_kind, parse_json("input", &input)?),
        output: output
            .as_deref()
            .map(|o| parse_json("output", o))
            .transpose()?,
        error: row.try_get(7).map_err(get)?,
        metadata: parse_json("metadata", &metadata)?,
        multitask_strategy: row.try_get(9).map_err(get)?,
        attempts: u32::try_from(attempts).unwrap_or(0),
        cancel_requested: row.try_get(11).map_err(get)?,
        worker_id: row.try_get(12).map_err(get)?,
        created_at: unms(row.try_get(13).map_err(get)?),
        updated_at: unms(row.try_get(14).map_err(get)?),
        started_at: row.try_get::<_, Option<i64>>(15).map_err(get)?.map(unms),
        finished_at: row.try_get::<_, Option<i64>>(16).map_err(get)?.map(unms),
        owner: row.try_get(17).map_err(get)?,
        run_id,
    })
}

fn thread_from_row(row: &Row) -> Result<ThreadRecord, StoreError> {
    let get = |e: tokio_postgres::Error| StoreError::Corrupt(format!("a thread row: {e}"));
    let metadata: String = row.try_get(2).map_err(get)?;
    let values: Option<String> = row.try_get(3).map_err(get)?;
    Ok(ThreadRecord {
        thread_id: row.try_get(0).map_err(get)?,
        graph_id: row.try_get(1).map_err(get)?,
        metadata: parse_json("metadata", &metadata)?,
        values: values
            .as_deref()
            .map(|v| parse_json("values", v))
            .transpose()?,
        created_at: unms(row.try_get(4).map_err(get)?),
        updated_at: unms(row.try_get(5).map_err(get)?),
        owner: row.try_get(6).map_err(get)?,
    })
}

/// The claim: the oldest claimable pending runs (their thread has no running run and no older
/// pending one), skipping rows another worker is claiming right now, become `running`.
///
/// With `window`, only the `$6` oldest pending runs are candidates. Without it the planner may
/// check every pending run's thread before it sorts and stops at the limit: on a table whose
/// statistics predate the queue's growth (a new store, a burst before autovacuum's next
/// ANALYZE) it plans for one pending row, and a claim among 2,000 pending runs took 70 ms
/// of PostgreSQL CPU (a few with the window). The window bounds that work; the caller claims
/// without it only when the window held too few claimable runs (a short queue, or one whose
/// oldest runs wait for their threads).
fn claim_sql(window: bool) -> String {
    // The window's candidates are read first (MATERIALIZED: at most $6 rows, whatever the
    // plan), and only they are checked against their threads. A thread's runs are found by
    // thread alone (OFFSET 0 keeps the status test out of that scan): otherwise the planner,
    // guessing from missing statistics, also scanned the status index for every `running`
    // entry, dead ones included, once per candidate (W7 on PostgreSQL: 2,300 index entries
    // read per probe and growing with every run the table had seen).
    let (with, from) = if window {
        (
            "WITH c AS MATERIALIZED (
               SELECT run_id FROM kit_worker_runs
               WHERE status = 'pending' AND graph_id = ANY($1)
               ORDER BY seq LIMIT $6),",
            "c JOIN kit_worker_runs r ON r.run_id = c.run_id",
        )
    } else {
        ("WITH", "kit_worker_runs r")
    };
    format!(
        "{with} picked AS (
           SELECT r.run_id FROM {from}
           WHERE r.status = 'pending' AND r.graph_id = ANY($1)
             AND NOT EXISTS (
               SELECT 1 FROM (
                 SELECT o.status, o.seq FROM kit_worker_runs o
                 WHERE o.thread_id = r.thread_id OFFSET 0) o
               WHERE o.status = 'running' OR (o.status = 'pending' AND o.seq < r.seq))
           ORDER BY r.seq LIMIT $2
           FOR UPDATE OF r SKIP LOCKED)
         UPDATE kit_worker_runs u SET status = 'running', worker_id = $3, lease_until = $4,
             started_at = $5, updated_at = $5, attempts = u.attempts + 1
         FROM picked WHERE u.run_id = picked.run_id AND u.status = 'pending'
         RETURNING {}",
        RUN_COLUMNS
            .split(", ")
            .map(|c| format!("u.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

const THREAD_COLUMNS: &str =
    "thread_id, graph_id, metadata, values_json, created_at, updated_at, owner";

impl PostgresRunStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`) and creates the tables in
    /// the connection's default schema when missing.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::build(url, None).await
    }

    /// [`connect`](Self::connect), with the tables in the PostgreSQL schema `schema` (created
    /// if needed): a lower-case identifier such as `kit_worker_test_1`.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        Self::build(url, Some(schema)).await
    }

    async fn build(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let db =
            Database::open(url, schema, "kit-worker").map_err(|message| StoreError::Backend {
                op: "connecting".into(),
                message,
            })?;
        let store = PostgresRunStore {
            db,
            listener: Arc::new(Mutex::new(None)),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The PostgreSQL schema holding the tables, if one was given.
    pub fn schema(&self) -> Option<&str> {
        self.db.schema.as_deref()
    }

    /// Drops the schema given to [`connect_in_schema`](Self::connect_in_schema) with its
    /// tables (tests clean up with it). Does nothing without a schema.
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        self.db
            .drop_schema()
            .await
            .map_err(|message| StoreError::Backend {
                op: "dropping the schema".into(),
                message,
            })
    }

    async fn client(&self, op: &str) -> Result<deadpool_postgres::Object, StoreError> {
        self.db
            .client()
            .await
            .map_err(|message| StoreError::Backend {
                op: op.to_string(),
                message,
            })
    }

    /// Creates or updates the tables. A worker joining a fleet whose tables are current only
    /// reads their version: the statements of [`SCHEMA`] lock the tables they name (an added
    /// column exclusively), and run beside live runs they could deadlock with them.
    async fn migrate(&self) -> Result<(), StoreError> {
        let op = "creating the tables";
        let current = |found| {
            is_current(found, SCHEMA_VERSION).map_err(|found| StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            })
        };
        let mut client = self.client(op).await?;
        if current(
            stored_version(&client, VERSION_TABLE)
                .await
                .map_err(|e| sql_error(op, e))?,
        )? {
            return Ok(());
        }
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        self.db
            .begin_migration(&tx, MIGRATION_LOCK)
            .await
            .map_err(|e| sql_error(op, e))?;
        // Another process may have migrated while we waited for the lock.
        let found = stored_version(&tx, VERSION_TABLE)
            .await
            .map_err(|e| sql_error(op, e))?;
        if !current(found)? {
            tx.batch_execute(SCHEMA)
                .await
                .map_err(|e| sql_error(op, e))?;
            events::migrate(&tx).await?;
            record_version(&tx, VERSION_TABLE, SCHEMA_VERSION)
                .await
                .map_err(|e| sql_error(op, e))?;
        }
        tx.commit().await.map_err(|e| sql_error(op, e))
    }

    async fn one_run(
        client: &impl deadpool_postgres::GenericClient,
        run_id: &str,
    ) -> Result<Option<RunRecord>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM kit_worker_runs WHERE run_id = $1");
        let row = client
            .query_opt(&prepared(client, &sql).await?, &[&run_id])
            .await
            .map_err(|e| sql_error("reading a run", e))?;
        row.as_ref().map(run_from_row).transpose()
    }
}

#[crate::async_trait]
impl RunStore for PostgresRunStore {
    fn shared(&self) -> bool {
        true
    }

    async fn create_thread(
        &self,
        thread_id: &str,
        owner: &str,
        metadata: Value,
    ) -> Result<ThreadRecord, StoreError> {
        let op = "creating a thread";
        let client = self.client(op).await?;
        let now = ms(crate::ids::now_millis());
        client
            .execute(
                &prepared(
                    &client,
                    "INSERT INTO kit_worker_threads
                        (thread_id, metadata, created_at, updated_at, owner)
                     VALUES ($1, $2, $3, $3, $4) ON CONFLICT (thread_id) DO NOTHING",
                )
                .await?,
                &[&thread_id, &metadata.to_string(), &now, &owner],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        let sql = format!("SELECT {THREAD_COLUMNS} FROM kit_worker_threads WHERE thread_id = $1");
        let row = client
            .query_one(&prepared(&client, &sql).await?, &[&thread_id])
            .await
            .map_err(|e| sql_error(op, e))?;
        thread_from_row(&row)
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let op = "reading a thread";
        let client = self.client(op).await?;
        let sql = format!("SELECT {THREAD_COLUMNS} FROM kit_worker_threads WHERE thread_id = $1");
        let row = client
            .query_opt(&prepared(&client, &sql).await?, &[&thread_id])
            .await
            .map_err(|e| sql_error(op, e))?;
        row.as_ref().map(thread_from_row).transpose()
    }

    async fn create_run(&self, run: NewRun) -> Result<RunRecord, StoreError> {
        let op = "creating a run";
        let mut client = self.client(op).await?;
        let now = ms(crate::ids::now_millis());
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        tx.execute(
            &prepared(
                &tx,
                "INSERT INTO kit_worker_threads
                    (thread_id, graph_id, created_at, updated_at, owner)
                 VALUES ($1, $2, $3, $3, $4) ON CONFLICT (thread_id) DO NOTHING",
            )
            .await?,
            &[&run.thread_id, &run.graph_id, &now, &run.owner],
        )
        .await
        .map_err(|e| sql_error(op, e))?;
        let row = tx
            .query_one(
                &prepared(
                    &tx,
                    "SELECT graph_id, owner FROM kit_worker_threads
                     WHERE thread_id = $1 FOR UPDATE",
                )
                .await?,
                &[&run.thread_id],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        let corrupt = |e: tokio_postgres::Error| StoreError::Corrupt(format!("a thread row: {e}"));
        let graph: Option<String> = row.try_get(0).map_err(corrupt)?;
        let owner: String = row.try_get(1).map_err(corrupt)?;
        if owner != run.owner {
            return Err(StoreError::ForeignThread(run.thread_id));
        }
        match graph {
            Some(g) if g != run.graph_id => {
                return Err(StoreError::GraphMismatch {
                    thread_id: run.thread_id,
                    existing: g,
                    requested: run.graph_id,
                });
            }
            Some(_) => {}
            None => {
                tx.execute(
                    &prepared(
                        &tx,
                        "UPDATE kit_worker_threads SET graph_id = $2, updated_at = $3
                     WHERE thread_id = $1",
                    )
                    .await?,
                    &[&run.thread_id, &run.graph_id, &now],
                )
                .await
                .map_err(|e| sql_error(op, e))?;
            }
        }
        let inserted = tx
            .execute(
                &prepared(
                    &tx,
                    "INSERT INTO kit_worker_runs (run_id, thread_id, graph_id, status, input_kind,
                    input, metadata, multitask_strategy, created_at, updated_at, owner)
                 VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, $8, $8, $9)
                 ON CONFLICT (run_id) DO NOTHING",
                )
                .await?,
                &[
                    &run.run_id,
                    &run.thread_id,
                    &run.graph_id,
                    &run.input.kind(),
                    &run.input.value().to_string(),
                    &run.metadata.to_string(),
                    &run.multitask_strategy,
                    &now,
                    &run.owner,
                ],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        if inserted == 0 {
            return Err(StoreError::DuplicateRun(run.run_id));
        }
        let record = Self::one_run(&tx, &run.run_id).await?;
        tx.commit().await.map_err(|e| sql_error(op, e))?;
        record.ok_or_else(|| StoreError::Corrupt(format!("run `{}` vanished", run.run_id)))
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let client = self.client("reading a run").await?;
        Self::one_run(&client, run_id).await
    }

    async fn thread_runs(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let op = "listing runs";
        let client = self.client(op).await?;
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM kit_worker_runs WHERE thread_id = $1
             ORDER BY seq DESC LIMIT $2 OFFSET $3"
        );
        let rows = client
            .query(
                &prepared(&client, &sql).await?,
                &[
                    &thread_id,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                    &i64::try_from(offset).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        rows.iter().map(run_from_row).collect()
    }

    async fn active_thread_runs(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let op = "listing a thread's active runs";
        let client = self.client(op).await?;
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM kit_worker_runs
             WHERE thread_id = $1 AND status IN ('pending', 'running') ORDER BY seq"
        );
        let rows = client
            .query(&prepared(&client, &sql).await?, &[&thread_id])
            .await
            .map_err(|e| sql_error(op, e))?;
        rows.iter().map(run_from_row).collect()
    }

    async fn claim(
        &self,
        worker_id: &str,
        graph_ids: &[String],
        max: usize,
        lease_until: u64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        if max == 0 || graph_ids.is_empty() {
            return Ok(Vec::new());
        }
        let op = "claiming runs";
        let client = self.client(op).await?;
        let now = ms(crate::ids::now_millis());
        let want = i64::try_from(max).unwrap_or(i64::MAX);
        // First among the oldest pending runs only, then (when that found too few) among all.
        let window = want.saturating_mul(2).saturating_add(32);
        let mut rows = client
            .query(
                &prepared(&client, &claim_sql(true)).await?,
                &[
                    &graph_ids,
                    &want,
                    &worker_id,
                    &ms(lease_until),
                    &now,
                    &window,
                ],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        if rows.len() < max {
            let more = i64::try_from(max - rows.len()).unwrap_or(i64::MAX);
            rows.extend(
                client
                    .query(
                        &prepared(&client, &claim_sql(false)).await?,
                        &[&graph_ids, &more, &worker_id, &ms(lease_until), &now],
                    )
                    .await
                    .map_err(|e| sql_error(op, e))?,
            );
        }
        let mut runs = rows
            .iter()
            .map(run_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        runs.sort_by_key(|r| r.created_at);
        Ok(runs)
    }

    async fn renew(&self, worker_id: &str, lease_until: u64) -> Result<Vec<String>, StoreError> {
        let op = "renewing leases";
        let client = self.client(op).await?;
        let rows = client
            .query(
                &prepared(
                    &client,
                    "UPDATE kit_worker_runs SET lease_until = $2
                 WHERE worker_id = $1 AND status = 'running'
                 RETURNING run_id, cancel_requested",
                )
                .await?,
                &[&worker_id, &ms(lease_until)],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        Ok(rows
            .iter()
            .filter(|r| r.try_get::<_, bool>(1).unwrap_or(false))
            .filter_map(|r| r.try_get::<_, String>(0).ok())
            .collect())
    }

    async fn finish(
        &self,
        run_id: &str,
        worker_id: &str,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        let op = "recording the end of a run";
        let mut client = self.client(op).await?;
        let now = ms(crate::ids::now_millis());
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        let row = tx
            .query_opt(
                &prepared(
                    &tx,
                    "UPDATE kit_worker_runs SET status = $3, output = $4, error = $5,
                    finished_at = $6, updated_at = $6, lease_until = NULL
                 WHERE run_id = $1 AND worker_id = $2 AND status = 'running'
                 RETURNING thread_id",
                )
                .await?,
                &[
                    &run_id,
                    &worker_id,
                    &finish.status.as_str(),
                    &finish.output.as_ref().map(Value::to_string),
                    &finish.error,
                    &now,
                ],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        let Some(row) = row else {
            return Ok(false);
        };
        let thread: String = row
            .try_get(0)
            .map_err(|e| StoreError::Corrupt(format!("a run row: {e}")))?;
        if let Some(values) = finish.output.as_ref().and_then(|o| o.get("values")) {
            tx.execute(
                &prepared(
                    &tx,
                    "UPDATE kit_worker_threads SET values_json = $2, updated_at = $3
                 WHERE thread_id = $1",
                )
                .await?,
                &[&thread, &values.to_string(), &now],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        }
        events::append(&tx, &thread, run_id, &finish.events, unms(now)).await?;
        tx.commit().await.map_err(|e| sql_error(op, e))?;
        Ok(true)
    }

    async fn append_events(
        &self,
        thread_id: &str,
        run_id: &str,
        events: &[NewEvent],
    ) -> Result<u64, StoreError> {
        let op = "appending events";
        if events.is_empty() {
            return Ok(0);
        }
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        let last = events::append(&tx, thread_id, run_id, events, crate::ids::now_millis()).await?;
        tx.commit().await.map_err(|e| sql_error(op, e))?;
        Ok(last)
    }

    async fn read_events(
        &self,
        thread_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let client = self.client("reading events").await?;
        events::read(&client, thread_id, after, limit).await
    }

    async fn prune_events(&self, before: u64) -> Result<u64, StoreError> {
        let client = self.client("pruning events").await?;
        events::prune(&client, before).await
    }

    async fn event_notices(&self) -> Result<broadcast::Receiver<String>, StoreError> {
        let mut slot = match self.listener.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(listener) = slot.as_ref()
            && !listener.task.is_finished()
        {
            return Ok(listener.notices.subscribe());
        }
        let notices = broadcast::channel(NOTICE_CAPACITY).0;
        let receiver = notices.subscribe();
        let task = tokio::spawn(events::listen(self.db.config.clone(), notices.clone()));
        *slot = Some(Listener { notices, task });
        Ok(receiver)
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<(), StoreError> {
        let op = "releasing a run";
        let client = self.client(op).await?;
        client
            .execute(
                &prepared(
                    &client,
                    "UPDATE kit_worker_runs SET status = 'pending', worker_id = NULL,
                    lease_until = NULL, attempts = GREATEST(attempts - 1, 0), updated_at = $3
                 WHERE run_id = $1 AND worker_id = $2 AND status = 'running'",
                )
                .await?,
                &[&run_id, &worker_id, &ms(crate::ids::now_millis())],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        Ok(())
    }

    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let op = "cancelling a run";
        let mut client = self.client(op).await?;
        let now = ms(crate::ids::now_millis());
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        tx.execute(
            &prepared(
                &tx,
                "UPDATE kit_worker_runs SET
                status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
                finished_at = CASE WHEN status = 'pending' THEN $2 ELSE finished_at END,
                cancel_requested = (status = 'running'),
                updated_at = $2
             WHERE run_id = $1 AND status IN ('pending', 'running')",
            )
            .await?,
            &[&run_id, &now],
        )
        .await
        .map_err(|e| sql_error(op, e))?;
        let run = Self::one_run(&tx, run_id).await?;
        tx.commit().await.map_err(|e| sql_error(op, e))?;
        Ok(run)
    }

    async fn recover(
        &self,
        worker_id: &str,
        all_running: bool,
        now: u64,
        action: RecoverAction,
        max_attempts: u32,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let op = "recovering runs";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| sql_error(op, e))?;
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM kit_worker_runs
             WHERE status = 'running' AND (worker_id IS NULL OR worker_id <> $1)
               AND ($2 OR lease_until IS NULL OR lease_until < $3)
             ORDER BY seq FOR UPDATE SKIP LOCKED"
        );
        let rows = tx
            .query(
                &prepared(&tx, &sql).await?,
                &[&worker_id, &all_running, &ms(now)],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
        let mut changed = Vec::with_capacity(rows.len());
        for row in &rows {
            let run = run_from_row(row)?;
            let (status, error) = recovered(&run, action, max_attempts);
            let finished = status.is_terminal().then_some(ms(now));
            tx.execute(
                &prepared(
                    &tx,
                    "UPDATE kit_worker_runs SET status = $2, error = $3, worker_id = NULL,
                    lease_until = NULL, finished_at = $4, updated_at = $5
                 WHERE run_id = $1",
                )
                .await?,
                &[&run.run_id, &status.as_str(), &error, &finished, &ms(now)],
            )
            .await
            .map_err(|e| sql_error(op, e))?;
            if let Some(run) = Self::one_run(&tx, &run.run_id).await? {
                changed.push(run);
            }
        }
        tx.commit().await.map_err(|e| sql_error(op, e))?;
        Ok(changed)
    }
}
