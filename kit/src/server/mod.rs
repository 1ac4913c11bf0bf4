//! A worker server for async subagents (feature `server`): hosts kit agents and graphs under a
//! `graph_id` and serves the run protocol that [`HttpRunClient`](crate::protocol::HttpRunClient)
//! speaks, plus the part of the LangGraph threads API that Python deepagents calls.
//!
//! ```no_run
//! use kit::server::Worker;
//! use kit::testing::ScriptedModel;
//! use kit::{Agent, Message};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let researcher = Agent::builder()
//!     .name("researcher")
//!     .model(ScriptedModel::new([Message::assistant("Rust was first released in 2015.")]))
//!     .build()?;
//! let worker = Worker::builder()
//!     .agent("research", researcher)
//!     .sqlite("worker.sqlite")?
//!     .capacity(16)
//!     .bearer_token(std::env::var("KIT_WORKER_TOKEN")?)
//!     .build()
//!     .await?;
//! let handle = worker.start("127.0.0.1:8787").await?;
//! println!("worker on {}", handle.url());
//! handle.run_until(tokio::signal::ctrl_c()).await?;
//! # Ok(()) }
//! ```
//!
//! # HTTP API
//!
//! | route | request | answer |
//! |---|---|---|
//! | `POST /runs` | `{"assistant_id", "input": {"messages": [..]}}`; optional `thread_id` (continue a thread), `command: {"resume": ..}` (answer its interrupts), `metadata`, `multitask_strategy` | the run |
//! | `GET /runs/{id}` | — | the run; `id` is a run id, or a thread id meaning its latest run |
//! | `POST /runs/{id}/input` | `{"message": "..."}` (or `{"input": {..}}`); optional `multitask_strategy` | the follow-up run: a new run on the same thread, same `thread_id` |
//! | `POST /runs/{id}/cancel` | — | the run after the cancel (waits up to `cancel_wait` for a running one to stop) |
//! | `GET /ok` | — | `{"ok": true}` (never needs a token) |
//! | `/threads/...` | the LangGraph threads API subset, see below | |
//!
//! A run is `{"run_id", "thread_id", "assistant_id", "status", "created_at", "updated_at",
//! "attempts", "metadata", "multitask_strategy", "links": {"stream"}}` (`links.stream`: the
//! path of its thread's event stream), plus when it has ended: `values` (the
//! thread's state, with `messages` for agents), `result` (an agent's final answer),
//! `interrupts` (what a paused run waits for), `error` (why it failed).
//!
//! Statuses: `pending` (queued) → `running` → `success`, `error`, `timeout`, `interrupted`
//! (paused for human input; resume with `command.resume`) or `cancelled`.
//!
//! Errors are JSON `{"error": code, "message": what is wrong and what to do}`: 400 malformed
//! JSON or fields, 401 missing or wrong bearer token, 404 unknown run, thread, route or
//! `assistant_id`, 409 a thread of another graph, a busy thread with `reject` or a thread id
//! another identity owns, 413 a body
//! over the limit, 422 an input the graph does not accept, 503 a store failure or a worker
//! shutting down. Responses never carry stack traces, SQL or paths; those go to the log
//! (`tracing`).
//!
//! # LangGraph threads API (for Python deepagents)
//!
//! Python deepagents' async subagents call a LangGraph server through the LangGraph SDK; a kit
//! worker serves the part they use, so a deepagents supervisor can delegate to kit agents:
//!
//! | route | what |
//! |---|---|
//! | `POST /threads` | creates a thread (`thread_id`, `metadata`, `if_exists` = `raise` \| `do_nothing`) |
//! | `GET /threads/{thread_id}` | the thread: `status` (`idle`, `busy`, `interrupted`, `error`), `values` (with `messages`), `interrupts` |
//! | `POST /threads/{thread_id}/runs` | queues a run: `assistant_id`, `input` or `command.resume`, `metadata`, `multitask_strategy` (`enqueue`, `interrupt`, `rollback`, `reject`), `if_not_exists` = `create` |
//! | `GET /threads/{thread_id}/runs` | the thread's runs, newest first (`limit`, `offset`) |
//! | `GET /threads/{thread_id}/runs/{run_id}` | one run |
//! | `POST /threads/{thread_id}/runs/{run_id}/cancel` | cancels it (`wait=1` waits for it to stop) |
//! | `POST /threads/{thread_id}/stream` | the thread's events as SSE (Agent Protocol streaming v2): `{"channels", "namespaces"? (at most 64 paths), "depth"?, "since"?}`, resumed after `Last-Event-ID`; `GET` takes the same as query parameters |
//! | `POST /threads/{thread_id}/commands` | `{"id", "method", "params"}`: `run.start`, `input.respond` |
//!
//! Run statuses there follow LangGraph: a cancelled run is `interrupted`, and a run that paused
//! for human input is `success` with its thread `interrupted` (carrying the `interrupts`).

