//! The SQLite run store: one worker process, runs kept in a file (or in memory).

mod events;
mod group;
mod rows;
mod savepoint;
mod wal;
use rows::{get_raw_run, get_run, get_thread, runs_where};
use savepoint::Savepoint;

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::broadcast;

use super::{
    Finish, NOTICE_CAPACITY, NewEvent, NewRun, RecoverAction, RunRecord, RunStore, StoreError,
    StoredEvent, ThreadRecord, batch, recovered,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kit_worker_threads (
    thread_id   TEXT PRIMARY KEY,
    graph_id    TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}',
    values_json TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    owner       TEXT NOT NULL DEFAULT '',
    event_seq   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kit_worker_runs (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id             TEXT NOT NULL UNIQUE,
    thread_id          TEXT NOT NULL,
    graph_id           TEXT NOT NULL,
    status             TEXT NOT NULL,
    input_kind         TEXT NOT NULL,
    input              TEXT NOT NULL,
    output             TEXT,
    error              TEXT,
    metadata           TEXT NOT NULL DEFAULT '{}',
    multitask_strategy TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    worker_id          TEXT,
    lease_until        INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    started_at         INTEGER,
    finished_at        INTEGER,
    owner              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS kit_worker_runs_status ON kit_worker_runs (status, seq);
CREATE INDEX IF NOT EXISTS kit_worker_runs_thread ON kit_worker_runs (thread_id, seq);
-- The runs of a thread that have not ended (read by every new run on the thread).
CREATE INDEX IF NOT EXISTS kit_worker_runs_active ON kit_worker_runs (thread_id, seq)
    WHERE status IN ('pending', 'running');
";

/// A [`RunStore`] in a SQLite file (or in memory).
///
/// A SQLite store belongs to **one worker process at a time**: when a worker starts, every run
/// it finds `running` was left by a dead process and is recovered at once. Use
/// `PostgresRunStore` (feature `postgres`) to share a queue between processes.
///
/// The file uses WAL journaling with `synchronous=NORMAL`: a run's status change is durable
/// across a crash of the process (not necessarily of the machine's power).
///
/// ```
/// use kit::server::store::SqliteRunStore;
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteRunStore::open(dir.path().join("worker.sqlite"))?;
/// # let _ = store;
/// # Ok::<(), kit::server::store::StoreError>(())
/// ```
#[derive(Clone)]
pub struct SqliteRunStore {
    /// The thread owning the connection (it commits the writes of concurrent calls together).
    jobs: mpsc::Sender<group::Job>,
    path: Option<PathBuf>,
    notices: broadcast::Sender<String>,
}

impl std::fmt::Debug for SqliteRunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRunStore")
            .field("path", &self.path)
            .finish()
    }
}

fn backend(op: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend {
        op: op.to_string(),
        message: format!("{e}; check that the database file is writable and not corrupt"),
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

/// A value's JSON text, through kit's writer (serde_json's bytes, written faster).
fn to_json(v: &Value) -> String {
    crate::json::to_string(v).unwrap_or_else(|_| v.to_string())
}

/// Brings a store made by an older kit up to date: the `owner` columns (existing threads and
/// runs belong to the shared identity) and the threads' event counter.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let added = [
        ("kit_worker_threads", "owner", "TEXT NOT NULL DEFAULT ''"),
        ("kit_worker_runs", "owner", "TEXT NOT NULL DEFAULT ''"),
        (
            "kit_worker_threads",
            "event_seq",
            "INTEGER NOT NULL DEFAULT 0",
        ),
    ];
    for (table, column, layout) in added {
        if !has_column(conn, table, column)? {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {layout}"))
                .map_err(|e| backend("adding a column to an older store", e))?;
        }
    }
    Ok(())
}

fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, StoreError> {
    let names = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(1))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|e| backend("reading the table layout", e))?;
    Ok(names.iter().any(|n| n == column))
}

