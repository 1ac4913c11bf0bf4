//! Model-call and tool-call limits per run and per thread (LangChain's
//! `ModelCallLimitMiddleware` and `ToolCallLimitMiddleware`).
//!
//! Counts live in state channels, so the thread counts are checkpointed with the conversation
//! and carry over to the thread's next run; the run counts start again at 0 with every
//! invocation (`invoke`, `resume`), as LangChain's untracked run counters do.

mod shares;

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::subagents::TASK_TOOL;
use super::support::{Counter, with_custom};
use crate::agent::{
    AgentError, AgentState, AgentStateUpdate, BuildContext, Hook, HookResult, HookUpdate, JumpTo,
    Middleware, ModelExecution, ModelNext, Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::message::{Message, ToolCall};
use crate::model::{FinishReason, ModelRequest, ModelResponse};
use crate::state::DynReducer;
use crate::tool::{ToolContext, ToolExecution};

/// What a limit does when it is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitBehavior {
    /// Tool-call limits only (their default): the calls over the limit get an error result
    /// ("Tool call limit exceeded. Do not call 'search' again."), the others run, and the
    /// model decides what to do next.
    Continue,
    /// End the run with a final assistant message saying which limit was hit (the model-call
    /// limit's default).
    #[default]
    End,
    /// Fail the run with a typed error ([`ModelCallLimitExceeded`] or
    /// [`ToolCallLimitExceeded`]).
    Error,
}

/// The limits of one limiter and what it does at them.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    thread: Option<u64>,
    run: Option<u64>,
    exit: ExitBehavior,
}

impl Limits {
    /// A limiter needs at least one limit.
    fn check(&self, who: &str) -> Result<(), AgentError> {
        if self.thread.is_none() && self.run.is_none() {
            return Err(AgentError::Build(format!(
                "{who}: at least one limit must be specified (thread_limit or run_limit)"
            )));
        }
        Ok(())
    }

    /// True when one more call would go over a limit.
    fn would_exceed(&self, counter: &Counter) -> bool {
        self.thread
            .is_some_and(|l| counter.thread.saturating_add(1) > l)
            || self.run.is_some_and(|l| counter.run.saturating_add(1) > l)
    }
}

/// The setters of a limiter's [`Limits`]; `$exits` documents its exit behaviours.
macro_rules! limit_setters {
    ($what:literal, $exits:literal) => {
        #[doc = concat!("The most ", $what, " of one thread, over all its runs.")]
        #[must_use]
        pub fn thread_limit(mut self, limit: u64) -> Self {
            self.limits.thread = Some(limit);
            self
        }

        #[doc = concat!("The most ", $what, " of one run.")]
        #[must_use]
        pub fn run_limit(mut self, limit: u64) -> Self {
            self.limits.run = Some(limit);
            self
        }

        #[doc = concat!("What happens at the limit: ", $exits, ".")]
        #[must_use]
        pub fn exit_behavior(mut self, exit: ExitBehavior) -> Self {
            self.limits.exit = exit;
            self
        }
    };
}

fn limit_text(
    kind: &str,
    count: u64,
    limit: Option<u64>,
    exceeded: impl Fn(u64, u64) -> bool,
) -> Option<String> {
    limit
        .filter(|&l| exceeded(count, l))
        .map(|l| format!("{kind} limit ({count}/{l})"))
}

/// The model-call limits were reached ([`ExitBehavior::Error`] of
/// [`ModelCallLimitMiddleware`]; kind `model_call_limit_exceeded`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}; raise the limit, or continue on a new thread (thread limit) or with a new run (run \
     limit)",
    model_limit_message(*thread_count, *run_count, *thread_limit, *run_limit)
)]
pub struct ModelCallLimitExceeded {
    /// Model calls made in the thread.
    pub thread_count: u64,
    /// Model calls made in this run.
    pub run_count: u64,
    /// The thread limit, if any.
    pub thread_limit: Option<u64>,
    /// The run limit, if any.
    pub run_limit: Option<u64>,
}

