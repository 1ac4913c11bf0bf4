//! The deep-agent capabilities as builder methods: thin sugar that constructs their middleware.
//!
//! `Agent::builder().filesystem(..)` is `Agent::builder().middleware(FilesystemMiddleware ..)`
//! spelled the way the interface spells it. The agent core knows none of these types: each
//! middleware places itself in the chain ([`Placement`](crate::agent::Placement)) and installs
//! itself when the agent is built ([`Middleware::on_build`](crate::agent::Middleware::on_build)).

use crate::agent::AgentBuilder;

use super::async_subagents::{AsyncSpec, AsyncSubagentMiddleware};
use super::compaction::CompactionMiddleware;
use super::filesystem::FilesystemMiddleware;
use super::overflow::OverflowRecoveryMiddleware;
use super::subagents::{SubagentMiddleware, SubagentSpec};

/// A subagent spec of either kind, for [`AgentBuilder::subagents`].
#[derive(Debug, Clone)]
pub enum Subagent {
    /// Runs in-process behind the `task` tool.
    Sync(SubagentSpec),
    /// Runs on a remote worker behind the async-task tools.
    Async(AsyncSpec),
}

impl From<SubagentSpec> for Subagent {
    fn from(s: SubagentSpec) -> Self {
        Subagent::Sync(s)
    }
}

impl From<AsyncSpec> for Subagent {
    fn from(s: AsyncSpec) -> Self {
        Subagent::Async(s)
    }
}

impl AgentBuilder {
    /// Adds a filesystem (the spec's `filesystem` option): the tools `ls`, `read_file`,
    /// `write_file`, `edit_file`, `delete`, `glob` and `grep`, and large-result eviction. Like
    /// the other capabilities it runs before the middleware given with `middleware(..)`.
    pub fn filesystem(self, fs: FilesystemMiddleware) -> Self {
        self.remove_middleware::<FilesystemMiddleware>()
            .middleware(fs)
    }

    /// Writes a sync subagent's result longer than `chars` characters to the virtual
    /// filesystem (`/large_tool_results/<call id>`); the parent gets the path and a preview
    /// instead, and reads the rest with `read_file` (deepagents' eviction of large tool
    /// results, applied to subagent reports). Adds the filesystem if the agent has none.
    pub fn subagent_result_limit(self, chars: usize) -> Self {
        self.upsert_middleware(FilesystemMiddleware::new, |fs| {
            fs.set_tool_threshold(super::subagents::TASK_TOOL, chars);
        })
    }

    /// Subagents: sync specs go behind a `task` tool, async specs to the async-task tools.
    ///
    /// With at least one sync spec, a general-purpose subagent (the parent's model and tools)
    /// is included unless one of the specs is named `general-purpose` or it is turned off with
    /// [`general_purpose_subagent(false)`](Self::general_purpose_subagent).
    pub fn subagents<S: Into<Subagent>>(mut self, specs: impl IntoIterator<Item = S>) -> Self {
        let (mut sync, mut remote) = (Vec::new(), Vec::new());
        for spec in specs {
            match spec.into() {
                Subagent::Sync(s) => sync.push(s),
                Subagent::Async(a) => remote.push(a),
            }
        }
        if !sync.is_empty() {
            self = self.upsert_middleware(|| SubagentMiddleware::new([]), |m| m.add(sync));
        }
        if !remote.is_empty() {
            self = self.async_subagents(remote);
        }
        self
    }

    /// Async subagents on remote workers (the five async-task tools).
    pub fn async_subagents(self, specs: impl IntoIterator<Item = AsyncSpec>) -> Self {
        self.upsert_middleware(
            || AsyncSubagentMiddleware::unchecked(Vec::new()),
            |m| m.extend(specs),
        )
    }

    /// Includes or leaves out the general-purpose subagent (`true` adds the `task` tool even
    /// without other sync subagents).
    pub fn general_purpose_subagent(self, on: bool) -> Self {
        self.upsert_middleware(
            || SubagentMiddleware::new([]),
            |m| m.set_general_purpose(on),
        )
    }

    /// Summarise old messages when the conversation grows large (default thresholds; see
    /// [`CompactionMiddleware`]).
    pub fn compact_conversation(self, on: bool) -> Self {
        let this = self.remove_middleware::<CompactionMiddleware>();
        if on {
            this.middleware(CompactionMiddleware::new())
        } else {
            this
        }
    }

    /// Compaction with custom thresholds.
    pub fn compaction(self, compaction: CompactionMiddleware) -> Self {
        self.remove_middleware::<CompactionMiddleware>()
            .middleware(compaction)
    }

    /// When the provider answers "context length exceeded", compact and retry once.
    pub fn overflow_recovery(self, on: bool) -> Self {
        let this = self.remove_middleware::<OverflowRecoveryMiddleware>();
        if on {
            this.middleware(OverflowRecoveryMiddleware::new())
        } else {
            this
        }
    }
}
