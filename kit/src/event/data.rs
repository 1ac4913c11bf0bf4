//! The payload of each kind of event, typed; it serialises to the catalog's `event` and `data`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{EventKind, LazyJson};
use crate::message::{Content, Message, ToolStatus, Usage};

/// What an event says, one variant per kind. Match on it instead of indexing JSON; it
/// serialises to the envelope's `event` and `data` fields exactly as the
/// [catalog](super#catalog) shows.
///
/// ```
/// use kit::event::EventData;
/// use serde_json::json;
///
/// let data = EventData::Checkpoint { checkpoint_id: "c1".into(), step: 3 };
/// assert_eq!(
///     serde_json::to_value(&data).unwrap(),
///     json!({"event": "checkpoint", "data": {"checkpoint_id": "c1", "step": 3}})
/// );
/// assert_eq!(data.to_json(), json!({"checkpoint_id": "c1", "step": 3}));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventData {
    /// A graph or agent invocation began: with its input, or resuming a paused thread.
    RunStart {
        /// The input update (absent when the run resumes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        /// True when the run resumes a thread.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resume: bool,
    },
    /// A node started.
    NodeStart {
        /// The task's id (stable across a resume).
        task_id: String,
    },
    /// A node finished; what it wrote (the per-node *updates* mode).
    NodeEnd {
        /// The node's update: `null`, one update, or a list when it made several. Written as
        /// JSON text when the node ends and read into a `Value` only when used.
        update: LazyJson,
        /// True when the update came from the node's cache (its cache policy), not from
        /// running it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cached: bool,
    },
    /// A node failed and is run again (its retry policy).
    NodeRetry {
        /// The task's id.
        task_id: String,
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        /// Why the previous attempt failed.
        error: String,
        /// The pause before it, in milliseconds.
        delay_ms: u64,
    },
    /// The whole state after a superstep.
    Values(Value),
    /// A node's own event ([`NodeContext::emit`](crate::graph::NodeContext::emit)).
    Custom(Value),
    /// A checkpoint became durable.
    Checkpoint {
        /// Its id.
        checkpoint_id: String,
        /// Its superstep.
        step: i64,
    },
    /// An agent calls its model.
    ModelStart {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// How many messages the request holds.
        messages: usize,
        /// The names of the tools offered.
        tools: Vec<String>,
    },
    /// A streamed piece of the model's answer.
    ModelDelta(ModelDelta),
    /// The model answered.
    ModelEnd {
        /// The whole answer (boxed: events move through channels, and an answer is large).
        message: Box<Message>,
        /// Its token usage, when known.
        usage: Option<Usage>,
    },
    /// A tool call starts.
    ToolStart {
        /// The arguments.
        args: Value,
        /// The call id.
        tool_call_id: String,
    },
    /// A tool call finished.
    ToolEnd {
        /// The result the model sees.
        result: Content,
        /// Success or error.
        status: Option<ToolStatus>,
        /// The call id.
        tool_call_id: String,
    },
    /// A middleware hook changed something, or a middleware reports what it did.
    Middleware(Value),
    /// The run paused for outside input.
    Interrupt {
        /// The pending interrupts (`[{id, value, node}]`).
        interrupts: Value,
    },
    /// The run failed.
    Error {
        /// What went wrong.
        message: String,
        /// The error's kind (`node_failed`, `pii_detected`, …).
        kind: String,
    },
    /// The run was cancelled; nothing follows.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The invocation ended.
    RunEnd {
        /// `done` or `interrupted`.
        status: RunEndStatus,
        /// The final state, when done.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        /// The pending interrupts, when interrupted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupts: Option<Value>,
    },
}

/// A streamed piece of a model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ModelDelta {
    /// Text to append (`{"text"}`).
    Text {
        /// The text.
        text: String,
    },
    /// A piece of a tool call (`{"tool_call": {index, id, name, args}}`).
    ToolCall {
        /// The piece.
        tool_call: ToolCallDelta,
    },
    /// Reasoning text to append (`{"reasoning"}`): what the model thinks before it answers,
    /// for providers that show it.
    Reasoning {
        /// The text.
        reasoning: String,
    },
}

/// A piece of a streamed tool call: the first piece has the id and the name, the others
/// argument text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the answer it belongs to.
    pub index: usize,
    /// The call id (first piece).
    pub id: Option<String>,
    /// The tool name (first piece).
    pub name: Option<String>,
    /// Argument text to append.
    pub args: String,
}

/// How an invocation ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEndStatus {
    /// It finished.
    Done,
    /// It paused for outside input.
    Interrupted,
}

impl EventData {
    /// The kind of event.
    pub fn kind(&self) -> EventKind {
        match self {
            EventData::RunStart { .. } => EventKind::RunStart,
            EventData::NodeStart { .. } => EventKind::NodeStart,
            EventData::NodeEnd { .. } => EventKind::NodeEnd,
            EventData::NodeRetry { .. } => EventKind::NodeRetry,
            EventData::Values(_) => EventKind::Values,
            EventData::Custom(_) => EventKind::Custom,
            EventData::Checkpoint { .. } => EventKind::Checkpoint,
            EventData::ModelStart { .. } => EventKind::ModelStart,
            EventData::ModelDelta(_) => EventKind::ModelDelta,
            EventData::ModelEnd { .. } => EventKind::ModelEnd,
            EventData::ToolStart { .. } => EventKind::ToolStart,
            EventData::ToolEnd { .. } => EventKind::ToolEnd,
            EventData::Middleware(_) => EventKind::Middleware,
            EventData::Interrupt { .. } => EventKind::Interrupt,
            EventData::Error { .. } => EventKind::Error,
            EventData::Cancelled { .. } => EventKind::Cancelled,
            EventData::RunEnd { .. } => EventKind::RunEnd,
        }
    }

    /// The `data` field as JSON.
    pub fn to_json(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => map.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// The payload of a `kind` event from its `data` JSON (as [`to_json`](Self::to_json)
    /// writes it); an error says which field does not fit.
    pub fn from_json(kind: EventKind, data: Value) -> Result<Self, serde_json::Error> {
        let mut envelope = serde_json::Map::with_capacity(2);
        envelope.insert("event".into(), Value::String(kind.as_str().to_string()));
        envelope.insert("data".into(), data);
        serde_json::from_value(Value::Object(envelope))
    }

    /// A streamed text delta.
    pub fn text(text: impl Into<String>) -> Self {
        EventData::ModelDelta(ModelDelta::Text { text: text.into() })
    }
}
