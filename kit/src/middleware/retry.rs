//! Retrying failed model and tool calls with backoff (LangChain's `ModelRetryMiddleware` and
//! `ToolRetryMiddleware`).
//!
//! Both wait between attempts as a graph [`RetryPolicy`] does (the same code: a first pause,
//! each pause `backoff_factor` times the one before, capped, with jitter), and both end the
//! same two ways when the retries run out, as the anchor's `on_failure` says:
//! [`OnFailure::Continue`] (the default) hands the model an error message and the run goes on;
//! [`OnFailure::Error`] fails the run with a typed error.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::support::{report, traced};
use crate::agent::{
    AgentError, AgentState, Hook, HookResult, Middleware, ModelExecution, ModelNext, Runtime,
    ToolNext,
};
use crate::graph::{Pause, RetryPolicy};
use crate::message::{Message, ToolCall};
use crate::model::{FinishReason, ModelError, ModelRequest, ModelResponse};
use crate::state::DynReducer;
use crate::tool::{ERROR_KIND_KEY, ToolContext, ToolExecution};

/// What happens when every attempt failed.
#[derive(Clone, Default)]
pub enum OnFailure {
    /// Give the model the failure as a message and carry on: an assistant message for a
    /// model call (the run ends with it), an error tool result for a tool call (the model
    /// reacts to it). The default, as in LangChain.
    #[default]
    Continue,
    /// Fail: a model call fails with its last [`ModelError`] (as LangChain re-raises the
    /// exception, so a fallback around the retry still sees it), a tool call stops the run
    /// with [`ToolRetryExhausted`].
    Error,
    /// Like `Continue`, with this text (given the failure's text) instead of the default one.
    Message(Arc<dyn Fn(&str) -> String + Send + Sync>),
}

impl std::fmt::Debug for OnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OnFailure::Continue => f.write_str("Continue"),
            OnFailure::Error => f.write_str("Error"),
            OnFailure::Message(_) => f.write_str("Message(..)"),
        }
    }
}

/// The retries and pauses of one middleware: LangChain's defaults (2 retries, 1 s first,
/// doubling, at most 60 s, with jitter).
fn default_backoff() -> RetryPolicy {
    RetryPolicy::new()
        .max_attempts(3)
        .initial_interval(Duration::from_secs(1))
        .backoff_factor(2.0)
        .max_interval(Duration::from_secs(60))
}

macro_rules! backoff_setters {
    () => {
        /// Retries after the first attempt (default 2; 0 tries once).
        #[must_use]
        pub fn max_retries(mut self, retries: u32) -> Self {
            self.backoff = self.backoff.max_attempts(retries.saturating_add(1));
            self
        }

        /// The pause before the first retry (default 1 s).
        #[must_use]
        pub fn initial_delay(mut self, delay: Duration) -> Self {
            self.backoff = self.backoff.initial_interval(delay);
            self
        }

        /// How much each pause grows over the one before (default 2; 1 keeps it constant).
        #[must_use]
        pub fn backoff_factor(mut self, factor: f64) -> Self {
            self.backoff = self.backoff.backoff_factor(factor);
            self
        }

        /// The longest backoff, before jitter (default 60 s); a provider's `retry-after`
        /// longer than this ends the retries.
        #[must_use]
        pub fn max_delay(mut self, delay: Duration) -> Self {
            self.backoff = self.backoff.max_interval(delay);
            self
        }

        /// Whether pauses are spread at random so that many failing runs do not retry at the
        /// same moment (default on).
        #[must_use]
        pub fn jitter(mut self, on: bool) -> Self {
            self.backoff = self.backoff.jitter(on);
            self
        }

        /// What happens when every attempt failed (default [`OnFailure::Continue`]).
        #[must_use]
        pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
            self.on_failure = on_failure;
            self
        }
    };
}

fn attempts_text(n: u32) -> String {
    if n == 1 {
        "1 attempt".to_string()
    } else {
        format!("{n} attempts")
    }
}

type RetryModelOn = dyn Fn(&ModelError) -> bool + Send + Sync;