/// LangChain's text: "Model call limits exceeded: run limit (2/2)".
fn model_limit_message(
    thread_count: u64,
    run_count: u64,
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
) -> String {
    let reached = |c: u64, l: u64| c >= l;
    let parts: Vec<String> = [
        limit_text("thread", thread_count, thread_limit, reached),
        limit_text("run", run_count, run_limit, reached),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!("Model call limits exceeded: {}", parts.join(", "))
}

const MODEL_COUNT_KEY: &str = "model_call_count";

/// Limits the model calls of a run and of a thread.
///
/// Before each model call the counts are checked: when one has reached its limit, the model
/// is not called and the run ends as [`ExitBehavior`] says: `End` (the default) with the
/// assistant message "Model call limits exceeded: run limit (5/5)", `Error` with
/// [`ModelCallLimitExceeded`]. The thread count needs a checkpointer to outlive a run.
///
/// ```
/// use kit::agent::Agent;
/// use kit::middleware::call_limits::ModelCallLimitMiddleware;
/// use kit::testing::ScriptedModel;
/// use kit::{Message, ToolCall};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
/// // A model that would call the same tool forever.
/// let model = ScriptedModel::from_fn(|_| {
///     Ok(Message::assistant_with_tool_calls("", vec![ToolCall::new("nothing", serde_json::json!({}))]))
/// });
/// let agent = Agent::builder()
///     .model(model)
///     .tool(kit::tool::Tool::from_fn(
///         "nothing",
///         "Does nothing.",
///         serde_json::json!({"type": "object"}),
///         |_args, _ctx| async { Ok::<_, kit::tool::ToolError>("ok") },
///     ))
///     .middleware(ModelCallLimitMiddleware::new().run_limit(2))
///     .build()?;
/// let out = agent.invoke("Go").await?;
/// assert_eq!(out.state().final_text(), "Model call limits exceeded: run limit (2/2)");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ModelCallLimitMiddleware {
    limits: Limits,
}

impl ModelCallLimitMiddleware {
    /// No limits yet: set at least one.
    pub fn new() -> Self {
        Self::default()
    }

    limit_setters!("model calls", "`End` (default) or `Error`");
}

#[crate::async_trait]
impl Middleware for ModelCallLimitMiddleware {
    fn name(&self) -> &str {
        "ModelCallLimitMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn on_build(&self, _agent: &BuildContext<'_>) -> Result<(), AgentError> {
        self.limits.check(self.name())?;
        if self.limits.exit == ExitBehavior::Continue {
            return Err(AgentError::Build(
                "ModelCallLimitMiddleware: exit behavior `continue` is for tool-call limits; \
                 use `End` or `Error`"
                    .into(),
            ));
        }
        Ok(())
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        vec![(MODEL_COUNT_KEY.to_string(), None)]
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let mut counter = Counter::read(rt, MODEL_COUNT_KEY);
        if self.limits.would_exceed(&counter) {
            let exceeded = ModelCallLimitExceeded {
                thread_count: counter.thread,
                run_count: counter.run,
                thread_limit: self.limits.thread,
                run_limit: self.limits.run,
            };
            super::support::report(
                rt,
                self.name(),
                "limit",
                serde_json::json!({"thread_count": counter.thread, "run_count": counter.run,
                    "thread_limit": self.limits.thread, "run_limit": self.limits.run}),
            )
            .await;
            if self.limits.exit == ExitBehavior::Error {
                return Err(AgentError::middleware_error(
                    self.name(),
                    "model_call_limit_exceeded",
                    exceeded,
                ));
            }
            let text = model_limit_message(
                counter.thread,
                counter.run,
                self.limits.thread,
                self.limits.run,
            );
            return Ok(ModelResponse {
                message: Message::assistant(text),
                finish_reason: FinishReason::Stop,
            }
            .into());
        }
        let execution = next.call(request).await?;
        counter.add(1);
        Ok(with_custom(execution, MODEL_COUNT_KEY, counter.to_value()))
    }
}

/// The tool-call limits were exceeded ([`ExitBehavior::Error`] of
/// [`ToolCallLimitMiddleware`]; kind `tool_call_limit_exceeded`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}; raise the limit, or continue on a new thread (thread limit) or with a new run (run \
     limit)",
    tool_limit_message(*thread_count, *run_count, *thread_limit, *run_limit, tool_name.as_deref())
)]
pub struct ToolCallLimitExceeded {
    /// The calls the thread would have made.
    pub thread_count: u64,
    /// The calls this run tried.
    pub run_count: u64,
    /// The thread limit, if any.
    pub thread_limit: Option<u64>,
    /// The run limit, if any.
    pub run_limit: Option<u64>,
    /// The tool limited, or `None` for all tools.
    pub tool_name: Option<String>,
}

