//! A tool failed: a message for the model, invalid arguments, or the pause signal.

use crate::graph::{NodeError, Pause};

/// A tool failed. Any `std::error::Error` converts into it with `?`.
pub enum ToolError {
    /// The tool failed; the message is shown to the model.
    Failed(String),
    /// The arguments were wrong; the message says how.
    InvalidArguments(String),
    /// The tool (or a subagent it runs) paused for outside input: the [`Pause`] signal.
    Interrupted(Pause),
}

impl ToolError {
    /// A failure with a message for the model.
    pub fn new(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// Invalid arguments, with what is wrong.
    pub fn invalid_args(message: impl std::fmt::Display) -> Self {
        ToolError::InvalidArguments(message.to_string())
    }

    /// A short machine-readable kind: `failed`, `invalid_arguments` or `interrupted`. An
    /// error result keeps it in its message's metadata under [`ERROR_KIND_KEY`](super::ERROR_KIND_KEY)
    /// (what tool retry tells retryable failures by).
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::Failed(_) => "failed",
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::Interrupted(_) => "interrupted",
        }
    }

    /// The text the model sees.
    pub fn for_model(&self, tool: &str) -> String {
        match self {
            ToolError::Failed(m) => format!("Error: {m}"),
            ToolError::InvalidArguments(m) => format!(
                "Error: invalid arguments for tool `{tool}`: {m}. Fix the arguments and call \
                 the tool again."
            ),
            ToolError::Interrupted(_) => "interrupted".to_string(),
        }
    }
}

impl std::fmt::Debug for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Failed(m) => write!(f, "Failed({m:?})"),
            ToolError::InvalidArguments(m) => write!(f, "InvalidArguments({m:?})"),
            ToolError::Interrupted(p) => write!(f, "Interrupted({} pending)", p.interrupts().len()),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Failed(m) => f.write_str(m),
            ToolError::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            ToolError::Interrupted(p) => write!(f, "{p}"),
        }
    }
}

/// What a `#[tool]` function's error type must be: anything that converts into a [`ToolError`]
/// (`ToolError` itself, or any `std::error::Error + Send + Sync`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error",
    label = "not convertible into a `ToolError`",
    note = "return `kit::tool::ToolError` (`ToolError::new(\"what went wrong\")`), or any type \
            implementing `std::error::Error + Send + Sync + 'static`"
)]
pub trait IntoToolError {
    /// The tool error the model sees.
    fn into_tool_error(self) -> ToolError;
}

impl<E: Into<ToolError>> IntoToolError for E {
    fn into_tool_error(self) -> ToolError {
        self.into()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(e: E) -> Self {
        ToolError::Failed(e.to_string())
    }
}

impl From<Pause> for ToolError {
    fn from(pause: Pause) -> Self {
        ToolError::Interrupted(pause)
    }
}

impl From<NodeError> for ToolError {
    fn from(e: NodeError) -> Self {
        match e.into_pause() {
            Ok(pause) => ToolError::Interrupted(pause),
            Err(e) => ToolError::Failed(e.to_string()),
        }
    }
}