//! # Streams that survive a reconnect
//!
//! Every thread keeps a log of its runs' events in the run store, numbered 1, 2, 3, … per
//! thread: lifecycle (`running`, `completed`, `interrupted`, `failed`), `updates`, `messages`,
//! `tools`, `values`, `input.requested`, `checkpoints`, `custom`. `/threads/{id}/stream`
//! replays it after a cursor and then follows it live; with PostgreSQL any worker serves the
//! stream of a run executing on any other (`LISTEN`/`NOTIFY` wake-ups). A reader holds one page
//! of events in memory whatever its speed. Events older than
//! [`event_retention`](WorkerBuilder::event_retention) are deleted; a reader resuming from
//! before them is told which it missed. A run's events reach the log in batches, at most
//! [`event_linger`](WorkerBuilder::event_linger) (20 ms) after they happen; the last ones are
//! written with the run's end, in the transaction that records it. `/threads/{id}/commands` starts runs and answers
//! interrupts. The client side is [`HttpRunClient::stream_thread`](crate::protocol::HttpRunClient::stream_thread)
//! and [`wait_for_run`](crate::protocol::HttpRunClient::wait_for_run); async subagents use it
//! to hear of a task's end without polling.
//!
//! # Threads and follow-ups
//!
//! Each task is one thread; the runs of a thread execute one at a time, in order, on the
//! worker's checkpointer, so a follow-up continues the conversation. A follow-up
//! (`/input`, or a run on a thread that has one in progress) is queued behind the running run
//! ([`FollowUp::Enqueue`], the default), or cancels it first ([`FollowUp::Interrupt`]); a
//! request may choose with `multitask_strategy`.
//!
//! # Capacity, timeouts, persistence
//!
//! At most [`capacity`](WorkerBuilder::capacity) runs execute at once; the others wait as
//! `pending`. A run's slot frees as soon as it stops executing: the next run is claimed while
//! the end of the last one is written (runs executing plus ends waiting to be written are at
//! most twice the capacity, so a slow store holds claiming back). A run executing longer than [`run_timeout`](WorkerBuilder::run_timeout) is
//! stopped and ends `timeout`. Runs and threads are kept in a [`RunStore`]: SQLite (a file with
//! `WorkerBuilder::sqlite`, in memory by default) or PostgreSQL
//! (`WorkerBuilder::postgres`), where several worker processes share one queue and claim runs
//! with `FOR UPDATE SKIP LOCKED`. Agent and graph state lives in the checkpointer given with
//! [`WorkerBuilder::checkpointer`] (a [`MemoryCheckpointer`](crate::MemoryCheckpointer) by
//! default; give a durable one — `kit::checkpoint::SqliteCheckpointer`,
//! or `PostgresCheckpointer` for several workers —
//! so threads survive restarts and a recovered run continues from its last step).
//!
//! # Crash recovery
//!
//! Every worker process has an id and holds a lease on the runs it executes, renewed every
//! third of [`lease`](WorkerBuilder::lease). When a worker starts, it recovers the runs a dead
//! worker left `running` — all of them with SQLite (a SQLite store belongs to one process),
//! those whose lease expired with PostgreSQL (checked again at every heartbeat, so a live
//! worker also picks up the runs of a dead peer). What happens to them is
//! [`Recovery`]: by default ([`Recovery::Resume`]) they go back to the queue and continue from
//! the thread's last checkpoint (or start over from their input when the run had not written
//! one), up to [`max_attempts`](WorkerBuilder::max_attempts) (3) executions, after which they
//! end `error`; with [`Recovery::Fail`] they end `error` at once with a message saying their
//! worker stopped. A run is never left `running` by a worker that is gone. A run whose cancel
//! was requested ends `cancelled`. A worker that shuts down cleanly
//! ([`WorkerHandle::shutdown`]) puts its executing runs back in the queue; they too continue
//! from their checkpoint. (Every checkpoint a run writes carries its run id under
//! [`RUN_ID_METADATA_KEY`]: that is how a run tells its own progress from an earlier run's.)
//!
//! Resuming re-executes the step that was in progress, so a tool with side effects may run
//! twice; choose [`Recovery::Fail`] when that is not acceptable.
//!
//! # Security
//!
//! With [`bearer_token`](WorkerBuilder::bearer_token), every route except `GET /ok` needs
//! `Authorization: Bearer <token>` (compared in constant time; 401 otherwise).
//!
//! # Tenants
//!
//! An auth hook ([`WorkerBuilder::auth`], any [`Authenticate`]) turns each request into the
//! [`Identity`] it acts as; [`bearer_token_for`](WorkerBuilder::bearer_token_for) maps tokens
//! to identities (the built-in hook, [`BearerTokens`]). Every thread and run records the
//! identity that created it as its owner, and:
//!
//! * an identity sees and touches only what it owns: a run or thread id of another identity is
//!   answered exactly as a missing one (`404`, the same body), on every route that reads,
//!   follows up, cancels or streams;
//! * a thread id another identity owns cannot be created or written into: `POST /runs` and
//!   `POST /threads` answer `409 thread_unavailable` without naming the owner (the store checks
//!   the owner in the same transaction as the insert, so two tenants racing for one id cannot
//!   both win);
//! * tokens given with [`bearer_token`](WorkerBuilder::bearer_token), and every request of a
//!   worker without auth, act as [`Identity::shared`], which owns everything a store held
//!   before owners were recorded.
//!
//! Bodies are
//! limited to [`body_limit`](WorkerBuilder::body_limit) bytes (1 MiB by default; 413 above,
//! and at once — before a byte is read — when `Content-Length` declares more).
//!
//! A client cannot hold the worker: the server itself enforces
//!
//! | limit | default | on breach |
//! |---|---|---|
//! | [`max_connections`](WorkerBuilder::max_connections) | 512 | a further connection is answered `503` and closed |
//! | [`header_read_timeout`](WorkerBuilder::header_read_timeout) | 10 s | the connection is closed (slow headers, and idle time between requests) |
//! | [`body_read_timeout`](WorkerBuilder::body_read_timeout) | 30 s | `408` |
//! | [`idle_timeout`](WorkerBuilder::idle_timeout) | 60 s without a byte either way | the connection is shut down (dropped after twice that) |
//!
//! so idle or stalled connections free their slot, and `GET /ok` answers again as soon as one
//! is free. A thread stream holds its connection (and slot) for as long as its client keeps it
//! open (keep-alive comments keep it from counting as idle): size `max_connections` for the
//! streams you expect. What a reverse proxy (nginx, Envoy, a cloud load balancer) still adds, and what to
//! put in front of a worker reachable from outside loopback:
//!
//! * **TLS.** The server speaks plain HTTP.
//! * **Per-client limits.** The limits above are per worker, not per client: one client with
//!   many addresses can still take every connection slot (each for at most the timeouts), or
//!   send requests as fast as the worker answers them. Rate limiting and per-IP connection caps
//!   belong in the proxy.
//! * **Buffering of slow clients.** A proxy reads slow requests and writes to slow readers
//!   itself, so the worker's slots are held only for the time a request takes to handle.
//! * **Header size policy.** The server refuses heads over hyper's defaults (about 400 KiB, 100
//!   headers); a proxy can enforce a tighter one.
//! * **HTTP/2 and connection reuse** towards many clients, and health-checked failover between
//!   several workers.

