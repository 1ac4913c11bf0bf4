//! Where a worker keeps its runs and threads: the [`RunStore`] trait and its back-ends.
//!
//! | back-end | feature | use it for |
//! |---|---|---|
//! | `SqliteRunStore` | `sqlite` (on by default) | one worker process; a file survives restarts, `:memory:` does not |
//! | `PostgresRunStore` | `postgres` | several worker processes on several machines sharing one queue |
//!
//! Both keep two tables, `kit_worker_threads` (one row per thread: owner, metadata, latest
//! values) and `kit_worker_runs` (one row per run: owner, status, input, output, error, lease).
//! They can live in the same database as a checkpointer; the table names do not collide.
//!
//! # Owners
//!
//! Every thread and run records the [`Identity`](crate::server::Identity) that created it in
//! its `owner` column; a run's owner is its thread's. Stores created before owners were
//! recorded gain the column when opened (`ALTER TABLE .. ADD COLUMN owner .. DEFAULT ''`):
//! their threads belong to the shared identity, which is what their tokens act as.
//!
//! # The queue
//!
//! A run is created `pending`. [`RunStore::claim`] moves the oldest claimable pending runs to
//! `running` for one worker, with a lease (a deadline the worker keeps pushing forward with
//! [`RunStore::renew`] while it executes them). A run is claimable when no run of its thread is
//! `running` and no older run of its thread is still `pending`: the runs of one thread execute
//! one at a time, in order, while different threads run in parallel. PostgreSQL claims with
//! `FOR UPDATE SKIP LOCKED`, so several workers never claim the same run.
//!
//! # Recovery
//!
//! A worker that dies leaves its runs `running`. [`RunStore::recover`] finds them — every
//! `running` run of a store that belongs to one process (SQLite), or the runs whose lease has
//! expired (PostgreSQL) — and either puts them back in the queue (they resume from the thread's
//! checkpoint) or fails them with an explicit error, per [`Recovery`](super::Recovery).

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod batch;
mod events;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::PostgresRunStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRunStore;

#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused_imports)
)]
pub(crate) use events::NOTICE_CAPACITY;
#[cfg(feature = "postgres")]
pub(crate) use events::NOTIFY_CHANNEL;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use events::parse_namespace;
pub use events::{NewEvent, StoredEvent};

use serde_json::Value;
use tokio::sync::broadcast;

/// The columns of a run row, in the order both SQL stores read them.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const RUN_COLUMNS: &str = "run_id, thread_id, graph_id, status, input_kind, input, output, error, \
     metadata, multitask_strategy, attempts, cancel_requested, worker_id, created_at, \
     updated_at, started_at, finished_at, owner";

/// The status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting in the queue.
    Pending,
    /// Executing on a worker.
    Running,
    /// Finished; `values` (and `result` for agents) are set.
    Success,
    /// Failed; `error` says why.
    Error,
    /// Ran longer than the worker's run timeout.
    Timeout,
    /// Paused for human input (an `interrupt`); `interrupts` says what it waits for.
    Interrupted,
    /// Cancelled (by a cancel request or an interrupting follow-up).
    Cancelled,
}

impl RunStatus {
    /// The name used in the protocol and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "success" => RunStatus::Success,
            "error" => RunStatus::Error,
            "timeout" => RunStatus::Timeout,
            "interrupted" => RunStatus::Interrupted,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }

    /// True once the run can no longer change.
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Pending | RunStatus::Running)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run executes.
#[derive(Debug, Clone, PartialEq)]
pub enum RunInput {
    /// New input for the thread (`{"messages": [...]}` for agents, the state update for
    /// graphs).
    Input(Value),
    /// Answers to the interrupts the thread is paused on (`null` continues a static pause).
    Resume(Value),
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
impl RunInput {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            RunInput::Input(_) => "input",
            RunInput::Resume(_) => "resume",
        }
    }

    pub(crate) fn value(&self) -> &Value {
        match self {
            RunInput::Input(v) | RunInput::Resume(v) => v,
        }
    }

    pub(crate) fn from_parts(kind: &str, value: Value) -> Self {
        match kind {
            "resume" => RunInput::Resume(value),
            _ => RunInput::Input(value),
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// The thread it runs on.
    pub thread_id: String,
    /// The hosted graph (the protocol's `assistant_id`).
    pub graph_id: String,
    /// The status.
    pub status: RunStatus,
    /// What it executes.
    pub input: RunInput,
    /// What it produced: `{"values": .., "result": .., "interrupts": [..]}` once finished.
    pub output: Option<Value>,
    /// Why it failed, for `error` and `timeout`.
    pub error: Option<String>,
    /// Free-form metadata given at creation.
    pub metadata: Value,
    /// How follow-ups were to be handled (`enqueue` or `interrupt`), when given.
    pub multitask_strategy: Option<String>,
    /// How many times a worker started executing it (more than one after a recovery).
    pub attempts: u32,
    /// A cancel was asked for while it was running.
    pub cancel_requested: bool,
    /// The worker executing it (or that executed it last).
    pub worker_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_at: u64,
    /// When a worker started it (last attempt).
    pub started_at: Option<u64>,
    /// When it reached a terminal status.
    pub finished_at: Option<u64>,
    /// The identity that created it (the owner of its thread); empty for
    /// [`Identity::shared`](crate::server::Identity::shared).
    pub owner: String,
}

/// A thread as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// The thread id.
    pub thread_id: String,
    /// The graph its runs use, once a run was created on it.
    pub graph_id: Option<String>,
    /// Free-form metadata given at creation.
    pub metadata: Value,
    /// The state values after its latest finished run, if any.
    pub values: Option<Value>,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_at: u64,
    /// The identity that created it; only that identity sees it. Empty for
    /// [`Identity::shared`](crate::server::Identity::shared).
    pub owner: String,
}

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// The run id (unique).
    pub run_id: String,
    /// The thread; created when missing.
    pub thread_id: String,
    /// The hosted graph.
    pub graph_id: String,
    /// What to execute.
    pub input: RunInput,
    /// Free-form metadata.
    pub metadata: Value,
    /// The follow-up strategy it was created with, if any.
    pub multitask_strategy: Option<String>,
    /// The identity creating it. A new thread gets this owner; an existing thread must have
    /// it, or the run is refused with [`StoreError::ForeignThread`].
    pub owner: String,
}