impl SqliteRunStore {
    /// Opens (or creates) the store in the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let conn = Connection::open(&path).map_err(|e| StoreError::Backend {
            op: format!("opening {}", path.display()),
            message: format!("{e}; check that the directory exists and is writable"),
        })?;
        Self::init(conn, Some(path))
    }

    /// A store in memory: nothing survives the process. Handy for tests and for workers whose
    /// runs need not outlive them.
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| backend("opening :memory:", e))?;
        Self::init(conn, None)
    }

    /// The file, when not in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<Self, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| backend("configuring the connection", e))?;
        if let Some(path) = &path {
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(|e| backend("switching to WAL", e))?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(|e| backend("configuring the connection", e))?;
            wal::checkpoint_in_background(&mut conn, path)?;
        }
        // Most writing jobs run in a savepoint, whose journal SQLite otherwise keeps in chunks
        // of its 64 KiB spill threshold: each job then allocated and freed one, and glibc's
        // malloc handed that memory back to the kernel every time (madvise and a TLB flush on
        // every core). In memory, the journal grows by 1 KiB chunks that stay allocated.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(|e| backend("configuring the connection", e))?;
        // Room for every statement the store runs (about 30), so each is prepared once.
        conn.set_prepared_statement_cache_capacity(64);
        conn.execute_batch(SCHEMA)
            .and_then(|()| conn.execute_batch(events::SCHEMA))
            .map_err(|e| backend("creating the tables", e))?;
        migrate(&conn)?;
        events::migrate(&conn)?;
        Ok(SqliteRunStore {
            jobs: group::spawn(conn)?,
            path,
            notices: broadcast::channel(NOTICE_CAPACITY).0,
        })
    }

    /// Runs `f` with the connection on the store's database thread, in a transaction it may
    /// share with other calls: `f` makes its writes atomic with a [`Savepoint`], never with a
    /// transaction of its own. Returns once the work is committed.
    async fn with<T, F>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: group::Job = Box::new(move |conn: &mut Connection| {
            let result = f(conn);
            Box::new(move |failed: Option<&StoreError>| {
                let result = match (failed, result) {
                    (Some(e), Ok(_)) => Err(backend(op, e)),
                    (_, result) => result,
                };
                let _ = tx.send(result);
            }) as group::Reply
        });
        self.jobs
            .send(job)
            .map_err(|_| backend(op, "the database thread has stopped"))?;
        rx.await
            .map_err(|_| backend(op, "the database task failed (it panicked)"))?
    }
}

#[crate::async_trait]
impl RunStore for SqliteRunStore {
    fn shared(&self) -> bool {
        false
    }

