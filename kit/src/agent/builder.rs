//! `Agent::builder()`.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile::{AgentCore, build_graph};
use super::middleware::Middleware;
use super::{Agent, AgentError};
use crate::checkpoint::Checkpointer;
use crate::model::{ChatModel, ModelOptions, ResponseFormat};
use crate::state::DynSchema;
use crate::tool::Tool;

/// A model given to the builder: a value, or a `provider:model` string resolved at build time.
pub enum ModelSource {
    /// A model value.
    Model(Arc<dyn ChatModel>),
    /// A `provider:model` string, e.g. `openai:gpt-4o-mini`.
    Name(String),
}

impl std::fmt::Debug for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Model(m) => write!(f, "Model({}:{})", m.provider(), m.model_name()),
            ModelSource::Name(n) => write!(f, "Name({n})"),
        }
    }
}

/// A subagent spec of either kind, for [`AgentBuilder::subagents`].
#[derive(Debug, Clone)]
pub enum Subagent {
    /// Runs in-process behind the `task` tool.
    Sync(crate::middleware::subagents::SubagentSpec),
    /// Runs on a remote worker behind the async-task tools.
    Async(crate::middleware::async_subagents::AsyncSpec),
}

impl From<crate::middleware::subagents::SubagentSpec> for Subagent {
    fn from(s: crate::middleware::subagents::SubagentSpec) -> Self {
        Subagent::Sync(s)
    }
}

impl From<crate::middleware::async_subagents::AsyncSpec> for Subagent {
    fn from(s: crate::middleware::async_subagents::AsyncSpec) -> Self {
        Subagent::Async(s)
    }
}

/// Anything the builder accepts as a model.
pub trait IntoModelSource {
    /// The conversion.
    fn into_model_source(self) -> ModelSource;
}

impl<M: ChatModel> IntoModelSource for M {
    fn into_model_source(self) -> ModelSource {
        ModelSource::Model(Arc::new(self))
    }
}

impl IntoModelSource for Arc<dyn ChatModel> {
    fn into_model_source(self) -> ModelSource {
        ModelSource::Model(self)
    }
}

impl IntoModelSource for &str {
    fn into_model_source(self) -> ModelSource {
        ModelSource::Name(self.to_string())
    }
}

impl IntoModelSource for String {
    fn into_model_source(self) -> ModelSource {
        ModelSource::Name(self)
    }
}

/// Builds an [`Agent`]. Every option of the interface is a method; `build` checks the
/// combination and reports what is wrong.
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Default)]
pub struct AgentBuilder {
    name: Option<String>,
    model: Option<ModelSource>,
    model_opts: ModelOptions,
    tools: Vec<Tool>,
    system_prompt: Option<String>,
    middleware: Vec<Arc<dyn Middleware>>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    recursion_limit: Option<usize>,
    response_format: Option<ResponseFormat>,
    config: Option<crate::config::Config>,
    filesystem: Option<Arc<dyn Middleware>>,
    subagents: Vec<crate::middleware::subagents::SubagentSpec>,
    async_subagents: Vec<crate::middleware::async_subagents::AsyncSpec>,
    general_purpose: Option<bool>,
    compaction: Option<crate::middleware::compaction::CompactionMiddleware>,
    overflow_recovery: bool,
}

impl AgentBuilder {
    /// Subagents: sync specs go behind a `task` tool, async specs to the async-task tools.
    ///
    /// With at least one sync spec, a general-purpose subagent (the parent's model and tools)
    /// is included unless one of the specs is named `general-purpose` or it is turned off with
    /// [`general_purpose_subagent(false)`](Self::general_purpose_subagent).
    pub fn subagents<S: Into<Subagent>>(mut self, specs: impl IntoIterator<Item = S>) -> Self {
        for spec in specs {
            match spec.into() {
                Subagent::Sync(s) => self.subagents.push(s),
                Subagent::Async(a) => self.async_subagents.push(a),
            }
        }
        self
    }

    /// Async subagents on remote workers (the five async-task tools).
    pub fn async_subagents(
        mut self,
        specs: impl IntoIterator<Item = crate::middleware::async_subagents::AsyncSpec>,
    ) -> Self {
        self.async_subagents.extend(specs);
        self
    }

    /// Includes or leaves out the general-purpose subagent (`true` adds the `task` tool even
    /// without other sync subagents).
    pub fn general_purpose_subagent(mut self, on: bool) -> Self {
        self.general_purpose = Some(on);
        self
    }

    /// Summarise old messages when the conversation grows large (default thresholds; see
    /// [`CompactionMiddleware`](crate::middleware::compaction::CompactionMiddleware)).
    pub fn compact_conversation(mut self, on: bool) -> Self {
        self.compaction = on.then(crate::middleware::compaction::CompactionMiddleware::new);
        self
    }

    /// Compaction with custom thresholds.
    pub fn compaction(
        mut self,
        compaction: crate::middleware::compaction::CompactionMiddleware,
    ) -> Self {
        self.compaction = Some(compaction);
        self
    }

    /// When the provider answers "context length exceeded", compact and retry once.
    pub fn overflow_recovery(mut self, on: bool) -> Self {
        self.overflow_recovery = on;
        self
    }

    /// The agent's name (events, traces, the name of its answers). Default `agent`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The chat model: a value, or a `provider:model` string (`openai:gpt-4o-mini`,
    /// `anthropic:claude-sonnet-4-5`, `ollama:llama3.1`).
    pub fn model(mut self, model: impl IntoModelSource) -> Self {
        self.model = Some(model.into_model_source());
        self
    }

