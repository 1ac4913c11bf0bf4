//! Sync subagents: the `task` tool.
//!
//! The parent model delegates a job with `task(description, subagent_type)`. The child agent
//! starts with a fresh conversation holding only the description, runs to its final answer,
//! and that answer comes back as the tool result. The child does not get the parent's todo or
//! filesystem middleware unless its spec gives them; it sees the parent's files and its file
//! changes merge back into the parent.
//!
//! The child runs as a subgraph of the parent's run: its events stream through the parent's
//! stream under the namespace `task:<subagent>:<tool call id>` (with that tool call id), and its
//! checkpoints live in the parent's checkpointer under the same namespace — so an interrupt
//! raised inside the child (human review of one of its tool calls) pauses the parent, reaches
//! the parent's caller with the child named in its namespace, and `resume` continues inside
//! the child.
//!
//! **Guardrails are inherited.** A child runs the parent's guardrails too — human review gates,
//! PII middleware, moderation, the topic filter, and any middleware whose
//! [`for_subagent`](crate::agent::Middleware::for_subagent) says so — so a gated tool cannot be
//! run unreviewed by delegating it through `task`, and redaction covers what the child stores
//! and the answer it returns. A spec overrides this explicitly: its own middleware of the same
//! name replaces the inherited one ([`SubagentSpec::interrupt_on`] sets its own review gates),
//! [`SubagentSpec::without_guardrail`] leaves one out by name, and
//! [`SubagentSpec::inherit_guardrails(false)`](SubagentSpec::inherit_guardrails) leaves out
//! all. A child given as an already built agent cannot take middleware: building the parent
//! fails unless that agent has the parent's guardrails itself or the spec opts out — give it as
//! a builder ([`SubagentSpec::from_builder`]) to have them added.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::json;

use super::task_files::FileClaims;
use crate::agent::AgentBuilder;
use crate::agent::{
    Agent, AgentState, AgentStateUpdate, BuildContext, FileData, IntoModelSource, Middleware,
    ModelSource,
};
use crate::graph::{Outcome, Pause, Resume, RunOptions};
use crate::message::{Message, Role};
use crate::middleware::review::{HumanReviewMiddleware, InterruptOn};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// The name of the default subagent.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// The name of the tool that runs sync subagents.
pub const TASK_TOOL: &str = "task";

const GENERAL_PURPOSE_DESCRIPTION: &str = "General-purpose agent for researching complex \
questions, searching for files and content, and executing multi-step tasks. Use it when a job \
needs many steps or would fill your context with intermediate results. It has the same tools \
as you.";

const GENERAL_PURPOSE_PROMPT: &str = "Complete the task you are given using the tools you \
have. The agent that delegated the task sees only your final message, not your intermediate \
steps or tool results, so make your final answer complete and self-contained.";

/// A sync subagent: a name and description for the parent model, and how to build the child.
#[derive(Clone)]
pub struct SubagentSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) system_prompt: Option<String>,
    pub(crate) tools: Option<Vec<Tool>>,
    pub(crate) model: Option<ModelSource>,
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    pub(crate) agent: Option<Agent>,
    pub(crate) builder: Option<Box<AgentBuilder>>,
    /// The child's own review gates (`interrupt_on`), replacing the inherited ones.
    pub(crate) review: Option<Box<HumanReviewMiddleware>>,
    pub(crate) inherit: bool,
    pub(crate) without: Vec<String>,
}