/// Retries a failed model call with backoff.
///
/// By default the transient errors are retried ([`ModelError::is_transient`]: rate limits,
/// server errors such as 500 and 529, timeouts, broken connections); a `retry-after` the
/// provider sent is waited at least, and one longer than [`max_delay`](Self::max_delay) ends
/// the retries. Other errors, and the last failure, end as
/// [`on_failure`](Self::on_failure) says: with `Continue` (the default) the run ends with an
/// assistant message "Model call failed after 3 attempts with rate_limited: …" (LangChain's
/// text, with kit's error kind for the exception's type); with `Error` the call fails with
/// the last [`ModelError`], which a [`ModelFallbackMiddleware`](super::fallback::ModelFallbackMiddleware)
/// placed before the retry acts on. Failures that are not model errors (a guardrail, a pause)
/// pass through untouched.
///
/// Each retry is a `middleware` trace run (`ModelRetryMiddleware:<attempt>`) and a `ModelRetryMiddleware.retry`
/// event with the error and the pause.
///
/// ```
/// use std::time::Duration;
/// use kit::agent::Agent;
/// use kit::middleware::retry::{ModelRetryMiddleware, OnFailure};
/// use kit::model::ModelError;
/// use kit::testing::{ScriptStep, ScriptedModel};
/// use kit::Message;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
/// let model = ScriptedModel::new([
///     ScriptStep::Fail(ModelError::Timeout { provider: "scripted".into(), after: Duration::from_secs(30) }),
///     ScriptStep::Reply(Message::assistant("Done.")),
/// ]);
/// let agent = Agent::builder()
///     .model(model)
///     .middleware(
///         ModelRetryMiddleware::new()
///             .max_retries(3)
///             .initial_delay(Duration::from_millis(1))
///             .on_failure(OnFailure::Error),
///     )
///     .build()?;
/// assert_eq!(agent.invoke("Hi").await?.state().final_text(), "Done.");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ModelRetryMiddleware {
    backoff: RetryPolicy,
    retry_on: Option<Arc<RetryModelOn>>,
    on_failure: OnFailure,
}

impl std::fmt::Debug for ModelRetryMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRetryMiddleware")
            .field("backoff", &self.backoff)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

impl Default for ModelRetryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelRetryMiddleware {
    /// LangChain's defaults: 2 retries of transient errors, 1 s then doubling up to 60 s with
    /// jitter, `Continue` on failure.
    pub fn new() -> Self {
        ModelRetryMiddleware {
            backoff: default_backoff(),
            retry_on: None,
            on_failure: OnFailure::Continue,
        }
    }

    backoff_setters!();

    /// Retries only the errors `predicate` accepts (default [`ModelError::is_transient`]).
    #[must_use]
    pub fn retry_on(
        mut self,
        predicate: impl Fn(&ModelError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Some(Arc::new(predicate));
        self
    }

    fn retries(&self, e: &ModelError) -> bool {
        match &self.retry_on {
            Some(p) => p(e),
            None => e.is_transient(),
        }
    }

    fn failure(&self, error: ModelError, attempts: u32) -> Result<ModelExecution, AgentError> {
        let text = match &self.on_failure {
            OnFailure::Error => {
                tracing::warn!(attempts, error = %error, "model call failed on every attempt");
                return Err(AgentError::Model(error));
            }
            OnFailure::Continue => format!(
                "Model call failed after {} with {}: {error}",
                attempts_text(attempts),
                error.kind()
            ),
            OnFailure::Message(f) => f(&error.to_string()),
        };
        Ok(ModelResponse {
            message: Message::assistant(text),
            finish_reason: FinishReason::Stop,
        }
        .into())
    }
}

/// The pause before retry `attempt`: the backoff, or longer if the provider asked; `None` when
/// the provider asked for more than the longest pause (`max_delay`), which ends the retries
/// (as the HTTP client's `max_retry_after` does) rather than hold the run for as long as a
/// server says (a `Retry-After: 86400` would have slept a day per retry).
fn pause(backoff: &RetryPolicy, attempt: u32, error: &ModelError) -> Option<Duration> {
    let wait = backoff.delay(attempt);
    match error {
        ModelError::RateLimited {
            retry_after: Some(after),
            ..
        } if *after > backoff.longest_pause() => None,
        ModelError::RateLimited {
            retry_after: Some(after),
            ..
        } => Some(wait.max(*after)),
        _ => Some(wait),
    }
}

#[crate::async_trait]
impl Middleware for ModelRetryMiddleware {
    fn name(&self) -> &str {
        "ModelRetryMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let mut attempt = 1;
        let mut result = next.call(request.clone()).await;
        loop {
            let error = match result {
                Err(AgentError::Model(e)) => e,
                other => return other,
            };
            if !self.retries(&error) || attempt >= self.backoff.attempts() {
                return self.failure(error, attempt);
            }
            let Some(wait) = pause(&self.backoff, attempt, &error) else {
                return self.failure(error, attempt);
            };
            report(
                rt,
                self.name(),
                "retry",
                json!({"attempt": attempt + 1, "error": error.kind(),
                       "message": error.to_string(), "delay_ms": wait.as_millis() as u64}),
            )
            .await;
            tokio::time::sleep(wait).await;
            attempt += 1;
            let name = format!("ModelRetryMiddleware:{attempt}");
            result = traced(
                &name,
                || json!({"attempt": attempt, "after": error.kind()}),
                next.call(request.clone()),
            )
            .await;
        }
    }
}

/// A tool call failed on every attempt ([`OnFailure::Error`] of [`ToolRetryMiddleware`]).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, thiserror::Error)]
#[error(
    "tool `{tool}` failed after {}: {error}; the run stopped as `on_failure = Error` asks — \
     fix the tool or its service, or use `OnFailure::Continue` to let the model react",
    attempts_text(*attempts)
)]
pub struct ToolRetryExhausted {
    /// The tool.
    pub tool: String,
    /// The call's id.
    pub tool_call_id: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last error result's text.
    pub error: String,
}