    /// Model options: temperature, max tokens, timeout, retries.
    pub fn model_opts(mut self, opts: ModelOptions) -> Self {
        self.model_opts = opts;
        self
    }

    /// Credentials and endpoints used to resolve a `provider:model` string (default: from the
    /// environment).
    pub fn config(mut self, config: crate::config::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds one tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// The system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Adds a middleware (hooks run in the order middleware is added; see
    /// [`middleware`](super::middleware) for the rules).
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Adds a filesystem (the spec's `filesystem` option): the tools `ls`, `read_file`,
    /// `write_file`, `edit_file`, `delete`, `glob` and `grep`, and large-result eviction. Like
    /// the other capabilities it runs before the middleware given with `middleware(..)`.
    pub fn filesystem(mut self, fs: crate::middleware::filesystem::FilesystemMiddleware) -> Self {
        self.filesystem = Some(Arc::new(fs));
        self
    }

    /// Adds an already shared middleware.
    pub fn middleware_arc(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// The checkpointer: memory across invocations of a thread, and required for interrupts.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The maximum supersteps per invocation (each model turn takes one superstep plus one
    /// per middleware hook; tool calls of a turn share one). Default 1000.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// Asks for a structured final answer; it is parsed into `structured_response`.
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// Checks the definition and compiles the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let name = self.name.unwrap_or_else(|| "agent".to_string());
        let model: Arc<dyn ChatModel> = match self.model {
            Some(ModelSource::Model(m)) => m,
            Some(ModelSource::Name(spec)) => {
                let config = self.config.unwrap_or_else(crate::config::Config::from_env);
                crate::model::init(&spec, &config, self.model_opts.clone())?
            }
            None => {
                return Err(AgentError::Build(format!(
                    "agent `{name}` has no model: call `.model(..)` with a model value or a \
                     `provider:model` string"
                )));
            }
        };

        // Capabilities first (in the deepagents order), then the user's middleware.
        let mut middleware: Vec<Arc<dyn Middleware>> = Vec::new();
        if let Some(fs) = self.filesystem {
            middleware.push(fs);
        }
        let general_purpose = self.general_purpose.unwrap_or(!self.subagents.is_empty());
        if !self.subagents.is_empty() || general_purpose {
            let children = crate::middleware::subagents::build_children(
                self.subagents,
                general_purpose,
                &model,
                &self.tools,
                self.checkpointer.as_ref(),
            )?;
            middleware.push(Arc::new(
                crate::middleware::subagents::SubagentMiddleware::new(children),
            ));
        }
        if let Some(compaction) = self.compaction {
            middleware.push(Arc::new(compaction));
        }
        if !self.async_subagents.is_empty() {
            middleware.push(Arc::new(
                crate::middleware::async_subagents::AsyncSubagentMiddleware::new(
                    self.async_subagents,
                )?,
            ));
        }
        if self.overflow_recovery {
            middleware.push(Arc::new(
                crate::middleware::overflow::OverflowRecoveryMiddleware::new(),
            ));
        }
        middleware.extend(self.middleware);
        let mut this_middleware = middleware;

        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, m) in this_middleware.iter().enumerate() {
            if names.insert(m.name().to_string(), i).is_some() {
                return Err(AgentError::Build(format!(
                    "two middleware are named `{}`; middleware names must be unique",
                    m.name()
                )));
            }
            if m.name().is_empty() || m.name().contains(['|', ':']) {
                return Err(AgentError::Build(format!(
                    "middleware name `{}` is invalid: it must be non-empty and free of `|` and `:`",
                    m.name()
                )));
            }
        }

        let mut tools = self.tools;
        for m in &this_middleware {
            tools.extend(m.tools());
        }
        let mut tool_index = HashMap::new();
        for (i, t) in tools.iter().enumerate() {
            if let Some(first) = tool_index.insert(t.name().to_string(), i) {
                let _ = first;
                return Err(AgentError::Build(format!(
                    "two tools are named `{}`; the model could not tell them apart — rename one \
                     (middleware may add tools too)",
                    t.name()
                )));
            }
        }
        if !tools.is_empty() && !model.profile().tool_calling {
            return Err(AgentError::Build(format!(
                "model `{}:{}` cannot call tools, but the agent has {} tool(s); choose a model \
                 with tool calling",
                model.provider(),
                model.model_name(),
                tools.len()
            )));
        }
        if self.checkpointer.is_none()
            && let Some(m) = this_middleware.iter().find(|m| m.requires_checkpointer())
        {
            return Err(AgentError::Build(format!(
                "middleware `{}` pauses the run for human input, which needs a checkpointer \
                     to resume from: add `.checkpointer(..)` (MemoryCheckpointer for tests, \
                     SqliteCheckpointer or PostgresCheckpointer for real use)",
                m.name()
            )));
        }

        let mut system = self.system_prompt.unwrap_or_default();
        for m in &this_middleware {
            if let Some(fragment) = m.system_prompt() {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&fragment);
            }
        }

        let mut schema = DynSchema::default();
        for m in &this_middleware {
            for (key, reducer) in m.state_channels() {
                if let Some(reducer) = reducer {
                    schema.add_reducer(key, reducer);
                }
            }
        }

        let core = Arc::new(AgentCore {
            name: Arc::from(name.as_str()),
            model,
            tools,
            tool_index,
            middleware: std::mem::take(&mut this_middleware),
            system_prompt: (!system.is_empty()).then_some(system),
            model_opts: self.model_opts,
            response_format: self.response_format,
            recursion_limit: self.recursion_limit,
        });
        let graph = build_graph(core.clone(), schema, self.checkpointer)?;
        Ok(Agent { inner: core, graph })
    }
}