/// LangChain's final text: "'search' tool call limit reached: run limit exceeded (3/2 calls)."
fn tool_limit_message(
    thread_count: u64,
    run_count: u64,
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    tool: Option<&str>,
) -> String {
    let who = match tool {
        Some(t) => format!("'{t}' tool"),
        None => "Tool".to_string(),
    };
    let mut parts = Vec::new();
    if let Some(l) = thread_limit.filter(|&l| thread_count > l) {
        parts.push(format!("thread limit exceeded ({thread_count}/{l} calls)"));
    }
    if let Some(l) = run_limit.filter(|&l| run_count > l) {
        parts.push(format!("run limit exceeded ({run_count}/{l} calls)"));
    }
    format!("{who} call limit reached: {}.", parts.join(" and "))
}

/// What the model sees for a blocked call (no thread or run: the model has no notion of them).
fn blocked_text(tool: Option<&str>) -> String {
    match tool {
        Some(t) => format!("Tool call limit exceeded. Do not call '{t}' again."),
        None => "Tool call limit exceeded. Do not make additional tool calls.".to_string(),
    }
}

/// What a call of the same turn gets when the run ends (`End`) before it could run.
const STOPPED_TEXT: &str = "Execution stopped before this tool call could run because another \
                            tool call in the same batch exceeded the limit.";

/// One limiter's counts and the calls of the latest model turn it blocked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ToolCounts {
    #[serde(flatten)]
    counter: Counter,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    blocked: Vec<String>,
    /// The id of the answer whose calls `blocked` names: what ties them to it, across a pause
    /// and a resume (a new run) between the answer and this limiter's `after_model`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    answer: String,
}

impl ToolCounts {
    /// True when `blocked` names calls of the latest answer in `state`: that answer is the
    /// one recorded, or (should a middleware outside this one have given the answer a new
    /// id) it holds a blocked call. For counts saved before answers were recorded: when they
    /// were counted in this run.
    fn block_latest(&self, state: &AgentState, rt: &Runtime, blocked: &HashSet<&str>) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        if self.answer.is_empty() {
            return self.counter.run_id == rt.node().invocation_id();
        }
        state
            .messages
            .iter()
            .rev()
            .find(|m| m.role == crate::message::Role::Assistant)
            .is_some_and(|m| {
                m.id == self.answer || m.tool_calls.iter().any(|c| blocked.contains(c.id.as_str()))
            })
    }
}

/// Where a run's subagents' calls wait to be counted: its thread and namespace (so calls made
/// before a pause count after the resume), or the run itself when it has no thread.
fn counted_in(rt: &Runtime) -> String {
    match rt.node().thread_id() {
        Some(thread) => format!("thread:{thread}|{}", rt.node().namespace().join("|")),
        None => format!("run:{}", rt.node().invocation_id()),
    }
}

/// Limits tool calls, of one tool or of all, per run and per thread.
///
/// After each model answer, its calls (of the limited tool, or all) are counted in order: a
/// call that would go over a limit is *blocked*. Then, as [`ExitBehavior`] says:
///
/// - `Continue` (the default): blocked calls get the error result "Tool call limit exceeded.
///   Do not call 'search' again." right after the answer (before the other calls' results, as
///   in LangChain) and do not run; the other calls run; the model carries on.
/// - `End`: the run ends after that answer. Blocked calls get that error result, the other
///   calls of the turn get "Execution stopped before this tool call could run because another
///   tool call in the same batch exceeded the limit." (LangChain raises instead, see
///   `docs/differences.md`), and a final assistant message says which limit was hit:
///   "'search' tool call limit reached: run limit exceeded (3/2 calls)."
/// - `Error`: the run fails with [`ToolCallLimitExceeded`].
///
/// As in LangChain, blocked calls count toward the run (they were tried) but not toward the
/// thread. Unlike LangChain, the limit holds in subagents too: the subagents a run starts with
/// `task` run under copies that may make, together, only the calls the run had left (nested
/// subagents draw from every level above), and the calls they made count toward the parent's
/// run and thread at its next answer. Several limiters can be combined, one per tool and one for all; each is named
/// `ToolCallLimitMiddleware[<tool>]` (or `ToolCallLimitMiddleware` for all tools).
///
/// ```
/// use kit::middleware::call_limits::{ExitBehavior, ToolCallLimitMiddleware};
///
/// let searches = ToolCallLimitMiddleware::for_tool("search").run_limit(3).thread_limit(10);
/// let all = ToolCallLimitMiddleware::all_tools().run_limit(20).exit_behavior(ExitBehavior::End);
/// # drop((searches, all));
/// ```
#[derive(Debug, Clone)]
pub struct ToolCallLimitMiddleware {
    name: String,
    key: String,
    tool_name: Option<String>,
    limits: Limits,
    /// What this limiter's subagent runs may call, and what they called.
    shares: Arc<shares::Shares>,
    /// In a subagent's copy: the parent limiter's shares.
    reports_to: Option<Arc<shares::Shares>>,
}

