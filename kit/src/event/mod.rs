//! Streamed events: one envelope type for graphs, agents and subagents.
//!
//! `stream_events` on a [`Graph`](crate::Graph) or an [`Agent`](crate::Agent) yields [`Event`]s.
//! Every event serialises to JSON with the fields `event`, `data`, `name`, `run_id`,
//! `parent_ids` and `metadata` (`node`, `step`, `thread_id`, `namespace`, `tool_call_id`).
//!
//! # Catalog
//!
//! The payloads are typed: [`EventData`] has one variant per row, and a test checks this table
//! against it.
//!
//! | `event` | `name` | `data` | when |
//! |---|---|---|---|
//! | `run_start` | graph or agent name | `{"input": update}`, or `{"resume": true}` when resuming | the invocation begins |
//! | `node_start` | node name | `{"task_id"}` | a node (task) starts in a superstep |
//! | `node_end` | node name | `{"update": update}` (the per-node *updates* mode), with `"cached": true` when it came from the node's cache | a node finished |
//! | `node_retry` | node name | `{"task_id", "attempt", "error", "delay_ms"}` | a node failed and is run again (its [`RetryPolicy`](crate::graph::RetryPolicy)); `attempt` is the one about to start |
//! | `values` | graph name | the whole state | after each superstep, when asked for with [`StreamMode::Values`] or [`RunOptions::stream_values`](crate::RunOptions::stream_values) |
//! | `custom` | the name the node chose | the node's payload | [`NodeContext::emit`](crate::graph::NodeContext::emit) |
//! | `checkpoint` | graph name | `{"checkpoint_id", "step"}` | a checkpoint became durable: after the `node_end` events of its step; with `Durability::Async` a slow write is reported a step later, with `Durability::Exit` one checkpoint is reported at the end |
//! | `model_start` | model name | `{"provider", "model", "messages", "tools"}` | an agent calls its model |
//! | `model_delta` | model name | `{"text"}` or `{"tool_call": {index, id, name, args}}` | a streamed token / tool-call chunk |
//! | `model_end` | model name | `{"message", "usage"}` | the model answered |
//! | `tool_start` | tool name | `{"args", "tool_call_id"}` | a tool call starts (`metadata.tool_call_id` set) |
//! | `tool_end` | tool name | `{"result", "status", "tool_call_id"}` | a tool call finished |
//! | `middleware` | `<middleware>.<hook>` | what the hook did | a middleware hook ran and changed something |
//! | `middleware` | `<middleware>.<what>` | the report's details | a middleware reports what it did around a call: `ModelFallbackMiddleware.fallback`, `ModelRetryMiddleware.retry`, `BudgetMiddleware.remaining`, … (see each middleware) |
//! | `interrupt` | graph or agent name | `{"interrupts": [{id, value, node}]}` | the run paused for input |
//! | `error` | graph or agent name | `{"message", "kind"}` | the run failed |
//! | `cancelled` | graph or agent name | `{"reason"}` | the run was cancelled ([`CancelToken`](crate::graph::CancelToken)); the last event of the run |
//! | `run_end` | graph or agent name | `{"status": "done", "output"}` or `{"status": "interrupted", "interrupts"}` | the invocation ended |
//!
//! [`RunOptions::stream_mode`](crate::RunOptions::stream_mode) narrows a stream to the kinds of
//! some [`StreamMode`]s, and a run then builds no other event.
//!
//! Events from a subagent carry its path in `metadata.namespace` (for example
//! `["task:researcher:call_1"]`: the `task` tool, the subagent, the call) and the parent's tool
//! call id in `metadata.tool_call_id`, so every token can be attributed to the agent that
//! produced it.

mod data;
mod lazy;
mod mode;
mod sink;

pub use data::{EventData, ModelDelta, RunEndStatus, ToolCallDelta};
pub use lazy::LazyJson;
pub(crate) use mode::EventKinds;
pub use mode::StreamMode;
pub use sink::{EventFilter, EventSink, EventStream};
pub(crate) use sink::{chain, stream_from};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kind of an [`Event`]; serialised as the snake_case `event` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A graph or agent invocation began.
    RunStart,
    /// A node started.
    NodeStart,
    /// A node finished; `data.update` is what it wrote.
    NodeEnd,
    /// A node failed and is about to run again.
    NodeRetry,
    /// The whole state after a superstep.
    Values,
    /// A custom event written by a node.
    Custom,
    /// A checkpoint was written.
    Checkpoint,
    /// A model call began.
    ModelStart,
    /// A streamed chunk of a model answer.
    ModelDelta,
    /// A model call finished.
    ModelEnd,
    /// A tool call began.
    ToolStart,
    /// A tool call finished.
    ToolEnd,
    /// A middleware hook changed something.
    Middleware,
    /// The run paused on an interrupt.
    Interrupt,
    /// The run failed.
    Error,
    /// The run was cancelled.
    Cancelled,
    /// The invocation ended.
    RunEnd,
}

impl EventKind {
    /// The `event` string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStart => "run_start",
            EventKind::NodeStart => "node_start",
            EventKind::NodeEnd => "node_end",
            EventKind::NodeRetry => "node_retry",
            EventKind::Values => "values",
            EventKind::Custom => "custom",
            EventKind::Checkpoint => "checkpoint",
            EventKind::ModelStart => "model_start",
            EventKind::ModelDelta => "model_delta",
            EventKind::ModelEnd => "model_end",
            EventKind::ToolStart => "tool_start",
            EventKind::ToolEnd => "tool_end",
            EventKind::Middleware => "middleware",
            EventKind::Interrupt => "interrupt",
            EventKind::Error => "error",
            EventKind::Cancelled => "cancelled",
            EventKind::RunEnd => "run_end",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an event comes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventMetadata {
    /// The node that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The superstep number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The thread id of the run, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The path of subgraphs / subagents, outermost first; empty at the top level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace: Vec<String>,
    /// The tool call this event belongs to (tool events, and everything a subagent started by
    /// that call emits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// One streamed event. See the [module docs](self) for the catalog.
///
/// It serialises to `{"event", "data", "name", "run_id", "parent_ids", "metadata"}`: `event`
/// and `data` come from the typed [`EventData`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What happened, typed: the `event` and `data` fields.
    #[serde(flatten)]
    pub data: EventData,
    /// The graph, node, model, tool or middleware it concerns.
    pub name: String,
    /// The id of the run (invocation, node task, model or tool call) it concerns.
    pub run_id: String,
    /// The ids of the enclosing runs, outermost first.
    pub parent_ids: Vec<String>,
    /// Where it comes from.
    pub metadata: EventMetadata,
}

impl Event {
    /// An event about `name`, in run `run_id`, with no parents and no metadata yet.
    pub fn new(data: EventData, name: impl Into<String>, run_id: impl Into<String>) -> Self {
        Event {
            data,
            name: name.into(),
            run_id: run_id.into(),
            parent_ids: Vec::new(),
            metadata: EventMetadata::default(),
        }
    }

    /// A run failed: an `error` event with the error's message and kind (one constructor for
    /// graphs and agents, so the shape never drifts).
    pub fn error(
        name: impl Into<String>,
        message: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self::new(
            EventData::Error {
                message: message.into(),
                kind: kind.into(),
            },
            name,
            crate::ids::random(),
        )
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.data.kind()
    }

    /// The event as a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