impl std::fmt::Debug for SubagentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentSpec")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl SubagentSpec {
    /// A subagent with a name and a description the parent model chooses by.
    ///
    /// ```
    /// use kit::middleware::subagents::SubagentSpec;
    /// let researcher = SubagentSpec::new("researcher", "Finds facts and cites sources.")
    ///     .system_prompt("You research. Cite every source.");
    /// # let _ = researcher;
    /// ```
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        SubagentSpec {
            name: name.into(),
            description: description.into(),
            system_prompt: None,
            tools: None,
            model: None,
            middleware: Vec::new(),
            agent: None,
            builder: None,
            review: None,
            inherit: true,
            without: Vec::new(),
        }
    }

    /// A subagent built from `builder` when the parent is built (the parent's guardrails added,
    /// its checkpointer used when the builder has none). `#[agent]`'s `agent = Writer` gives a
    /// declared agent this way.
    pub fn from_builder(
        name: impl Into<String>,
        description: impl Into<String>,
        builder: AgentBuilder,
    ) -> Self {
        let mut spec = Self::new(name, description);
        spec.builder = Some(Box::new(builder));
        spec
    }

    /// A subagent that is an already built agent (any tools, middleware, model). It cannot take
    /// the parent's guardrails: it must have them itself, or the spec opts out of them
    /// (see the [module documentation](self)).
    pub fn from_agent(
        name: impl Into<String>,
        description: impl Into<String>,
        agent: Agent,
    ) -> Self {
        let mut spec = Self::new(name, description);
        spec.agent = Some(agent);
        spec
    }

    /// The child's system prompt.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// The child's tools (omitted: the parent's tools).
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// The child's model: a value, a shared one, or a `provider:model` string (resolved from
    /// the environment's credentials when the parent is built). Omitted: the parent's model.
    #[must_use]
    pub fn model(mut self, model: impl IntoModelSource) -> Self {
        self.model = Some(model.into_model_source());
        self
    }

    /// Adds a middleware to the child (todos and filesystem are not inherited).
    #[must_use]
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// How the child reviews calls of `tool` (`true`, `false` or an
    /// [`InterruptOnConfig`](crate::middleware::review::InterruptOnConfig)). Giving any makes
    /// these the child's review gates instead of the parent's.
    #[must_use]
    pub fn interrupt_on(mut self, tool: impl Into<String>, on: impl Into<InterruptOn>) -> Self {
        let review = self.review.take().map(|r| *r).unwrap_or_default();
        self.review = Some(Box::new(review.interrupt_on(tool, on)));
        self
    }

    /// Whether the child runs the parent's guardrails (default `true`, the safe choice).
    #[must_use]
    pub fn inherit_guardrails(mut self, on: bool) -> Self {
        self.inherit = on;
        self
    }

    /// Leaves out the parent's guardrail named `name` (a middleware name, such as
    /// `HumanInTheLoopMiddleware`).
    #[must_use]
    pub fn without_guardrail(mut self, name: impl Into<String>) -> Self {
        self.without.push(name.into());
        self
    }

    /// The subagent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parent's guardrails this child runs: each that offers itself to subagents, unless
    /// the spec opts out of it or has its own of that name.
    fn inherited(&self, parent: &BuildContext<'_>, own: &[&str]) -> Vec<Arc<dyn Middleware>> {
        if !self.inherit {
            return Vec::new();
        }
        parent
            .middleware()
            .iter()
            .filter(|m| !self.without.iter().any(|w| w == m.name()))
            .filter(|m| !own.contains(&m.name()))
            .filter_map(|m| m.for_subagent())
            .collect()
    }
}

/// A built child.
pub(crate) struct Child {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) agent: Agent,
}

/// Builds the children of an agent: the general-purpose one (unless disabled or replaced) and
/// one per spec, with the parent's model and tools where a spec leaves them out.
fn build_children(
    specs: &[SubagentSpec],
    general_purpose: bool,
    parent: &BuildContext<'_>,
) -> Result<Vec<Child>, crate::AgentError> {
    let mut all = Vec::new();
    if general_purpose && !specs.iter().any(|s| s.name == GENERAL_PURPOSE) {
        all.push(
            SubagentSpec::new(GENERAL_PURPOSE, GENERAL_PURPOSE_DESCRIPTION)
                .system_prompt(GENERAL_PURPOSE_PROMPT),
        );
    }
    all.extend(specs.iter().cloned());
    let mut children: Vec<Child> = Vec::new();
    for spec in all {
        if children.iter().any(|c| c.name == spec.name) {
            return Err(crate::AgentError::Build(format!(
                "duplicate subagent name `{}`; each subagent must have a unique name",
                spec.name
            )));
        }
        let agent = build_child(&spec, parent)
            .map_err(|e| crate::AgentError::Build(format!("subagent `{}`: {e}", spec.name)))?;
        children.push(Child {
            name: spec.name,
            description: spec.description,
            agent,
        });
    }
    Ok(children)
}