mod auth;
mod body;
mod commands;
mod config;
mod cross_site;
mod event_log;
mod hosted;
mod interop;
mod queue;
mod routes;
pub mod store;
mod stream;

pub use auth::{AuthError, Authenticate, BearerTokens, Identity};
/// The head of an HTTP request (method, URI, headers), as an [`Authenticate`] hook sees it.
pub use axum::http::request::Parts as RequestParts;
pub use config::{FollowUp, Recovery, WorkerConfig};
pub use hosted::{Hosted, HostedError, HostedOutput, HostedRun, RUN_ID_METADATA_KEY};
pub(crate) use routes::parse_run_request;
pub use store::{RunInput, RunRecord, RunStatus, RunStore, StoreError, ThreadRecord};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::checkpoint::Checkpointer;
use crate::graph::Graph;
use crate::state::State;
use queue::Shared;

/// The worker could not be built, started or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is not usable.
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The address could not be bound.
    #[error("could not listen on {addr}: {message}; pick a free port or stop what uses it")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What failed.
        message: String,
    },
    /// The run store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The HTTP server stopped with an error.
    #[error("the worker's HTTP server failed: {0}")]
    Serve(String),
}

crate::shared::into_shared! {
    /// What [`WorkerBuilder::store`] accepts: a run store, or one already shared.
    IntoRunStore::into_run_store => RunStore
}

