//! Errors of building and running graphs.

use crate::checkpoint::{CheckpointError, MultitaskStrategy};
use crate::state::StateError;

/// A boxed error from user code.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A graph could not be built, or a run failed.
///
/// An interrupt is not an error: it is [`Outcome::Interrupted`](crate::Outcome::Interrupted).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The graph definition is invalid (found by the builder at compile time of the graph).
    #[error("invalid graph `{graph}`: {message}")]
    Invalid {
        /// The graph's name.
        graph: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A node returned an error. The writes of nodes that succeeded in the same superstep are
    /// kept (with a checkpointer), and resuming re-runs only the failed node.
    #[error("node `{node}` failed in step {step}: {source}")]
    NodeFailed {
        /// The node.
        node: String,
        /// The superstep.
        step: i64,
        /// The node's error.
        #[source]
        source: BoxError,
    },
    /// The state rejected a superstep's updates (for example two writes to a last-value field).
    #[error("step {step}: {source}")]
    State {
        /// The superstep.
        step: i64,
        /// What the state rejected.
        #[source]
        source: StateError,
    },
    /// The run took more supersteps than allowed.
    #[error(
        "recursion limit of {limit} supersteps reached without hitting a stop condition; the graph \
         probably loops. Raise it with `RunOptions::recursion_limit` if the run is legitimately \
         that long"
    )]
    RecursionLimit {
        /// The limit.
        limit: usize,
    },
    /// A node with only conditional edges matched none of them.
    #[error(
        "no outgoing edge of node `{node}` matched the state after step {step}; add a `when` \
         condition for this case or an unconditional edge"
    )]
    NoRoute {
        /// The node.
        node: String,
        /// The superstep.
        step: i64,
    },
    /// A route, `goto` or `Send` named a node the graph does not have.
    #[error("node `{from}` routed to unknown node `{target}`; the graph has: {known}")]
    UnknownNode {
        /// Who routed.
        from: String,
        /// The unknown name.
        target: String,
        /// The node names, comma separated.
        known: String,
    },
    /// A node called `interrupt` but the run cannot be resumed.
    #[error(
        "node `{node}` called interrupt() but the run has no checkpointer and thread id to come \
         back to; give the graph a checkpointer (e.g. MemoryCheckpointer) and pass \
         `RunOptions::thread_id`"
    )]
    InterruptWithoutCheckpointer {
        /// The node.
        node: String,
    },
    /// `resume` was called on a thread with nothing to resume.
    #[error("{0}")]
    Resume(String),
    /// The run needs a thread id (resume, state history, update_state).
    #[error("{0} needs a thread id: pass `RunOptions::thread_id`")]
    MissingThread(&'static str),
    /// The run needs a checkpointer.
    #[error("{0} needs a checkpointer: give the graph one or pass `RunOptions::checkpointer`")]
    MissingCheckpointer(&'static str),
    /// Storing or loading a checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// A run option is out of range.
    #[error("invalid run options: {0}")]
    InvalidOptions(String),
    /// [`MultitaskStrategy::Reject`]: another run holds the thread.
    #[error(
        "thread `{thread_id}` is busy with run `{holder}` and this run's multitask strategy is \
         `reject`; wait until it is idle (`thread_activity` tells), or run with the strategy \
         `enqueue`, `interrupt` or `rollback`"
    )]
    ThreadBusy {
        /// The thread.
        thread_id: String,
        /// The run holding it: the `run_id` of that run's events.
        holder: String,
    },
    /// A newer run on the same thread stopped this one ([`MultitaskStrategy::Interrupt`] or
    /// [`MultitaskStrategy::Rollback`]).
    #[error(
        "the run on thread `{thread_id}` was stopped by a newer run on the thread (multitask \
         strategy `{strategy}`); {}. Its input was not answered: send it again if it still \
         matters",
        if *strategy == MultitaskStrategy::Rollback {
            "the checkpoints it wrote are deleted by the newer run"
        } else {
            "the steps it completed are kept"
        }
    )]
    Preempted {
        /// The thread.
        thread_id: String,
        /// How it was stopped.
        strategy: MultitaskStrategy,
    },
    /// The run could not renew its lease on the thread in time, so another run may hold it
    /// now: the run stopped rather than write beside it.
    #[error(
        "the run lost its lease on thread `{thread_id}`: it was not renewed within its time to \
         live ({ttl:?}) and another run may have taken the thread, so the run stopped; the \
         steps it completed are kept. Raise `LeaseOptions::ttl` if the process or the \
         checkpointer stalls for that long"
    )]
    LeaseLost {
        /// The thread.
        thread_id: String,
        /// The lease's time to live.
        ttl: std::time::Duration,
    },
}

impl GraphError {
    /// True for [`GraphError::Checkpoint`] with a [`CheckpointError::Conflict`]: another writer
    /// advanced the thread.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            GraphError::Checkpoint(CheckpointError::Conflict { .. })
        )
    }

    /// True when the run was refused because its thread is busy ([`GraphError::ThreadBusy`]).
    pub fn is_thread_busy(&self) -> bool {
        matches!(self, GraphError::ThreadBusy { .. })
    }

    /// True when the run was cancelled ([`CancelToken`](super::CancelToken)).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, GraphError::Cancelled)
    }

    /// The error a node returned, if this is a node failure.
    pub fn node_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            GraphError::NodeFailed { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }

    /// A short machine-readable kind, used in events and traces.
    pub fn kind(&self) -> &'static str {
        match self {
            GraphError::Invalid { .. } => "invalid_graph",
            GraphError::NodeFailed { .. } => "node_failed",
            GraphError::State { .. } => "invalid_update",
            GraphError::RecursionLimit { .. } => "recursion_limit",
            GraphError::NoRoute { .. } => "no_route",
            GraphError::UnknownNode { .. } => "unknown_node",
            GraphError::InterruptWithoutCheckpointer { .. } => "interrupt_without_checkpointer",
            GraphError::Resume(_) => "resume",
            GraphError::MissingThread(_) => "missing_thread",
            GraphError::MissingCheckpointer(_) => "missing_checkpointer",
            GraphError::Checkpoint(_) => "checkpoint",
            GraphError::Cancelled => "cancelled",
            GraphError::InvalidOptions(_) => "invalid_options",
            GraphError::ThreadBusy { .. } => "thread_busy",
            GraphError::Preempted { .. } => "preempted",
            GraphError::LeaseLost { .. } => "lease_lost",
        }
    }
}