/// Builds one child: from its agent, its builder, or its parts (the parent's model and tools
/// where the spec leaves them out), with the parent's guardrails.
fn build_child(spec: &SubagentSpec, parent: &BuildContext<'_>) -> Result<Agent, crate::AgentError> {
    let review = spec
        .review
        .clone()
        .map(|r| Arc::new(*r) as Arc<dyn Middleware>);
    if let Some(agent) = &spec.agent {
        let own: Vec<&str> = agent.inner.middleware.iter().map(|m| m.name()).collect();
        let missing: Vec<String> = spec
            .inherited(parent, &own)
            .iter()
            .map(|m| format!("`{}`", m.name()))
            .collect();
        if !missing.is_empty() {
            return Err(crate::AgentError::Build(format!(
                "it is an already built agent, so it cannot run the parent's guardrails {}; give \
                 it as a builder (`SubagentSpec::from_builder`, or `agent = ..` in `#[agent]`) to \
                 have them added, add them to it, or opt out explicitly with \
                 `.without_guardrail(name)` / `.inherit_guardrails(false)`",
                missing.join(", ")
            )));
        }
        return Ok(agent.clone());
    }
    let mut b = match &spec.builder {
        Some(builder) => (**builder).clone(),
        None => {
            let mut b = Agent::builder().name(spec.name.clone());
            b = match spec.model.clone() {
                Some(ModelSource::Model(model)) => b.model(model),
                Some(ModelSource::Name(name)) => b.model(name),
                None => b.model(parent.model().clone()),
            };
            b = b.tools(
                spec.tools
                    .clone()
                    .unwrap_or_else(|| parent.tools().to_vec()),
            );
            if let Some(p) = &spec.system_prompt {
                b = b.system_prompt(p.clone());
            }
            b
        }
    };
    for m in spec.middleware.iter().chain(&review) {
        b = b.middleware(m.clone());
    }
    let own: Vec<&str> = b.middleware_names().collect();
    for m in spec.inherited(parent, &own) {
        b = b.middleware(m);
    }
    // The child runs on the parent's checkpointer (under its own namespace), so middleware that
    // pauses runs (human review) works inside it.
    if !b.has_checkpointer()
        && let Some(cp) = parent.checkpointer()
    {
        b = b.checkpointer(cp.clone());
    }
    b.build()
}

/// Adds the `task` tool that runs sync subagents. The children are built with the agent (in
/// [`Middleware::on_build`]), from the parent's model, tools and checkpointer.
///
/// Usually added with [`AgentBuilder::subagents`](crate::agent::AgentBuilder::subagents); a
/// middleware value belongs to one agent.
pub struct SubagentMiddleware {
    specs: Vec<SubagentSpec>,
    general_purpose: Option<bool>,
    children: OnceLock<Arc<Vec<Child>>>,
    /// Which task of an answer changed each file first.
    claims: Arc<FileClaims>,
}

impl SubagentMiddleware {
    /// The `task` tool over these specs, plus the general-purpose subagent unless one of the
    /// specs is named `general-purpose` or it is turned off.
    pub fn new(specs: impl IntoIterator<Item = SubagentSpec>) -> Self {
        SubagentMiddleware {
            specs: specs.into_iter().collect(),
            general_purpose: None,
            children: OnceLock::new(),
            claims: Arc::default(),
        }
    }

    /// Adds specs.
    pub fn add(&mut self, specs: impl IntoIterator<Item = SubagentSpec>) {
        self.specs.extend(specs);
    }

    /// Includes or leaves out the general-purpose subagent (default: included when there is
    /// at least one spec).
    #[must_use]
    pub fn general_purpose(mut self, on: bool) -> Self {
        self.general_purpose = Some(on);
        self
    }

    pub(crate) fn set_general_purpose(&mut self, on: bool) {
        self.general_purpose = Some(on);
    }

    fn children(&self) -> &[Child] {
        self.children.get().map_or(&[], |c| c.as_slice())
    }
}

#[derive(Deserialize)]
struct TaskArgs {
    description: String,
    subagent_type: String,
}

fn task_description(children: &[Child]) -> String {
    let mut list = String::new();
    for c in children {
        list.push_str(&format!("- {}: {}\n", c.name, c.description));
    }
    format!(
        "Launch a subagent to do a self-contained job in its own context window. Available \
         subagent types:\n{list}\nHow to use it:\n\
         - The subagent starts fresh: put everything it needs in `description` (the goal, the \
         context, and the form of the answer you want back).\n\
         - Its final answer comes back to you as this tool's result; the user does not see \
         it, so relay what matters.\n\
         - Launch several subagents in one message when their jobs are independent; they run \
         in parallel.\n\
         - Use it for work that would flood your context (research, large searches, multi-step \
         investigations); do simple things yourself."
    )
}