/// Builds a [`Worker`].
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Default)]
pub struct WorkerBuilder {
    graphs: HashMap<String, Arc<dyn Hosted>>,
    duplicate: Option<String>,
    store: Option<Arc<dyn RunStore>>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    config: WorkerConfig,
    tokens: BearerTokens,
    empty_token: bool,
    hook: Option<Arc<dyn Authenticate>>,
    worker_id: Option<String>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("graphs", &self.graphs.keys().collect::<Vec<_>>())
            .field("config", &self.config)
            .field("auth", &(!self.tokens.is_empty() || self.hook.is_some()))
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Hosts an agent under `graph_id` (its input is `{"messages": [...]}`).
    pub fn agent(self, graph_id: impl Into<String>, agent: crate::Agent) -> Self {
        self.host(graph_id, agent)
    }

    /// Hosts a graph under `graph_id` (its input is the state update as JSON).
    pub fn graph<S: State>(self, graph_id: impl Into<String>, graph: Graph<S>) -> Self {
        self.host(graph_id, graph)
    }

    /// Hosts anything implementing [`Hosted`] under `graph_id`.
    pub fn host(mut self, graph_id: impl Into<String>, hosted: impl Hosted) -> Self {
        let id = graph_id.into();
        if self.graphs.insert(id.clone(), Arc::new(hosted)).is_some() {
            self.duplicate = Some(id);
        }
        self
    }

    /// Keeps runs and threads in this store (default: SQLite in memory).
    pub fn store(mut self, store: impl IntoRunStore) -> Self {
        self.store = Some(store.into_run_store());
        self
    }

    /// Keeps runs and threads in the SQLite file at `path` (created if missing).
    #[cfg(feature = "sqlite")]
    pub fn sqlite(self, path: impl AsRef<std::path::Path>) -> Result<Self, ServerError> {
        Ok(self.store(store::SqliteRunStore::open(path)?))
    }

    /// Keeps runs and threads in PostgreSQL at `url`, where several workers share one queue.
    #[cfg(feature = "postgres")]
    pub async fn postgres(self, url: &str) -> Result<Self, ServerError> {
        Ok(self.store(store::PostgresRunStore::connect(url).await?))
    }

