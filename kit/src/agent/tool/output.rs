//! What a tool returns (content, status, a state update) and what a call produced.

use serde::Serialize;
use serde_json::Value;

use crate::agent::AgentStateUpdate;
use crate::message::{Content, Message, ToolCall, ToolStatus};

/// The outcome of running one tool call that did not pause.
#[derive(Debug)]
pub struct ToolExecution {
    /// The tool message answering the call (an error result when it failed).
    pub message: Message,
    /// A state update the tool asked for.
    pub update: Option<AgentStateUpdate>,
}

impl ToolExecution {
    /// An error result answering `call`: the model sees `text`.
    pub fn error(call: &ToolCall, text: impl Into<String>) -> Self {
        let text: String = text.into();
        ToolExecution {
            message: Message::tool_error(&call.id, text).with_name(&call.name),
            update: None,
        }
    }
}

/// What a tool returns.
#[derive(Debug, Default)]
pub struct ToolOutput {
    /// The content the model sees.
    pub content: Content,
    /// Success, or an error the model should react to.
    pub status: ToolStatus,
    /// State the tool writes (todos, files, async tasks, custom channels).
    pub update: Option<AgentStateUpdate>,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Content::Text(text.into()),
            ..Self::default()
        }
    }

    /// A JSON result (a JSON string is sent as plain text).
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_value(value) {
            Ok(Value::String(s)) => Self::text(s),
            Ok(v) => Self::text(v.to_string()),
            Err(e) => Self::error(format!("the tool's result could not be serialised: {e}")),
        }
    }

    /// An error result: the model is told `text` and that the call failed.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Content::Text(text.into()),
            status: ToolStatus::Error,
            update: None,
        }
    }

    /// Adds a state update.
    #[must_use]
    pub fn with_update(mut self, update: AgentStateUpdate) -> Self {
        self.update = Some(update);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::text(s)
    }
}

impl From<Value> for ToolOutput {
    fn from(v: Value) -> Self {
        ToolOutput::json(&v)
    }
}