/// The text of the child's answer: its structured response, or its last non-empty assistant
/// message.
fn answer_of(state: &AgentState) -> String {
    if let Some(structured) = &state.structured_response {
        return structured.to_string();
    }
    state
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.content.is_empty())
        .map(Message::text)
        .unwrap_or_default()
}

/// The checkpoint metadata key naming the answer whose call started a child: a child found
/// under a call id but started by another answer belongs to another task (a provider reusing
/// call ids across answers).
const TASK_ANSWER_KEY: &str = "kit_task_answer";

/// Whether a child thread found under a call's id was started by an answer other than
/// `answer`. A child saved without the key (by an older kit) is taken as this task's.
fn another_task(found: &crate::graph::StateSnapshot<AgentState>, answer: &str) -> bool {
    found
        .checkpoint
        .metadata
        .get(TASK_ANSWER_KEY)
        .and_then(serde_json::Value::as_str)
        .is_some_and(|started_by| started_by != answer)
}

/// The id of the answer that made call `call_id` (the newest with it), if it has one: a call a
/// middleware made up, or an answer without an id, has none.
fn answer_id(state: &AgentState, call_id: &str) -> Option<String> {
    state
        .messages
        .iter()
        .rev()
        .find(|m| m.tool_calls.iter().any(|c| c.id == call_id))
        .map(|m| m.id.clone())
        .filter(|id| !id.is_empty())
}

/// File changes of the child relative to what it was given.
fn file_changes(
    before: &BTreeMap<String, FileData>,
    after: &BTreeMap<String, FileData>,
) -> BTreeMap<String, Option<FileData>> {
    let mut changes = BTreeMap::new();
    for (path, data) in after {
        if before.get(path) != Some(data) {
            changes.insert(path.clone(), Some(data.clone()));
        }
    }
    for path in before.keys() {
        if !after.contains_key(path) {
            changes.insert(path.clone(), None);
        }
    }
    changes
}

async fn run_task(
    children: Arc<Vec<Child>>,
    claims: &FileClaims,
    args: TaskArgs,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    let Some(child) = children.iter().find(|c| c.name == args.subagent_type) else {
        let names: Vec<String> = children.iter().map(|c| format!("`{}`", c.name)).collect();
        return Err(ToolError::new(format!(
            "We cannot invoke subagent {} because it does not exist, the only allowed types are {}",
            args.subagent_type,
            names.join(", ")
        )));
    };
    let call_id = ctx.call_id().to_string();
    let answer = answer_id(ctx.state(), &call_id);
    let options = |segment: &str| match (ctx.node(), &answer) {
        (Some(node), Some(answer)) => node
            .child_options(segment, Some(call_id.clone()))
            .metadata(TASK_ANSWER_KEY, answer.clone()),
        (Some(node), None) => node.child_options(segment, Some(call_id.clone())),
        (None, _) => RunOptions::new(),
    };
    let mut opts = options(&format!("task:{}:{call_id}", child.name));
    let parent_files = &ctx.state().files;
    let resume = ctx.node().and_then(|n| n.child_resume());
    let persistent = opts.thread_id.is_some() && opts.checkpointer.is_some();
    let mut existing = false;
    if persistent {
        // A child thread that already exists (the parent crashed mid-call and re-ran the call)
        // is continued, not restarted with a duplicate task message. One another answer
        // started is a provider reusing call ids across answers: this task has a thread of
        // its own, named after its answer (so a resume and a re-run find it again).
        existing = match (child.agent.graph().get_state(&opts).await, &answer) {
            (Ok(Some(found)), Some(answer)) if another_task(&found, answer) => {
                opts = options(&format!("task:{}:{call_id}:{answer}", child.name));
                matches!(child.agent.graph().get_state(&opts).await, Ok(Some(_)))
            }
            (Ok(Some(_)), _) => true,
            _ => false,
        };
    }
    let outcome = match resume {
        Some(resume) => child.agent.resume(resume).options(&opts).await,
        None => {
            if existing {
                child.agent.resume(Resume::Continue).options(&opts).await
            } else {
                let input = AgentStateUpdate::new()
                    .messages(vec![Message::user(args.description.clone())])
                    .files(
                        parent_files
                            .iter()
                            .map(|(k, v)| (k.clone(), Some(v.clone())))
                            .collect::<BTreeMap<_, _>>(),
                    );
                child.agent.invoke(input).options(&opts).await
            }
        }
    };
    match outcome {
        Ok(Outcome::Done(state)) => {
            let changes = file_changes(parent_files, &state.files);
            let mut reply = answer_of(&state);
            if changes.is_empty() {
                return Ok(ToolOutput::text(reply));
            }
            // Siblings of this answer ran at once from the same files: the first to change
            // a path keeps it.
            // The thread, not the invocation: a sibling that paused and was resumed settles
            // in a later invocation than the one that finished first. (Claims live in this
            // process: a resume on another worker, or after a restart, does not meet them.)
            // Without an answer id, only the tasks of this invocation are compared.
            let node = ctx.node();
            let key = match &answer {
                Some(answer) => format!(
                    "{}|{}|{answer}",
                    node.map_or("", |n| n.thread_id().unwrap_or(n.invocation_id())),
                    node.map(|n| n.namespace().join("|")).unwrap_or_default(),
                ),
                None => format!(
                    "{}|{}|-",
                    node.map_or("", |n| n.invocation_id()),
                    node.map(|n| n.namespace().join("|")).unwrap_or_default(),
                ),
            };
            let settled = claims.settle(&key, &call_id, changes);
            if let Some(note) = settled.note() {
                reply.push_str("\n\n");
                reply.push_str(&note);
            }
            let mut output = ToolOutput::text(reply);
            if !settled.changes.is_empty() {
                output = output.with_update(AgentStateUpdate::new().files(settled.changes));
            }
            Ok(output)
        }
        Ok(Outcome::Interrupted(paused)) => Err(Pause::new(paused.interrupts).into()),
        Err(e) => Err(ToolError::new(format!(
            "subagent `{}` failed: {e}",
            args.subagent_type
        ))),
    }
}