/// How a run ended, as the worker reports it.
#[derive(Debug, Clone)]
pub struct Finish {
    /// A terminal status.
    pub status: RunStatus,
    /// The output (`values`, `result`, `interrupts`).
    pub output: Option<Value>,
    /// The error text for `error` and `timeout`.
    pub error: Option<String>,
    /// Events appended to the thread's log in the same transaction (the run's last ones:
    /// its final values, what it waits for, its lifecycle end), so a reader who sees them
    /// also sees the run ended.
    pub events: Vec<NewEvent>,
}

/// The run store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("the worker's run store failed while {op}: {message}")]
    Backend {
        /// What the store was doing.
        op: String,
        /// What went wrong and what to check.
        message: String,
    },
    /// A stored row could not be read back.
    #[error(
        "the worker's run store holds a corrupt row ({0}); the database was changed by hand or by a newer kit"
    )]
    Corrupt(String),
    /// The tables were made by a newer kit, whose layout this build would misread.
    #[error(
        "the worker's tables have schema version {found}, but this kit supports up to \
         {supported}; upgrade kit, or give this worker a schema of its own"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// A run with this id already exists.
    #[error("a run with id `{0}` already exists")]
    DuplicateRun(String),
    /// The thread exists and belongs to another identity. Servers answer it exactly as a
    /// missing thread, so that ids of other tenants cannot be probed.
    #[error(
        "thread `{0}` is owned by another identity; use a thread of your own, or omit the id \
         for a fresh one"
    )]
    ForeignThread(String),
    /// The thread belongs to another graph.
    #[error(
        "thread `{thread_id}` belongs to graph `{existing}`, not `{requested}`; start a new \
         thread for `{requested}`"
    )]
    GraphMismatch {
        /// The thread.
        thread_id: String,
        /// The graph it belongs to.
        existing: String,
        /// The graph asked for.
        requested: String,
    },
}

/// What [`RunStore::recover`] does with a run left `running` by a dead worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoverAction {
    /// Back to `pending` (the next attempt resumes from the thread's checkpoint).
    Requeue,
    /// `error`, with an explanation.
    Fail,
}