    /// The checkpointer threads keep their state in (default: a fresh
    /// [`MemoryCheckpointer`](crate::MemoryCheckpointer), lost when the process ends).
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// How many runs execute at once (default 16); the others wait as `pending`. A run stops
    /// counting once it stops executing, while its end is still being written; runs executing
    /// plus ends waiting to be written are at most twice this (then no run is claimed until
    /// an end is written).
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.config.capacity = capacity;
        self
    }

    /// The longest a run may execute before it is stopped as `timeout` (default 30 min).
    pub fn run_timeout(mut self, timeout: Duration) -> Self {
        self.config.run_timeout = timeout;
        self
    }

    /// What a follow-up does to a run in progress (default [`FollowUp::Enqueue`]).
    pub fn follow_up(mut self, follow_up: FollowUp) -> Self {
        self.config.follow_up = follow_up;
        self
    }

    /// What happens to runs left `running` by a dead worker (default [`Recovery::Resume`]).
    pub fn recovery(mut self, recovery: Recovery) -> Self {
        self.config.recovery = recovery;
        self
    }

    /// How many times one run may be executed before recovery fails it (default 3).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = attempts;
        self
    }

    /// Requires `Authorization: Bearer <token>` on every route but `GET /ok`. Call it again
    /// to accept several tokens (rotation). These tokens all act as one identity,
    /// [`Identity::shared`]: use [`bearer_token_for`](Self::bearer_token_for) to give tenants
    /// tokens of their own.
    pub fn bearer_token(self, token: impl Into<String>) -> Self {
        self.bearer_token_for(token, Identity::shared())
    }

    /// Requires `Authorization: Bearer <token>` on every route but `GET /ok`, and makes
    /// `token` act as `identity`: the owner of the threads and runs its requests create, the
    /// only identity that can see them. Several tokens may map to one identity.
    ///
    /// ```no_run
    /// # use kit::server::{Identity, Worker};
    /// # fn agent() -> kit::Agent { unimplemented!() }
    /// # async fn run() -> Result<(), kit::server::ServerError> {
    /// let worker = Worker::builder()
    ///     .agent("assistant", agent())
    ///     .bearer_token_for("token-of-acme", Identity::new("acme"))
    ///     .bearer_token_for("token-of-globex", Identity::new("globex"))
    ///     .build()
    ///     .await?;
    /// # let _ = worker; Ok(()) }
    /// ```
    pub fn bearer_token_for(mut self, token: impl Into<String>, identity: Identity) -> Self {
        let token = token.into();
        if token.trim().is_empty() {
            self.empty_token = true;
        }
        self.tokens = self.tokens.token(token, identity);
        self
    }

    /// Authenticates every request but `GET /ok` with `hook`: a function from the request's
    /// head to the [`Identity`] it acts as (see [`Authenticate`]). Replaces bearer tokens:
    /// give one or the other.
    pub fn auth(mut self, hook: impl Authenticate) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// The largest request body accepted, in bytes (default 1 MiB); larger ones get 413.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.config.body_limit = bytes;
        self
    }

    /// The lease a worker holds on the runs it executes (default 30 s). Another worker
    /// sharing the store takes a run over only after its lease expired.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How often the queue is checked for runs submitted through other workers (default
    /// 500 ms; runs submitted to this worker start at once).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// How long `POST /runs/{id}/cancel` waits for a running run to stop (default 10 s).
    pub fn cancel_wait(mut self, wait: Duration) -> Self {
        self.config.cancel_wait = wait;
        self
    }

    /// How long a shutdown waits for executing runs to be put back in the queue
    /// (default 10 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.config.shutdown_grace = grace;
        self
    }

    /// How many connections are served at once (default 512); one more is answered `503`
    /// with `Connection: close` at once. Keep it below the process's file-descriptor limit.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.config.max_connections = connections;
        self
    }

    /// How long a request's head may take to arrive (default 10 s), counted from when the
    /// connection opens or its previous answer was sent; a slower client is disconnected.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.config.header_read_timeout = timeout;
        self
    }

    /// How long a request's body may take to arrive (default 30 s); a slower one gets 408.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.config.body_read_timeout = timeout;
        self
    }

    /// How long a connection may move no byte either way (default 60 s) before it is shut
    /// down (a request in progress still gets its answer); after twice that it is dropped.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    /// How long a thread's events stay in its event log (default 1 hour): the window in which
    /// a stream (`/threads/{id}/stream`) can be resumed from its last event id. Older events
    /// are deleted by every worker sharing the store, about every quarter of this; a stream
    /// resumed from a pruned point is told which events it missed.
    pub fn event_retention(mut self, retention: Duration) -> Self {
        self.config.event_retention = retention;
        self
    }

    /// How long a run's events may wait to share one write to its thread's log (default
    /// 20 ms). A run that ends sooner writes all its events with its end, in one transaction;
    /// a longer one writes at most one batch per `linger` while it emits, and a live stream
    /// lags by at most that. Raise it when many runs stream at once on a shared PostgreSQL:
    /// each streaming run costs up to one transaction per `linger`.
    pub fn event_linger(mut self, linger: Duration) -> Self {
        self.config.event_linger = linger;
        self
    }

    /// This process's worker id (default: a random one per start). Runs it executes carry it.
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Checks the configuration and opens the default store.
    pub async fn build(self) -> Result<Worker, ServerError> {
        if let Some(id) = self.duplicate {
            return Err(ServerError::Config(format!(
                "graph id `{id}` is hosted twice; give each hosted graph its own id"
            )));
        }
        if self.graphs.is_empty() {
            return Err(ServerError::Config(
                "the worker hosts nothing; add an agent or a graph with `.agent(..)` or \
                 `.graph(..)`"
                    .into(),
            ));
        }
        let c = &self.config;
        if c.capacity == 0 {
            return Err(ServerError::Config(
                "capacity must be at least 1".to_string(),
            ));
        }
        if c.max_attempts == 0 {
            return Err(ServerError::Config(
                "max_attempts must be at least 1".to_string(),
            ));
        }
        if c.lease < Duration::from_millis(150) {
            return Err(ServerError::Config(
                "the lease must be at least 150 ms (it is renewed every third of it)".to_string(),
            ));
        }
        if c.event_retention.is_zero() {
            return Err(ServerError::Config(
                "event_retention must be more than zero (streams resume from the event log)"
                    .to_string(),
            ));
        }
        if self.empty_token {
            return Err(ServerError::Config(
                "a bearer token is empty; pass a non-empty secret".to_string(),
            ));
        }
        if self.tokens.conflicting_token() {
            return Err(ServerError::Config(
                "one bearer token is given for two different identities; give each identity \
                 tokens of its own"
                    .to_string(),
            ));
        }
        if self.hook.is_some() && !self.tokens.is_empty() {
            return Err(ServerError::Config(
                "both an auth hook (`.auth(..)`) and bearer tokens are configured; the hook \
                 decides alone: check tokens inside it, or drop it"
                    .to_string(),
            ));
        }
        let auth = match self.hook {
            Some(hook) => auth::Auth(Some(hook)),
            None if self.tokens.is_empty() => auth::Auth(None),
            None => auth::Auth(Some(Arc::new(self.tokens))),
        };
        let store = match self.store {
            Some(store) => store,
            None => default_store()?,
        };
        let checkpointer = self
            .checkpointer
            .unwrap_or_else(|| Arc::new(crate::MemoryCheckpointer::new()));
        let worker_id = self
            .worker_id
            .unwrap_or_else(|| format!("worker-{}", crate::ids::random()));
        Ok(Worker {
            shared: Arc::new(Shared::new(
                self.graphs,
                store,
                checkpointer,
                self.config,
                worker_id,
            )),
            auth,
        })
    }
}