#[crate::async_trait]
impl Middleware for SubagentMiddleware {
    fn name(&self) -> &str {
        "Subagents"
    }

    fn placement(&self) -> crate::agent::Placement {
        crate::agent::Placement::SUBAGENTS
    }

    fn hooks(&self) -> &[crate::agent::Hook] {
        &[]
    }

    fn on_build(&self, agent: &BuildContext<'_>) -> Result<(), crate::AgentError> {
        let general_purpose = self.general_purpose.unwrap_or(!self.specs.is_empty());
        let children = build_children(&self.specs, general_purpose, agent)?;
        self.children.set(Arc::new(children)).map_err(|_| {
            crate::AgentError::Build(
                "this SubagentMiddleware is already part of another agent; create one per agent"
                    .into(),
            )
        })
    }

    fn tools(&self) -> Vec<Tool> {
        let Some(children) = self.children.get().cloned() else {
            return Vec::new();
        };
        if children.is_empty() {
            return Vec::new();
        }
        let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
        let shared = children.clone();
        let claims = self.claims.clone();
        vec![Tool::from_fn(
            TASK_TOOL,
            task_description(&children),
            json!({
                "type": "object",
                "properties": {
                    "description": {
                        "type": "string",
                        "description": "A detailed description of the task for the subagent to \
                                        perform autonomously. Include all necessary context and \
                                        specify the expected output format."
                    },
                    "subagent_type": {
                        "type": "string",
                        "description": format!(
                            "The type of subagent to use: one of {}.",
                            names.join(", ")
                        ),
                    }
                },
                "required": ["description", "subagent_type"],
                "additionalProperties": false
            }),
            move |args, ctx| {
                let children = shared.clone();
                let claims = claims.clone();
                async move {
                    let args: TaskArgs =
                        serde_json::from_value(args).map_err(ToolError::invalid_args)?;
                    run_task(children, &claims, args, ctx).await
                }
            },
        )]
    }

    fn system_prompt(&self) -> Option<String> {
        if self.children().is_empty() {
            return None;
        }
        Some(
            "## `task` (subagents)\n\nYou can delegate self-contained jobs to subagents with the \
             `task` tool. Each runs in its own context and returns only its final answer."
                .to_string(),
        )
    }
}