/// Storage of a worker's runs and threads.
///
/// Implementations must make [`claim`](Self::claim) atomic: a run is handed to one worker
/// only, and a thread never has two runs `running` at once.
#[crate::async_trait]
pub trait RunStore: Send + Sync + 'static {
    /// True when several worker processes may use this store at once (runs of a worker are then
    /// recovered only once their lease expired); false when the store belongs to one process
    /// (every `running` run found at start-up was left by a dead worker).
    fn shared(&self) -> bool;

    /// Creates a thread owned by `owner`, or returns the existing one with this id (whatever
    /// its owner: the caller compares).
    async fn create_thread(
        &self,
        thread_id: &str,
        owner: &str,
        metadata: Value,
    ) -> Result<ThreadRecord, StoreError>;

    /// A thread by id.
    async fn get_thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError>;

    /// Creates a `pending` run (and its thread, owned by the run's owner, when missing). Fails
    /// with [`StoreError::ForeignThread`] when the thread has another owner, and with
    /// [`StoreError::GraphMismatch`] when it already runs another graph. The check and the
    /// insert are one transaction.
    async fn create_run(&self, run: NewRun) -> Result<RunRecord, StoreError>;

    /// A run by id.
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// The runs of a thread, newest first.
    async fn thread_runs(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, StoreError>;

    /// The runs of a thread that have not ended (`pending` or `running`), oldest first. A new
    /// run on a thread reads them, so the back-ends answer from an index of those alone: the
    /// cost does not grow with the thread's history. The default reads the 100 newest runs.
    async fn active_thread_runs(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let mut runs = self.thread_runs(thread_id, 100, 0).await?;
        runs.retain(|r| !r.status.is_terminal());
        runs.reverse();
        Ok(runs)
    }

    /// Claims up to `max` claimable pending runs of the given graphs for `worker_id`, oldest
    /// first, with a lease until `lease_until` (ms); they become `running` and their `attempts`
    /// grows by one.
    async fn claim(
        &self,
        worker_id: &str,
        graph_ids: &[String],
        max: usize,
        lease_until: u64,
    ) -> Result<Vec<RunRecord>, StoreError>;

    /// Extends the lease of every run `worker_id` is running; returns the ids of those runs a
    /// cancel was requested for.
    async fn renew(&self, worker_id: &str, lease_until: u64) -> Result<Vec<String>, StoreError>;

    /// Records the end of a run that `worker_id` executes. Returns false (and changes
    /// nothing) when the run is no longer `running` under this worker (it was recovered by
    /// another one). The end is borrowed, so a failed attempt is retried without copying it.
    async fn finish(
        &self,
        run_id: &str,
        worker_id: &str,
        finish: &Finish,
    ) -> Result<bool, StoreError>;

    /// Puts a run `worker_id` is running back in the queue (`pending`, attempt not counted):
    /// used when a worker shuts down in the middle of it.
    async fn release(&self, run_id: &str, worker_id: &str) -> Result<(), StoreError>;

    /// Asks for a run to be cancelled: a `pending` run becomes `cancelled` at once; a
    /// `running` one is flagged (its worker stops it and records `cancelled`). Returns the run
    /// as it is afterwards, `None` for an unknown id.
    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Appends `events` of run `run_id` to the log of `thread_id`, numbered after its last
    /// one (1, 2, 3, … per thread, no gaps); returns the number of the last (0 when `events`
    /// is empty), and wakes [`event_notices`](Self::event_notices) listeners.
    ///
    /// The events are borrowed, so a caller can retry a failed append without copying them
    /// first.
    async fn append_events(
        &self,
        thread_id: &str,
        run_id: &str,
        events: &[NewEvent],
    ) -> Result<u64, StoreError>;

    /// Up to `limit` events of the thread's log numbered above `after`, in order. A first
    /// event numbered above `after + 1` means the ones between were pruned.
    async fn read_events(
        &self,
        thread_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// Deletes the events appended before `before` (ms since the Unix epoch); returns how
    /// many.
    async fn prune_events(&self, before: u64) -> Result<u64, StoreError>;

    /// Thread ids whose log grew: appends in this process, and with a shared store
    /// (PostgreSQL, through `LISTEN`/`NOTIFY`) in every process. A listener that lags gets
    /// [`broadcast::error::RecvError::Lagged`] and should re-read the threads it follows.
    async fn event_notices(&self) -> Result<broadcast::Receiver<String>, StoreError>;

    /// Handles runs left `running` by dead workers: with `all_running`, every `running` run not
    /// held by `worker_id`; otherwise those whose lease ended before `now`. A run with a
    /// cancel request becomes `cancelled`; with [`RecoverAction::Requeue`] a run that has
    /// been attempted fewer than `max_attempts` times goes back to `pending`; every other one
    /// becomes `error` with a message saying its worker stopped. Returns the runs changed.
    async fn recover(
        &self,
        worker_id: &str,
        all_running: bool,
        now: u64,
        action: RecoverAction,
        max_attempts: u32,
    ) -> Result<Vec<RunRecord>, StoreError>;
}

/// What becomes of a run whose worker died: cancelled when a cancel was asked, queued again
/// while it has attempts left and `action` requeues, else failed with the reason.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn recovered(
    run: &RunRecord,
    action: RecoverAction,
    max_attempts: u32,
) -> (RunStatus, Option<String>) {
    let requeue = action == RecoverAction::Requeue;
    if run.cancel_requested {
        (RunStatus::Cancelled, None)
    } else if requeue && run.attempts < max_attempts {
        (RunStatus::Pending, None)
    } else {
        (
            RunStatus::Error,
            Some(abandoned_message(run.attempts, requeue)),
        )
    }
}

/// The error text of a run whose worker died and that is not retried.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
fn abandoned_message(attempts: u32, requeue: bool) -> String {
    if requeue {
        format!(
            "the worker executing this run stopped (crashed or was killed) {attempts} time(s); it \
             was not retried again. Start a new run, or raise the worker's max_attempts"
        )
    } else {
        "the worker executing this run stopped (crashed or was killed) and the worker is \
         configured to fail such runs instead of resuming them; start a new run"
            .to_string()
    }
}