type RetryToolOn = dyn Fn(&Message) -> bool + Send + Sync;

/// The state channel where a tool that failed for good waits for the run to stop.
const EXHAUSTED_KEY: &str = "tool_retry_exhausted";

/// Retries a failed tool call with backoff.
///
/// A tool call failed when its result is an error a tool *returned* (`Err(ToolError)`, kind
/// `failed` in the result's metadata, [`ERROR_KIND_KEY`]); invalid arguments are not retried
/// (the same call would fail again: the model has to fix them), nor are error results a tool
/// chose to give as its output. [`retry_on`](Self::retry_on) changes that. Limit it to some
/// tools with [`tools`](Self::tools).
///
/// When the retries run out, `Continue` (the default) gives the model an error result
/// "Tool 'search' failed after 3 attempts with failed: …. Please try again." (LangChain's
/// text); `Error` stops the run before the next model call with [`ToolRetryExhausted`]
/// (kind `tool_retry_exhausted`), the tool's error result kept in the conversation so its
/// pairing stays valid. A pause of a tool (review of a subagent) is never retried.
///
/// ```
/// use std::time::Duration;
/// use kit::middleware::retry::ToolRetryMiddleware;
///
/// let retry = ToolRetryMiddleware::new()
///     .tools(["search"])
///     .max_retries(4)
///     .initial_delay(Duration::from_millis(200));
/// # drop(retry);
/// ```
#[derive(Clone)]
pub struct ToolRetryMiddleware {
    backoff: RetryPolicy,
    tools: Option<Vec<String>>,
    retry_on: Option<Arc<RetryToolOn>>,
    on_failure: OnFailure,
}

impl std::fmt::Debug for ToolRetryMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRetryMiddleware")
            .field("backoff", &self.backoff)
            .field("tools", &self.tools)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

impl Default for ToolRetryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRetryMiddleware {
    /// LangChain's defaults: every tool, 2 retries of failed calls, 1 s then doubling up to
    /// 60 s with jitter, `Continue` on failure.
    pub fn new() -> Self {
        ToolRetryMiddleware {
            backoff: default_backoff(),
            tools: None,
            retry_on: None,
            on_failure: OnFailure::Continue,
        }
    }

    backoff_setters!();