impl ToolCallLimitMiddleware {
    /// Limits the calls of every tool together.
    pub fn all_tools() -> Self {
        ToolCallLimitMiddleware {
            name: "ToolCallLimitMiddleware".into(),
            key: "tool_call_count.__all__".into(),
            tool_name: None,
            limits: Limits {
                exit: ExitBehavior::Continue,
                ..Limits::default()
            },
            shares: Arc::default(),
            reports_to: None,
        }
    }

    /// Limits the calls of one tool.
    pub fn for_tool(tool: impl Into<String>) -> Self {
        let tool = tool.into();
        ToolCallLimitMiddleware {
            name: format!("ToolCallLimitMiddleware[{tool}]"),
            key: format!("tool_call_count.{tool}"),
            tool_name: Some(tool),
            ..Self::all_tools()
        }
    }

    limit_setters!("calls", "`Continue` (default), `End` or `Error`");

    fn matches(&self, call: &ToolCall) -> bool {
        self.tool_name.as_deref().is_none_or(|t| t == call.name)
    }

    /// The ids blocked in the latest answer this limiter saw, as stored (not copied).
    fn blocked_list<'s>(&self, state: &'s AgentState) -> Option<&'s Vec<Value>> {
        state
            .custom
            .get(&self.key)
            .and_then(|v| v.get("blocked"))
            .and_then(Value::as_array)
    }

    fn counts(&self, state: &AgentState) -> Option<ToolCounts> {
        state
            .custom
            .get(&self.key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

#[crate::async_trait]
impl Middleware for ToolCallLimitMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn hooks(&self) -> &[Hook] {
        match self.limits.exit {
            ExitBehavior::End | ExitBehavior::Continue => &[Hook::AfterModel],
            ExitBehavior::Error => &[],
        }
    }

    fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] {
        &[JumpTo::End]
    }

    fn on_build(&self, _agent: &BuildContext<'_>) -> Result<(), AgentError> {
        self.limits.check(&self.name)?;
        if let (Some(t), Some(r)) = (self.limits.thread, self.limits.run)
            && r > t
        {
            return Err(AgentError::Build(format!(
                "{}: run_limit ({r}) cannot exceed thread_limit ({t}); the run limit should be \
                 less than or equal to the thread limit",
                self.name
            )));
        }
        Ok(())
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        vec![(self.key.clone(), None)]
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let execution = next.call(request).await?;
        let calls: Vec<&ToolCall> = execution
            .response
            .message
            .tool_calls
            .iter()
            .filter(|c| self.matches(c))
            .collect();
        let mut counter = Counter::read(rt, &self.key);
        // What this run's subagents called since its last answer counts here too.
        let by_subagents = self.shares.uncounted(&counted_in(rt));
        counter.add(by_subagents);
        if calls.is_empty() {
            // The calls blocked in an earlier answer belong to that answer only.
            if by_subagents > 0
                || self
                    .blocked_list(rt.state())
                    .is_some_and(|list| !list.is_empty())
            {
                let counts = ToolCounts {
                    counter,
                    ..ToolCounts::default()
                };
                let value = serde_json::to_value(&counts).unwrap_or(Value::Null);
                return Ok(with_custom(execution, &self.key, value));
            }
            return Ok(execution);
        }
        // In a subagent: within what the parent had left when its `task` call started.
        let share = self.reports_to.as_ref().zip(rt.node().parent_task_id());
        let mut blocked = Vec::new();
        for call in calls {
            let granted = || share.is_none_or(|(parent, task)| parent.take(task));
            if self.limits.would_exceed(&counter) || !granted() {
                blocked.push(call.id.clone());
            } else {
                counter.add(1);
            }
        }
        counter.run = counter.run.saturating_add(blocked.len() as u64);
        if !blocked.is_empty() {
            super::support::report(
                rt,
                &self.name,
                "limit",
                serde_json::json!({"blocked": blocked, "thread_count": counter.thread,
                    "run_count": counter.run, "thread_limit": self.limits.thread,
                    "run_limit": self.limits.run}),
            )
            .await;
            if self.limits.exit == ExitBehavior::Error {
                return Err(AgentError::middleware_error(
                    self.name.clone(),
                    "tool_call_limit_exceeded",
                    ToolCallLimitExceeded {
                        thread_count: counter.thread.saturating_add(blocked.len() as u64),
                        run_count: counter.run,
                        thread_limit: self.limits.thread,
                        run_limit: self.limits.run,
                        tool_name: self.tool_name.clone(),
                    },
                ));
            }
        }
        let answer = execution.response.message.id.clone();
        let counts = ToolCounts {
            counter,
            blocked,
            answer,
        };
        let value = serde_json::to_value(&counts).unwrap_or(Value::Null);
        Ok(with_custom(execution, &self.key, value))
    }

    async fn after_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let Some(counts) = self.counts(state) else {
            return Ok(None);
        };
        // A set: an answer may hold thousands of calls, most of them blocked.
        let blocked: HashSet<&str> = counts.blocked.iter().map(String::as_str).collect();
        if !counts.block_latest(state, rt, &blocked) {
            return Ok(None);
        }
        let is_blocked = |call: &ToolCall| self.matches(call) && blocked.contains(call.id.as_str());
        let pending = state.pending_tool_calls();
        let answer = |call: &ToolCall, text: String| {
            Message::tool_error(&call.id, text).with_name(&call.name)
        };
        if self.limits.exit == ExitBehavior::Continue {
            // The blocked calls are answered here, before the tools run (as LangChain does),
            // so the tools node runs only the others. (`wrap_tool_call` still refuses them,
            // should they reach the tools another way: a hook jumping to the tools, say, or
            // a thread saved before this hook answered them.)
            let messages: Vec<Message> = pending
                .iter()
                .filter(|call| is_blocked(call))
                .map(|call| answer(call, blocked_text(self.tool_name.as_deref())))
                .collect();
            if messages.is_empty() {
                return Ok(None);
            }
            return Ok(Some(HookUpdate::new(
                AgentStateUpdate::new().messages(messages),
            )));
        }
        // End: the run ends whenever this answer had blocked calls, even if another
        // middleware already answered some of them; the calls still pending are answered.
        let mut messages: Vec<Message> = pending
            .iter()
            .map(|call| {
                let text = if is_blocked(call) {
                    blocked_text(self.tool_name.as_deref())
                } else {
                    STOPPED_TEXT.to_string()
                };
                answer(call, text)
            })
            .collect();
        let blocked = counts.blocked.len() as u64;
        let text = tool_limit_message(
            counts.counter.thread.saturating_add(blocked),
            counts.counter.run,
            self.limits.thread,
            self.limits.run,
            self.tool_name.as_deref(),
        );
        messages.push(Message::assistant(text));
        Ok(Some(
            HookUpdate::new(AgentStateUpdate::new().messages(messages)).jump_to(JumpTo::End),
        ))
    }

    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        // Read in place, without copying the list: most calls that get here were allowed.
        // By id alone: the list holds only calls of this limiter's tool, and a wrapper may
        // have changed the call's name (a reviewer's edit) since.
        if self
            .blocked_list(ctx.state())
            .is_some_and(|list| list.iter().any(|id| id.as_str() == Some(call.id.as_str())))
        {
            return Ok(ToolExecution::error(
                &call,
                blocked_text(self.tool_name.as_deref()),
            ));
        }
        if call.name != TASK_TOOL {
            return next.call(call, ctx).await;
        }
        // The subagent runs of this run may make, together, the calls it has left, and what
        // they make counts here; a subagent's own subagents also draw from its share above.
        let counted_in = counted_in(rt);
        let mut counter = Counter::read(rt, &self.key);
        counter.add(self.shares.peek_uncounted(&counted_in));
        let left =
            |limit: Option<u64>, count: u64| limit.map_or(u64::MAX, |l| l.saturating_sub(count));
        let allowed =
            left(self.limits.run, counter.run).min(left(self.limits.thread, counter.thread));
        let upstream =
            self.reports_to
                .clone()
                .zip(rt.node().parent_task_id())
                .map(|(shares, task_run)| shares::Upstream {
                    shares,
                    task_run: task_run.to_string(),
                });
        let _share = self.shares.open(
            rt.node().run_id(),
            rt.node().invocation_id(),
            &counted_in,
            allowed,
            upstream,
        );
        next.call(call, ctx).await
    }

    /// A subagent runs under a copy of this limiter holding it to what this run has left.
    fn for_subagent(&self) -> Option<Arc<dyn Middleware>> {
        Some(Arc::new(ToolCallLimitMiddleware {
            shares: Arc::default(),
            reports_to: Some(self.shares.clone()),
            ..self.clone()
        }))
    }
}
