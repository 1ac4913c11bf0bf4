//! What a tool knows about its call: the call id, the agent state, the node context.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::ToolError;
use crate::agent::AgentState;
use crate::graph::NodeContext;

/// What a tool knows about the call: the call id, the agent's state at the model turn that made
/// the call, and the node context (for interrupts, events and subagents).
#[derive(Clone)]
pub struct ToolContext {
    pub(super) call_id: String,
    pub(super) state: Arc<AgentState>,
    pub(super) node: Option<NodeContext>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context inside an agent run.
    pub fn new(
        call_id: impl Into<String>,
        state: Arc<AgentState>,
        node: Option<NodeContext>,
    ) -> Self {
        ToolContext {
            call_id: call_id.into(),
            state,
            node,
        }
    }

    /// A context outside any agent (tests, direct calls).
    pub fn detached() -> Self {
        Self::new("call_detached", Arc::new(AgentState::default()), None)
    }

    /// The id of the call being answered.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The agent state the call was made in.
    pub fn state(&self) -> &AgentState {
        &self.state
    }

    /// The shared state snapshot.
    pub fn state_arc(&self) -> &Arc<AgentState> {
        &self.state
    }

    /// The graph node context, inside an agent run.
    pub fn node(&self) -> Option<&NodeContext> {
        self.node.as_ref()
    }

    /// The long-term store of the run, if any (see [`NodeContext::store`]): memory that
    /// outlives the thread.
    ///
    /// ```
    /// use kit::store::Namespace;
    /// use kit::tool::{ToolContext, ToolError};
    /// use serde_json::json;
    ///
    /// /// Remembers a fact about the user.
    /// #[kit::tool]
    /// async fn remember(ctx: ToolContext, fact: String) -> Result<String, ToolError> {
    ///     let store = ctx.store().ok_or_else(|| ToolError::new("this agent has no store"))?;
    ///     let ns = Namespace::new(["memories"])?;
    ///     store.put(&ns, &kit::ids::random(), json!({"text": fact})).await?;
    ///     Ok("Remembered.".to_string())
    /// }
    /// ```
    pub fn store(&self) -> Option<&Arc<dyn crate::store::Store>> {
        self.node.as_ref()?.store()
    }

    /// Pauses the run for outside input (see [`NodeContext::interrupt`]).
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, ToolError> {
        match &self.node {
            Some(node) => node.interrupt(value).map_err(ToolError::from),
            None => Err(ToolError::new(
                "this tool asked for human input, but it is not running inside an agent",
            )),
        }
    }
}
