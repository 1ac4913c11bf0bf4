//! Trace options accepted by graph, agent, model and tool calls.

use serde_json::{Map, Value};

/// What to record about a run in its trace.
///
/// ```
/// let opts = kit::trace::TraceOptions::new()
///     .name("support-chat")
///     .user_id("u-42")
///     .field("tenant", "acme");
/// assert_eq!(opts.user_id.as_deref(), Some("u-42"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceOptions {
    /// Display name of the root run.
    pub name: Option<String>,
    /// Conversation or checkpoint thread id.
    pub thread_id: Option<String>,
    /// Authenticated end-user id.
    pub user_id: Option<String>,
    /// Browser or session id.
    pub session_id: Option<String>,
    /// Workflow mode label (chat, report, background job, ...).
    pub execution_mode: Option<String>,
    /// Deployment environment; exported only when given.
    pub environment: Option<String>,
    /// Flat, indexed custom dimensions (values become strings; see the trace docs for the rules).
    pub fields: Map<String, Value>,
    /// Non-indexed details.
    pub metadata: Map<String, Value>,
    /// `false` suppresses this call's run (and its children) in the trace.
    pub enabled: Option<bool>,
}

impl TraceOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options that suppress the call's run (`trace: false`).
    pub fn disabled() -> Self {
        TraceOptions {
            enabled: Some(false),
            ..Self::default()
        }
    }

    /// Sets the root run's display name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the thread id.
    #[must_use]
    pub fn thread_id(mut self, id: impl Into<String>) -> Self {
        self.thread_id = Some(id.into());
        self
    }

    /// Sets the user id.
    #[must_use]
    pub fn user_id(mut self, id: impl Into<String>) -> Self {
        self.user_id = Some(id.into());
        self
    }

    /// Sets the session id.
    #[must_use]
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Sets the execution mode.
    #[must_use]
    pub fn execution_mode(mut self, mode: impl Into<String>) -> Self {
        self.execution_mode = Some(mode.into());
        self
    }

    /// Sets the environment.
    #[must_use]
    pub fn environment(mut self, env: impl Into<String>) -> Self {
        self.environment = Some(env.into());
        self
    }

    /// Adds a custom field.
    #[must_use]
    pub fn field(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    /// Adds a metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// True unless the options suppress the run.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }
}
