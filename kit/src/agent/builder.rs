//! `Agent::builder()`.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile::{AgentCore, build_graph};
use super::install::{BuildContext, IntoMiddleware};
use super::middleware::Middleware;
use super::structured::{StructuredOutput, StructuredStrategy};
use super::{Agent, AgentError};
use crate::checkpoint::Checkpointer;
use crate::model::{ChatModel, ModelOptions};
use crate::state::DynSchema;
use crate::store::{IntoStore, Store};
use crate::tool::{IntoTool, Tool};

/// A model given to the builder: a value, or a `provider:model` string resolved at build time.
#[derive(Clone)]
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
///
/// The deep-agent capabilities (`filesystem`, `subagents`, `compact_conversation`, …) are
/// methods too, but they only construct their middleware: the builder itself holds nothing but
/// `dyn Middleware` (see [`Middleware::placement`] and [`Middleware::on_build`]).
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Default, Clone)]
pub struct AgentBuilder {
    name: Option<String>,
    model: Option<ModelSource>,
    model_opts: ModelOptions,
    tools: Vec<Tool>,
    system_prompt: Option<String>,
    middleware: Vec<Arc<dyn Middleware>>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    store: Option<Arc<dyn Store>>,
    recursion_limit: Option<usize>,
    max_calls_per_answer: Option<usize>,
    response_format: Option<StructuredOutput>,
    config: Option<crate::config::Config>,
}

