//! Installing middleware into an agent: placement in the chain and the build-time hook.
//!
//! The agent core never names a concrete middleware (the way tower's `ServiceBuilder` never
//! names a concrete layer). A capability that needs more than hooks and wrappers, such as the
//! `task` tool that builds subagents from the parent's model and tools, installs itself through
//! [`Middleware::on_build`], and says where it belongs in the chain with
//! [`Middleware::placement`].

use std::sync::Arc;

use super::middleware::Middleware;
use crate::checkpoint::Checkpointer;
use crate::model::ChatModel;
use crate::tool::Tool;

/// Where a middleware sits in the agent's chain.
///
/// The chain decides the order of everything: `before_*` hooks run first to last, `after_*`
/// hooks last to first, and the first middleware is the outermost `wrap_*` wrapper. The
/// builder sorts middleware by placement, keeping the order they were added in within one
/// placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Placement {
    /// Before every middleware placed [`AsAdded`](Placement::AsAdded); lower ranks first. kit's
    /// deep-agent capabilities use it to keep deepagents' order (filesystem, subagents,
    /// compaction, async subagents, overflow recovery) whatever order they were added in.
    Outer(u16),
    /// In the order it was added to the builder (the default).
    AsAdded,
    /// After every middleware placed [`AsAdded`](Placement::AsAdded); lower ranks first. A
    /// capability that answers tool calls itself (the MCP toolset, whose tool list changes
    /// while the agent runs) sits here, so every guardrail's `wrap_tool_call` wraps it.
    Inner(u16),
}

impl Placement {
    /// The rank of the filesystem capability.
    pub const FILESYSTEM: Placement = Placement::Outer(100);
    /// The rank of sync subagents (the `task` tool).
    pub const SUBAGENTS: Placement = Placement::Outer(200);
    /// The rank of conversation compaction.
    pub const COMPACTION: Placement = Placement::Outer(300);
    /// The rank of async subagents.
    pub const ASYNC_SUBAGENTS: Placement = Placement::Outer(400);
    /// The rank of overflow recovery.
    pub const OVERFLOW_RECOVERY: Placement = Placement::Outer(500);
}

/// What a middleware sees of the agent it is installed into, in
/// [`Middleware::on_build`].
pub struct BuildContext<'a> {
    pub(crate) name: &'a str,
    pub(crate) model: &'a Arc<dyn ChatModel>,
    pub(crate) tools: &'a [Tool],
    pub(crate) checkpointer: Option<&'a Arc<dyn Checkpointer>>,
    pub(crate) store: Option<&'a Arc<dyn crate::store::Store>>,
    pub(crate) middleware: &'a [Arc<dyn Middleware>],
}

impl BuildContext<'_> {
    /// The agent's name.
    pub fn agent_name(&self) -> &str {
        self.name
    }

    /// The agent's model (resolved from a `provider:model` string if one was given).
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        self.model
    }

    /// The tools given to the builder (not the ones middleware add).
    pub fn tools(&self) -> &[Tool] {
        self.tools
    }

    /// The agent's checkpointer, if it has one.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.checkpointer
    }

    /// The agent's long-term store, if it was given one (a run may bring its own:
    /// [`RunOptions::store`](crate::RunOptions::store)).
    pub fn store(&self) -> Option<&Arc<dyn crate::store::Store>> {
        self.store
    }

    /// Every middleware of the agent, in chain order (this one included).
    pub fn middleware(&self) -> &[Arc<dyn Middleware>] {
        self.middleware
    }
}

crate::shared::into_shared! {
    /// Anything [`AgentBuilder::middleware`](super::AgentBuilder::middleware) accepts: a
    /// middleware value, or one already shared as `Arc<dyn Middleware>`.
    IntoMiddleware::into_middleware => Middleware
}