    async fn create_thread(
        &self,
        thread_id: &str,
        owner: &str,
        metadata: Value,
    ) -> Result<ThreadRecord, StoreError> {
        let thread_id = thread_id.to_string();
        let owner = owner.to_string();
        self.with("creating a thread", move |conn| {
            let now = ms(crate::ids::now_millis());
            conn.prepare_cached(
                "INSERT INTO kit_worker_threads (thread_id, metadata, created_at, updated_at, owner)
                 VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (thread_id) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![thread_id, to_json(&metadata), now, owner]))
            .map_err(|e| backend("creating a thread", e))?;
            get_thread(conn, &thread_id)?.ok_or_else(|| {
                StoreError::Corrupt(format!("thread `{thread_id}` vanished after its insert"))
            })
        })
        .await
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let thread_id = thread_id.to_string();
        self.with("reading a thread", move |conn| get_thread(conn, &thread_id))
            .await
    }

    async fn create_run(&self, run: NewRun) -> Result<RunRecord, StoreError> {
        // The JSON is written, and the values dropped, here: not on the database thread (the
        // job captures only the fields it uses).
        let input_kind = run.input.kind();
        let input = to_json(run.input.value());
        let metadata = to_json(&run.metadata);
        drop((run.input, run.metadata));
        let raw = self.with("creating a run", move |conn| {
            let now = ms(crate::ids::now_millis());
            let tx = Savepoint::begin(conn)
                .map_err(|e| backend("creating a run", e))?;
            let existing: Option<(Option<String>, String)> = tx
                .prepare_cached(
                    "SELECT graph_id, owner FROM kit_worker_threads WHERE thread_id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row(params![run.thread_id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(|e| backend("creating a run", e))?;
            if existing.as_ref().is_some_and(|(_, owner)| *owner != run.owner) {
                return Err(StoreError::ForeignThread(run.thread_id));
            }
            match existing.map(|(graph, _)| graph) {
                None => {
                    tx.prepare_cached(
                        "INSERT INTO kit_worker_threads (thread_id, graph_id, created_at, updated_at, owner)
                         VALUES (?1, ?2, ?3, ?3, ?4)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![run.thread_id, run.graph_id, now, run.owner])
                    })
                    .map_err(|e| backend("creating a thread", e))?;
                }
                Some(Some(graph)) if graph != run.graph_id => {
                    return Err(StoreError::GraphMismatch {
                        thread_id: run.thread_id,
                        existing: graph,
                        requested: run.graph_id,
                    });
                }
                Some(_) => {
                    tx.prepare_cached(
                        "UPDATE kit_worker_threads SET graph_id = ?2, updated_at = ?3
                         WHERE thread_id = ?1",
                    )
                    .and_then(|mut s| s.execute(params![run.thread_id, run.graph_id, now]))
                    .map_err(|e| backend("creating a run", e))?;
                }
            }
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO kit_worker_runs (run_id, thread_id, graph_id, status, input_kind,
                        input, metadata, multitask_strategy, created_at, updated_at, owner)
                     VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7, ?8, ?8, ?9)
                     ON CONFLICT (run_id) DO NOTHING",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.run_id,
                        run.thread_id,
                        run.graph_id,
                        input_kind,
                        input,
                        metadata,
                        run.multitask_strategy,
                        now,
                        run.owner
                    ])
                })
                .map_err(|e| backend("creating a run", e))?;
            if inserted == 0 {
                return Err(StoreError::DuplicateRun(run.run_id));
            }
            let record = get_raw_run(&tx, &run.run_id)?;
            tx.commit().map_err(|e| backend("creating a run", e))?;
            record.ok_or_else(|| StoreError::Corrupt(format!("run `{}` vanished", run.run_id)))
        })
        .await?;
        raw.parse()
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let run_id = run_id.to_string();
        self.with("reading a run", move |conn| get_raw_run(conn, &run_id))
            .await?
            .map(rows::RawRun::parse)
            .transpose()
    }

    async fn thread_runs(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let thread_id = thread_id.to_string();
        self.with("listing runs", move |conn| {
            runs_where(
                conn,
                // `+ 0`: SQLite prepares a statement with a bare `LIMIT ?` again on every run.
                "thread_id = ?1 ORDER BY seq DESC LIMIT ?2 + 0 OFFSET ?3",
                params![
                    thread_id,
                    i64::try_from(limit).unwrap_or(i64::MAX),
                    i64::try_from(offset).unwrap_or(i64::MAX)
                ],
            )
        })
        .await
    }

    async fn active_thread_runs(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let thread_id = thread_id.to_string();
        self.with("listing a thread's active runs", move |conn| {
            runs_where(
                conn,
                "thread_id = ?1 AND status IN ('pending', 'running') ORDER BY seq",
                params![thread_id],
            )
        })
        .await
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
        let worker_id = worker_id.to_string();
        let graphs = serde_json::to_string(graph_ids).unwrap_or_else(|_| "[]".to_string());
        self.with("claiming runs", move |conn| {
            let now = ms(crate::ids::now_millis());
            let tx = Savepoint::begin(conn).map_err(|e| backend("claiming runs", e))?;
            // `LIMIT ?2 + 0`: a bare `LIMIT ?` makes SQLite prepare the statement again on
            // every claim (it plans with the bound value).
            let ids: Vec<String> = tx
                .prepare_cached(
                    "SELECT r.run_id FROM kit_worker_runs r
                     WHERE r.status = 'pending'
                       AND r.graph_id IN (SELECT value FROM json_each(?1))
                       AND NOT EXISTS (
                         SELECT 1 FROM kit_worker_runs o
                         WHERE o.thread_id = r.thread_id
                           AND (o.status = 'running' OR (o.status = 'pending' AND o.seq < r.seq)))
                     ORDER BY r.seq LIMIT ?2 + 0",
                )
                .and_then(|mut s| {
                    s.query_map(
                        params![graphs, i64::try_from(max).unwrap_or(i64::MAX)],
                        |r| r.get(0),
                    )?
                    .collect::<rusqlite::Result<Vec<String>>>()
                })
                .map_err(|e| backend("claiming runs", e))?;
            let mut claimed = Vec::with_capacity(ids.len());
            for id in ids {
                tx.prepare_cached(
                    "UPDATE kit_worker_runs SET status = 'running', worker_id = ?2,
                        lease_until = ?3, started_at = ?4, updated_at = ?4,
                        attempts = attempts + 1
                     WHERE run_id = ?1",
                )
                .and_then(|mut s| s.execute(params![id, worker_id, ms(lease_until), now]))
                .map_err(|e| backend("claiming runs", e))?;
                if let Some(run) = get_raw_run(&tx, &id)? {
                    claimed.push(run);
                }
            }
            tx.commit().map_err(|e| backend("claiming runs", e))?;
            Ok(claimed)
        })
        .await?
        .into_iter()
        .map(rows::RawRun::parse)
        .collect()
    }

    async fn renew(&self, worker_id: &str, lease_until: u64) -> Result<Vec<String>, StoreError> {
        let worker_id = worker_id.to_string();
        self.with("renewing leases", move |conn| {
            conn.prepare_cached(
                "UPDATE kit_worker_runs SET lease_until = ?2
                 WHERE worker_id = ?1 AND status = 'running'",
            )
            .and_then(|mut s| s.execute(params![worker_id, ms(lease_until)]))
            .map_err(|e| backend("renewing leases", e))?;
            conn.prepare_cached(
                "SELECT run_id FROM kit_worker_runs
                 WHERE worker_id = ?1 AND status = 'running' AND cancel_requested = 1",
            )
            .and_then(|mut s| {
                s.query_map(params![worker_id], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(|e| backend("renewing leases", e))
        })
        .await
    }

    async fn finish(
        &self,
        run_id: &str,
        worker_id: &str,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        let run_id = run_id.to_string();
        let worker_id = worker_id.to_string();
        // JSON is written here, not on the database thread every call waits for.
        let output = finish.output.as_ref().map(to_json);
        let values = finish
            .output
            .as_ref()
            .and_then(|o| o.get("values"))
            .map(to_json);
        let encoded = batch::encode(&finish.events);
        let (status, error) = (finish.status, finish.error.clone());
        let thread = self
            .with("recording the end of a run", move |conn| {
                let now = ms(crate::ids::now_millis());
                let tx =
                    Savepoint::begin(conn).map_err(|e| backend("recording the end of a run", e))?;
                let changed = tx
                    .prepare_cached(
                        "UPDATE kit_worker_runs SET status = ?3, output = ?4, error = ?5,
                        finished_at = ?6, updated_at = ?6, lease_until = NULL
                     WHERE run_id = ?1 AND worker_id = ?2 AND status = 'running'",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            run_id,
                            worker_id,
                            status.as_str(),
                            output,
                            error,
                            now
                        ])
                    })
                    .map_err(|e| backend("recording the end of a run", e))?;
                if changed == 0 {
                    return Ok(None);
                }
                let thread_id: String = tx
                    .prepare_cached("SELECT thread_id FROM kit_worker_runs WHERE run_id = ?1")
                    .and_then(|mut s| s.query_row(params![run_id], |r| r.get(0)))
                    .map_err(|e| backend("recording the end of a run", e))?;
                if let Some(values) = values {
                    tx.prepare_cached(
                        "UPDATE kit_worker_threads SET values_json = ?2, updated_at = ?3
                     WHERE thread_id = ?1",
                    )
                    .and_then(|mut s| s.execute(params![thread_id, values, now]))
                    .map_err(|e| backend("recording the end of a run", e))?;
                }
                events::append(&tx, &thread_id, &run_id, &encoded, unms(now))?;
                tx.commit()
                    .map_err(|e| backend("recording the end of a run", e))?;
                Ok(Some(thread_id))
            })
            .await?;
        match thread {
            Some(thread_id) => {
                let _ = self.notices.send(thread_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn append_events(
        &self,
        thread_id: &str,
        run_id: &str,
        events: &[NewEvent],
    ) -> Result<u64, StoreError> {
        if events.is_empty() {
            return Ok(0);
        }
        let (thread, run) = (thread_id.to_string(), run_id.to_string());
        let events = batch::encode(events);
        let last = self
            .with("appending events", move |conn| {
                let tx = Savepoint::begin(conn).map_err(|e| backend("appending events", e))?;
                let last = events::append(&tx, &thread, &run, &events, crate::ids::now_millis())?;
                tx.commit().map_err(|e| backend("appending events", e))?;
                Ok(last)
            })
            .await?;
        let _ = self.notices.send(thread_id.to_string());
        Ok(last)
    }

    async fn read_events(
        &self,
        thread_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let thread = thread_id.to_string();
        let batches = self
            .with("reading events", move |conn| {
                events::read(conn, &thread, after, limit)
            })
            .await?;
        batch::parse(thread_id, batches, after, limit)
    }

    async fn prune_events(&self, before: u64) -> Result<u64, StoreError> {
        self.with("pruning events", move |conn| events::prune(conn, before))
            .await
    }

    async fn event_notices(&self) -> Result<broadcast::Receiver<String>, StoreError> {
        Ok(self.notices.subscribe())
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<(), StoreError> {
        let run_id = run_id.to_string();
        let worker_id = worker_id.to_string();
        self.with("releasing a run", move |conn| {
            let now = ms(crate::ids::now_millis());
            conn.prepare_cached(
                "UPDATE kit_worker_runs SET status = 'pending', worker_id = NULL,
                    lease_until = NULL, attempts = MAX(attempts - 1, 0), updated_at = ?3
                 WHERE run_id = ?1 AND worker_id = ?2 AND status = 'running'",
            )
            .and_then(|mut s| s.execute(params![run_id, worker_id, now]))
            .map_err(|e| backend("releasing a run", e))?;
            Ok(())
        })
        .await
    }

    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let run_id = run_id.to_string();
        self.with("cancelling a run", move |conn| {
            let now = ms(crate::ids::now_millis());
            let tx = Savepoint::begin(conn).map_err(|e| backend("cancelling a run", e))?;
            tx.prepare_cached(
                "UPDATE kit_worker_runs SET status = 'cancelled', finished_at = ?2, updated_at = ?2
                 WHERE run_id = ?1 AND status = 'pending'",
            )
            .and_then(|mut s| s.execute(params![run_id, now]))
            .map_err(|e| backend("cancelling a run", e))?;
            tx.prepare_cached(
                "UPDATE kit_worker_runs SET cancel_requested = 1, updated_at = ?2
                 WHERE run_id = ?1 AND status = 'running'",
            )
            .and_then(|mut s| s.execute(params![run_id, now]))
            .map_err(|e| backend("cancelling a run", e))?;
            let run = get_run(&tx, &run_id)?;
            tx.commit().map_err(|e| backend("cancelling a run", e))?;
            Ok(run)
        })
        .await
    }

    async fn recover(
        &self,
        worker_id: &str,
        all_running: bool,
        now: u64,
        action: RecoverAction,
        max_attempts: u32,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let worker_id = worker_id.to_string();
        self.with("recovering runs", move |conn| {
            let tx = Savepoint::begin(conn).map_err(|e| backend("recovering runs", e))?;
            let stale = if all_running {
                runs_where(
                    &tx,
                    "status = 'running' AND (worker_id IS NULL OR worker_id <> ?1) ORDER BY seq",
                    params![worker_id],
                )?
            } else {
                runs_where(
                    &tx,
                    "status = 'running' AND (worker_id IS NULL OR worker_id <> ?1)
                     AND (lease_until IS NULL OR lease_until < ?2) ORDER BY seq",
                    params![worker_id, ms(now)],
                )?
            };
            let mut changed = Vec::with_capacity(stale.len());
            for run in stale {
                let (status, error) = recovered(&run, action, max_attempts);
                let finished = status.is_terminal().then_some(ms(now));
                tx.prepare_cached(
                    "UPDATE kit_worker_runs SET status = ?2, error = ?3, worker_id = NULL,
                        lease_until = NULL, finished_at = ?4, updated_at = ?5
                     WHERE run_id = ?1 AND status = 'running'",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        run.run_id,
                        status.as_str(),
                        error,
                        finished,
                        ms(now)
                    ])
                })
                .map_err(|e| backend("recovering runs", e))?;
                if let Some(run) = get_run(&tx, &run.run_id)? {
                    changed.push(run);
                }
            }
            tx.commit().map_err(|e| backend("recovering runs", e))?;
            Ok(changed)
        })
        .await
    }
}