impl AgentBuilder {
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
    /// environment). Its trace endpoint and key, when set, send this agent's runs to that
    /// endpoint ([`Tracer::from_config`](crate::trace::Tracer::from_config)).
    pub fn config(mut self, config: crate::config::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// The system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Adds one tool: a [`Tool`], or what `#[tool]` generates for a function.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a middleware: a value, or one already shared as `Arc<dyn Middleware>`. Hooks run
    /// in chain order (see [`middleware`](super::middleware) for the rules and
    /// [`Placement`](super::Placement) for how the chain is ordered).
    pub fn middleware(mut self, middleware: impl IntoMiddleware) -> Self {
        self.middleware.push(middleware.into_middleware());
        self
    }

    /// The checkpointer: memory across invocations of a thread, and required for interrupts.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The long-term store: memory that outlives threads (see [`kit::store`](crate::store)).
    /// Tools reach it with [`ToolContext::store`](crate::tool::ToolContext::store), middleware
    /// with [`Runtime::store`](super::Runtime::store); subagents without a store of their own
    /// share it, and the filesystem can keep a path prefix in it
    /// ([`StoreBackend`](crate::middleware::filesystem::StoreBackend)).
    pub fn store(mut self, store: impl IntoStore) -> Self {
        self.store = Some(store.into_store());
        self
    }

    /// The maximum supersteps per invocation (each model turn takes one superstep plus one
    /// per middleware hook; tool calls of a turn share one). Default 1000.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// The most tool calls the agent runs from one model answer. An answer asking for more
    /// runs none of them and fails the model call with
    /// [`ModelError::MalformedResponse`](crate::model::ModelError::MalformedResponse) saying
    /// how many it asked for. Models ask for a handful at a time; thousands are a model gone
    /// astray or a hostile endpoint, each call a concurrent task and a message kept in the
    /// thread. Default 1000.
    ///
    /// ```
    /// use kit::{Agent, Message, testing::ScriptedModel};
    /// let agent = Agent::builder()
    ///     .model(ScriptedModel::new([Message::assistant("hi")]))
    ///     .max_calls_per_answer(50)
    ///     .build()
    ///     .unwrap();
    /// # let _ = agent;
    /// ```
    pub fn max_calls_per_answer(mut self, limit: usize) -> Self {
        self.max_calls_per_answer = Some(limit);
        self
    }

    /// Asks for a structured final answer, validated against the schema and kept in
    /// `structured_response` (see [`StructuredOutput`]): a [`ResponseFormat`](crate::model::ResponseFormat), or
    /// `StructuredOutput::of::<T>()` for a type's schema.
    pub fn response_format(mut self, format: impl Into<StructuredOutput>) -> Self {
        self.response_format = Some(format.into());
        self
    }

    /// Edits the middleware of type `M`, adding `insert()` first when the agent has none.
    /// Builder conveniences that several calls configure together (`subagents(..)` and
    /// `general_purpose_subagent(..)`) are written with it.
    pub(crate) fn upsert_middleware<M: Middleware>(
        mut self,
        insert: impl FnOnce() -> M,
        edit: impl FnOnce(&mut M),
    ) -> Self {
        let found = self.middleware.iter_mut().find_map(|m| {
            let m: &mut dyn std::any::Any = Arc::get_mut(m)?;
            m.downcast_mut::<M>()
        });
        match found {
            Some(m) => edit(m),
            None => {
                let mut m = insert();
                edit(&mut m);
                self.middleware.push(Arc::new(m));
            }
        }
        self
    }

    /// The names of the middleware given so far.
    pub(crate) fn middleware_names(&self) -> impl Iterator<Item = &str> {
        self.middleware.iter().map(|m| m.name())
    }

    /// True when a checkpointer was given.
    pub(crate) fn has_checkpointer(&self) -> bool {
        self.checkpointer.is_some()
    }

    /// Removes every middleware of type `M`.
    pub(crate) fn remove_middleware<M: Middleware>(mut self) -> Self {
        self.middleware.retain(|m| {
            let m: &dyn std::any::Any = m.as_ref();
            !m.is::<M>()
        });
        self
    }

    /// Checks the definition and compiles the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let name = self.name.unwrap_or_else(|| "agent".to_string());
        // A configuration set in code with a trace endpoint traces this agent's runs there.
        let tracer = self
            .config
            .as_ref()
            .filter(|c| c.trace_endpoint.is_some())
            .map(crate::trace::Tracer::from_config);
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

        let mut middleware = self.middleware;
        middleware.sort_by_key(|m| m.placement());
        check_middleware_names(&middleware)?;
        let context = BuildContext {
            name: &name,
            model: &model,
            tools: &self.tools,
            checkpointer: self.checkpointer.as_ref(),
            store: self.store.as_ref(),
            middleware: &middleware,
        };
        for m in &middleware {
            m.on_build(&context)?;
        }

        let mut tools = self.tools;
        for m in &middleware {
            tools.extend(m.tools());
        }
        let mut tool_index = crate::hash::FastMap::default();
        for (i, t) in tools.iter().enumerate() {
            if tool_index.insert(t.name().to_string(), i).is_some() {
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
            && let Some(m) = middleware.iter().find(|m| m.requires_checkpointer())
        {
            return Err(AgentError::Build(format!(
                "middleware `{}` pauses the run for human input, which needs a checkpointer \
                     to resume from: add `.checkpointer(..)` (MemoryCheckpointer for tests, \
                     SqliteCheckpointer or PostgresCheckpointer for real use)",
                m.name()
            )));
        }

        let mut system = self.system_prompt.unwrap_or_default();
        for m in &middleware {
            if let Some(fragment) = m.system_prompt() {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&fragment);
            }
        }

        let mut schema = DynSchema::default();
        for m in &middleware {
            for (key, reducer) in m.state_channels() {
                if let Some(reducer) = reducer {
                    schema.add_reducer(key, reducer);
                }
            }
        }

        let structured = self.response_format.map(|s| {
            let strategy = s.resolved(model.profile().structured_output);
            (s, strategy)
        });
        let mut tool_specs: Vec<_> = tools.iter().map(|t| t.spec().clone()).collect();
        if let Some((s, StructuredStrategy::Tool)) = &structured {
            tool_specs.push(s.tool_spec());
        }
        let core = Arc::new(AgentCore {
            name: Arc::from(name.as_str()),
            model,
            tools,
            tool_index,
            middleware,
            system_prompt: (!system.is_empty()).then_some(system),
            model_opts: self.model_opts,
            tool_specs: tool_specs.into(),
            structured,
            recursion_limit: self.recursion_limit,
            max_calls_per_answer: self
                .max_calls_per_answer
                .unwrap_or(super::compile::DEFAULT_MAX_CALLS_PER_ANSWER),
            tracer,
        });
        let graph = build_graph(core.clone(), schema, self.checkpointer, self.store)?;
        Ok(Agent { inner: core, graph })
    }
}

/// Middleware names are node names and trace names: unique, non-empty, without separators.
fn check_middleware_names(middleware: &[Arc<dyn Middleware>]) -> Result<(), AgentError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, m) in middleware.iter().enumerate() {
        if names.insert(m.name(), i).is_some() {
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
    Ok(())
}