    /// Retries only calls of these tools (default: every tool).
    #[must_use]
    pub fn tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Retries the error results `predicate` accepts (it sees the tool message; default:
    /// kind `failed`).
    #[must_use]
    pub fn retry_on(
        mut self,
        predicate: impl Fn(&Message) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Some(Arc::new(predicate));
        self
    }

    fn applies(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool))
    }

    fn retries(&self, message: &Message) -> bool {
        if !message.is_error() {
            return false;
        }
        match &self.retry_on {
            Some(p) => p(message),
            None => message.metadata.get(ERROR_KIND_KEY) == Some(&Value::from("failed")),
        }
    }
}

#[crate::async_trait]
impl Middleware for ToolRetryMiddleware {
    fn name(&self) -> &str {
        "ToolRetryMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        match self.on_failure {
            OnFailure::Error => &[Hook::BeforeModel],
            _ => &[],
        }
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        match self.on_failure {
            // Parallel calls may each fail for good in one step: the first failure of a run
            // is kept (two plain writes would be a state error that loses every result).
            OnFailure::Error => vec![(EXHAUSTED_KEY.to_string(), Some(keep_first_of_run()))],
            _ => Vec::new(),
        }
    }

    async fn before_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let Some(stash) = state.custom.get(EXHAUSTED_KEY) else {
            return Ok(None);
        };
        // Only a failure of this invocation stops it (a new run on the thread starts clean).
        if stash.get("run_id").and_then(Value::as_str) != Some(rt.node().invocation_id()) {
            return Ok(None);
        }
        match serde_json::from_value::<ToolRetryExhausted>(stash["error"].clone()) {
            Ok(e) => Err(AgentError::middleware_error(
                self.name(),
                "tool_retry_exhausted",
                e,
            )),
            Err(_) => Ok(None),
        }
    }

    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if !self.applies(&call.name) {
            return next.call(call, ctx).await;
        }
        let mut attempt = 1;
        let mut execution = next.call(call.clone(), ctx.clone()).await?;
        while self.retries(&execution.message) && attempt < self.backoff.attempts() {
            let wait = self.backoff.delay(attempt);
            report(
                rt,
                self.name(),
                "retry",
                json!({"tool": call.name, "tool_call_id": call.id, "attempt": attempt + 1,
                       "error": execution.message.text(), "delay_ms": wait.as_millis() as u64}),
            )
            .await;
            tokio::time::sleep(wait).await;
            attempt += 1;
            let name = format!("ToolRetryMiddleware:{attempt}");
            let retried: Result<ToolExecution, TracedPause> = traced(
                &name,
                || json!({"tool": call.name, "attempt": attempt}),
                async {
                    next.call(call.clone(), ctx.clone())
                        .await
                        .map_err(TracedPause)
                },
            )
            .await;
            execution = retried.map_err(|p| p.0)?;
        }
        if !self.retries(&execution.message) {
            return Ok(execution);
        }
        let error = execution.message.text();
        let text = match &self.on_failure {
            OnFailure::Message(f) => f(&error),
            OnFailure::Continue | OnFailure::Error => format!(
                "Tool '{}' failed after {} with failed: {}. Please try again.",
                call.name,
                attempts_text(attempt),
                error.strip_prefix("Error: ").unwrap_or(&error)
            ),
        };
        let mut failed = ToolExecution::error(&call, text);
        failed.message.metadata = execution.message.metadata.clone();
        if let OnFailure::Error = self.on_failure {
            let exhausted = ToolRetryExhausted {
                tool: call.name.clone(),
                tool_call_id: call.id.clone(),
                attempts: attempt,
                error,
            };
            let stash = json!({"run_id": rt.node().invocation_id(), "error": exhausted});
            failed.update = Some(
                crate::agent::AgentStateUpdate::new()
                    .custom(crate::state::DynUpdate::new().set(EXHAUSTED_KEY, stash)),
            );
        }
        Ok(failed)
    }
}

/// Keeps a run's first stash: a later one replaces it only when it is of another run.
fn keep_first_of_run() -> DynReducer {
    Arc::new(|current: &mut Value, update: Value| {
        let run = |v: &Value| v.get("run_id").and_then(Value::as_str).map(str::to_owned);
        if current.is_null() || run(current) != run(&update) {
            *current = update;
        }
    })
}

/// A pause carried through [`traced`] (which wants a displayable error).
struct TracedPause(Pause);

impl std::fmt::Display for TracedPause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("paused for outside input")
    }
}