#[cfg(feature = "sqlite")]
fn default_store() -> Result<Arc<dyn RunStore>, ServerError> {
    Ok(Arc::new(store::SqliteRunStore::in_memory()?))
}

#[cfg(not(feature = "sqlite"))]
fn default_store() -> Result<Arc<dyn RunStore>, ServerError> {
    Err(ServerError::Config(
        "no run store: enable kit's `sqlite` feature for the default store, or pass one with \
         `.store(..)`"
            .into(),
    ))
}

/// A configured worker, not yet serving. Start it with [`start`](Self::start).
pub struct Worker {
    shared: Arc<Shared>,
    auth: auth::Auth,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("worker_id", &self.shared.worker_id)
            .field("graphs", &self.shared.graph_ids)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Starts building a worker.
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder::default()
    }

    /// This process's worker id.
    pub fn worker_id(&self) -> &str {
        &self.shared.worker_id
    }

    /// The settings.
    pub fn config(&self) -> &WorkerConfig {
        &self.shared.config
    }

    /// Binds `addr` (e.g. `"127.0.0.1:0"` for a free port) and starts serving.
    pub async fn start(
        self,
        addr: impl ToSocketAddrs + std::fmt::Debug,
    ) -> Result<WorkerHandle, ServerError> {
        let shown = format!("{addr:?}");
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| ServerError::Bind {
                addr: shown.trim_matches('"').to_string(),
                message: e.to_string(),
            })?;
        self.start_on(listener).await
    }

    /// Recovers runs left by dead workers, then serves on `listener` and executes runs in the
    /// background until [`WorkerHandle::shutdown`].
    pub async fn start_on(self, listener: TcpListener) -> Result<WorkerHandle, ServerError> {
        let addr = listener.local_addr().map_err(|e| ServerError::Bind {
            addr: "the given listener".into(),
            message: e.to_string(),
        })?;
        self.shared.recover(true).await?;
        let shared = self.shared.clone();
        let scheduler = tokio::spawn(queue::schedule(shared.clone()));
        let heartbeat = tokio::spawn(queue::heartbeat(shared.clone()));
        let app = routes::router(shared.clone(), self.auth);
        let (stop_tx, stop_rx) = watch::channel(false);
        let config = shared.config.clone();
        let limits = crate::listen::Limits {
            max_connections: config.max_connections,
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            overloaded: "{\"error\":\"overloaded\",\"message\":\"the worker serves its maximum \
                         number of connections; retry shortly, or raise the worker's \
                         max_connections\"}",
        };
        let service = hyper_util::service::TowerToHyperService::new(app);
        let server = tokio::spawn(async move {
            crate::listen::serve(listener, service, limits, stop_rx, None).await;
            Ok(())
        });
        tracing::info!(%addr, worker_id = %shared.worker_id, graphs = ?shared.graph_ids, "kit worker serving");
        Ok(WorkerHandle {
            addr,
            shared,
            stop: stop_tx,
            server,
            tasks: vec![scheduler, heartbeat],
        })
    }
}

/// A running worker.
#[derive(Debug)]
pub struct WorkerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    server: JoinHandle<Result<(), ServerError>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

impl WorkerHandle {
    /// The address served.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, e.g. `http://127.0.0.1:8787` (the `url` of an
    /// [`AsyncSpec`](crate::middleware::async_subagents::AsyncSpec)).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// This process's worker id.
    pub fn worker_id(&self) -> &str {
        &self.shared.worker_id
    }

    /// The run store.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.shared.store
    }

    /// Stops serving: no new runs are claimed, executing runs go back to the queue (a later
    /// start resumes them), the HTTP server finishes the requests in flight.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.shared
            .shutdown(self.shared.config.shutdown_grace)
            .await;
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        match self.server.await {
            Ok(result) => result,
            Err(e) => Err(ServerError::Serve(e.to_string())),
        }
    }

    /// Serves until `signal` completes (e.g. `tokio::signal::ctrl_c()`), then shuts down.
    pub async fn run_until<F: std::future::Future + Send>(
        self,
        signal: F,
    ) -> Result<(), ServerError> {
        let _ = signal.await;
        self.shutdown().await
    }
}
