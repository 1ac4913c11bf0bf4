//! The run record: one node of a trace tree, as exporters receive it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::Usage;

/// What a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// A graph invocation.
    Graph,
    /// An agent invocation.
    Agent,
    /// A graph node (one task of a superstep).
    Node,
    /// A chat model call.
    Model,
    /// A tool call.
    Tool,
    /// A middleware hook.
    Middleware,
    /// A task spawned with [`trace::spawn`](super::spawn).
    Task,
    /// A run made with [`trace::start_run`](super::start_run) or
    /// [`trace::with_run`](super::with_run).
    Custom,
}

impl RunKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Graph => "graph",
            RunKind::Agent => "agent",
            RunKind::Node => "node",
            RunKind::Model => "model",
            RunKind::Tool => "tool",
            RunKind::Middleware => "middleware",
            RunKind::Task => "task",
            RunKind::Custom => "custom",
        }
    }
}

/// Success or failure of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// It finished.
    #[default]
    Ok,
    /// It failed; see `error`.
    Error,
}

/// Details of a model call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Provider name (`openai`, `anthropic`, `scripted`, ...).
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Safe invocation parameters (temperature, max_tokens, timeout, ...; never credentials).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
    /// Token usage, when the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Cost in USD, when the price of the model is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// How structured output was requested (`provider` for a native response format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<String>,
    /// Why the model stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// Details of a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// The model's call id.
    pub call_id: String,
    /// The tool's description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// One finished run: what exporters receive.
///
/// Ids: `id` and `trace_id` are UUIDs (the trace id is the root run's id); exporters derive
/// OTLP trace and span ids from them. Times are Unix nanoseconds. Everything here has already
/// been redacted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// The root run's id.
    pub trace_id: String,
    /// The parent run's id (`None` for the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Display name.
    pub name: String,
    /// What it is.
    pub kind: RunKind,
    /// Start, Unix nanoseconds.
    pub start_ns: u64,
    /// End, Unix nanoseconds.
    pub end_ns: u64,
    /// Success or failure.
    pub status: RunStatus,
    /// The error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Inputs (public arguments only for tools).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub inputs: Value,
    /// Outputs.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub outputs: Value,
    /// Non-indexed details.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The conversation / checkpoint thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The end user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The browser or app session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The workflow mode label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<String>,
    /// The deployment environment (present only when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Indexed custom dimensions (already filtered and stringified).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_fields: BTreeMap<String, String>,
    /// Model details, for model runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    /// Tool details, for tool runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolInfo>,
}

#[cfg(test)]
impl RunRecord {
    /// A finished run (started at 10 ns, ended at 20, ok) with only an id, a name and a kind,
    /// its own trace's root: what a test changes the fields it is about on.
    pub(crate) fn for_test(id: &str, name: &str, kind: RunKind) -> RunRecord {
        RunRecord {
            id: id.into(),
            trace_id: id.into(),
            parent_id: None,
            name: name.into(),
            kind,
            start_ns: 10,
            end_ns: 20,
            status: RunStatus::Ok,
            error: None,
            inputs: Value::Null,
            outputs: Value::Null,
            metadata: Default::default(),
            tags: Vec::new(),
            thread_id: None,
            user_id: None,
            session_id: None,
            execution_mode: None,
            environment: None,
            custom_fields: Default::default(),
            model: None,
            tool: None,
        }
    }
}

impl RunRecord {
    /// About the bytes of a run's text: its strings' lengths, and a few bytes for every other
    /// value. Cheaper than writing it (no escaping, no numbers formatted), and as close as a
    /// bound on memory needs.
    pub(crate) fn approx_bytes(&self) -> usize {
        let mut bytes = self.id.len() + self.trace_id.len() + self.name.len() + 64;
        bytes += self.error.as_ref().map_or(0, String::len);
        bytes += self.tags.iter().map(String::len).sum::<usize>();
        bytes += crate::json::approx_len(&self.inputs) + crate::json::approx_len(&self.outputs);
        for (key, value) in &self.metadata {
            bytes += key.len() + crate::json::approx_len(value);
        }
        bytes
    }

    /// Duration in milliseconds.
    pub fn duration_ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }

    /// The OpenTelemetry GenAI span name: `invoke_agent {name}`, `chat {model}`,
    /// `execute_tool {tool}`, `invoke_workflow {name}`, or the run name.
    pub fn span_name(&self) -> String {
        match self.kind {
            RunKind::Agent => format!("invoke_agent {}", self.name),
            RunKind::Graph => format!("invoke_workflow {}", self.name),
            RunKind::Model => format!(
                "chat {}",
                self.model.as_ref().map(|m| m.model.as_str()).unwrap_or("")
            ),
            RunKind::Tool => format!("execute_tool {}", self.name),
            _ => self.name.clone(),
        }
    }

    /// The OpenTelemetry GenAI operation name, where one applies.
    pub fn operation(&self) -> Option<&'static str> {
        match self.kind {
            RunKind::Agent => Some("invoke_agent"),
            RunKind::Graph => Some("invoke_workflow"),
            RunKind::Model => Some("chat"),
            RunKind::Tool => Some("execute_tool"),
            _ => None,
        }
    }
}
