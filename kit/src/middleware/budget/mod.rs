//! Budgets that hold: hard limits on the tokens, dollars, wall time and model calls of a run
//! and of each subagent's run.
//!
//! [`BudgetMiddleware`] counts what every model call spends (its usage, priced with
//! [`kit::model::pricing`](crate::model::pricing)) and stops the run when a limit is reached:
//! before a model call that the budget no longer covers, and in the middle of a model or tool
//! call that outlasts the wall time. The limits are enforced, not advised: no call starts once
//! a limit is reached or when its estimated prompt would go over the input budget, the output
//! tokens of a call are capped to what is left, and a call still running when the wall time
//! ends is cancelled. (A provider's usage is known only after the call: the last call may go
//! over the input or dollar limit by what it spent, never start another.)
//!
//! **Stopping.** As [`OnExhausted`] says: a final assistant message saying which limit ran out
//! (the default), or the typed error [`BudgetExceeded`] (kind `budget_exceeded`).
//!
//! **Resuming.** What was spent is kept in the state channel [`BUDGET_KEY`], checkpointed with
//! the thread, and the count goes on until the agent answers on its own. So a run stopped by
//! its budget continues where it stopped with a raised budget: build the agent again with the
//! same checkpointer and a larger [`Budget`], then `resume(Resume::Continue)` after the error
//! (the failed model call runs again), or send a new message after the final answer. The wall
//! time counts from the first model call of each invocation.
//!
//! **Streaming.** After every model call a `BudgetMiddleware.remaining` event reports what is
//! left of each limit (`{"input_tokens", "output_tokens", "cost_usd", "wall_time_ms",
//! "model_calls"}`, the ones set), and a `BudgetMiddleware.exhausted` event the limit that
//! stopped the run; both are noted on the trace.
//!
//! **Subagents.** [`subagent_budget`](BudgetMiddleware::subagent_budget) gives every sync
//! subagent run its own budget, enforced the same way inside it. A subagent's result larger
//! than a size can go to the filesystem, the parent getting its path (see
//! [`FilesystemMiddleware::evict_tool_results_over`](crate::middleware::filesystem::FilesystemMiddleware::evict_tool_results_over)
//! and [`AgentBuilder::subagent_result_limit`](crate::agent::AgentBuilder::subagent_result_limit)).
//!
//! ```
//! use kit::agent::Agent;
//! use kit::middleware::budget::{Budget, BudgetMiddleware, OnExhausted};
//! use kit::testing::ScriptedModel;
//! use kit::{Message, ToolCall};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
//! let model = ScriptedModel::from_fn(|_| {
//!     Ok(Message::assistant_with_tool_calls("", vec![ToolCall::new("nothing", serde_json::json!({}))]))
//! });
//! let agent = Agent::builder()
//!     .model(model)
//!     .tool(kit::tool::Tool::from_fn(
//!         "nothing",
//!         "Does nothing.",
//!         serde_json::json!({"type": "object"}),
//!         |_args, _ctx| async { Ok::<_, kit::tool::ToolError>("ok") },
//!     ))
//!     .budget(Budget::new().max_model_calls(3))
//!     .build()?;
//! let err = Agent::builder()
//!     .model(ScriptedModel::new([Message::assistant("hi")]))
//!     .middleware(BudgetMiddleware::new(Budget::new().max_model_calls(0)).on_exhausted(OnExhausted::Error))
//!     .build()?
//!     .invoke("Hi")
//!     .await
//!     .unwrap_err();
//! assert_eq!(err.kind(), "budget_exceeded");
//! let out = agent.invoke("Go").await?;
//! assert!(out.state().final_text().starts_with("Budget exhausted: model_calls"));
//! # Ok(()) }
//! ```

mod limits;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub use limits::{Budget, BudgetExceeded, BudgetLimit, Spent};

use super::support::{report, with_custom};
use crate::agent::{
    AgentBuilder, AgentError, Hook, Middleware, ModelExecution, ModelNext, Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::message::{Message, ToolCall};
use crate::model::{FinishReason, ModelRequest, ModelResponse};
use crate::state::DynReducer;
use crate::tool::{ToolContext, ToolExecution};

/// The state channel holding what the run has spent ([`Spent`]).
pub const BUDGET_KEY: &str = "budget";

/// What happens when a limit is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnExhausted {
    /// End the run with a final assistant message naming the limit (the default).
    #[default]
    FinalAnswer,
    /// Fail the run with [`BudgetExceeded`] (kind `budget_exceeded`).
    Error,
}

/// Enforces a [`Budget`] on every run of the agent (see the [module](self) documentation).
#[derive(Debug, Clone)]
pub struct BudgetMiddleware {
    budget: Budget,
    on_exhausted: OnExhausted,
    subagent: Option<Budget>,
}

impl BudgetMiddleware {
    /// Enforces `budget`, ending with a final answer when it runs out.
    pub fn new(budget: Budget) -> Self {
        BudgetMiddleware {
            budget,
            on_exhausted: OnExhausted::FinalAnswer,
            subagent: None,
        }
    }

    /// What happens when a limit is reached.
    #[must_use]
    pub fn on_exhausted(mut self, on: OnExhausted) -> Self {
        self.on_exhausted = on;
        self
    }

    /// Gives every sync subagent run this budget (stopping the same way).
    #[must_use]
    pub fn subagent_budget(mut self, budget: Budget) -> Self {
        self.subagent = Some(budget);
        self
    }

    /// The budget enforced.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    fn stop(&self, exceeded: BudgetExceeded, spent: Spent) -> Result<ModelExecution, AgentError> {
        if self.on_exhausted == OnExhausted::Error {
            return Err(AgentError::middleware_error(
                self.name(),
                "budget_exceeded",
                exceeded,
            ));
        }
        let text = format!(
            "Budget exhausted: {} ({} of {} allowed). I stopped here; raise the budget to let \
             me continue.",
            exceeded.limit.as_str(),
            amount(exceeded.limit, exceeded.spent),
            amount(exceeded.limit, exceeded.allowed),
        );
        let execution: ModelExecution = ModelResponse {
            message: Message::assistant(text),
            finish_reason: FinishReason::Stop,
        }
        .into();
        Ok(with_custom(execution, BUDGET_KEY, to_value(&spent)))
    }
}

fn amount(limit: BudgetLimit, x: f64) -> String {
    match limit {
        BudgetLimit::CostUsd => format!("${x:.4}"),
        BudgetLimit::WallTime => format!("{x:.1}s"),
        _ => format!("{x:.0}"),
    }
}

fn to_value(spent: &Spent) -> Value {
    serde_json::to_value(spent).unwrap_or(Value::Null)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What the state says was spent, with a new count if the last run finished and the wall
/// clock of this invocation.
fn current(state: &crate::agent::AgentState, invocation: &str) -> (Spent, Duration) {
    let mut spent: Spent = state
        .custom
        .get(BUDGET_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    if spent.finished {
        spent = Spent::default();
    }
    let now = now_ms();
    if spent.invocation != invocation {
        spent.invocation = invocation.to_string();
        spent.started_ms = now;
    }
    (
        spent.clone(),
        Duration::from_millis(now.saturating_sub(spent.started_ms)),
    )
}

#[crate::async_trait]
impl Middleware for BudgetMiddleware {
    fn name(&self) -> &str {
        "BudgetMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        vec![(BUDGET_KEY.to_string(), None)]
    }

    fn for_subagent(&self) -> Option<Arc<dyn Middleware>> {
        self.subagent.map(|budget| {
            Arc::new(BudgetMiddleware {
                budget,
                on_exhausted: self.on_exhausted,
                subagent: Some(budget),
            }) as Arc<dyn Middleware>
        })
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let (mut spent, elapsed) = current(rt.state(), rt.node().invocation_id());
        let mut exceeded = spent.exceeded(&self.budget, elapsed);
        // A call whose prompt alone would go over the input budget is not made.
        if exceeded.is_none()
            && let Some(max) = self.budget.input_tokens
        {
            let needed = spent.input_tokens.saturating_add(request.estimate_tokens());
            if needed > max {
                exceeded = Some(BudgetExceeded {
                    limit: BudgetLimit::InputTokens,
                    spent: needed as f64,
                    allowed: max as f64,
                });
            }
        }
        if let Some(e) = exceeded {
            report(
                rt,
                self.name(),
                "exhausted",
                json!({"limit": e.limit.as_str(), "spent": e.spent, "allowed": e.allowed}),
            )
            .await;
            return self.stop(e, spent);
        }
        // The answer may not spend more output tokens than are left.
        if let Some(max) = self.budget.output_tokens {
            let left = u32::try_from(max.saturating_sub(spent.output_tokens)).unwrap_or(u32::MAX);
            let cap = request.options.max_tokens.map_or(left, |m| m.min(left));
            request.options.max_tokens = Some(cap);
        }
        let model = next.model().model_name().to_string();
        let result = match self.budget.wall_time {
            Some(wall) => {
                match tokio::time::timeout(wall.saturating_sub(elapsed), next.call(request)).await {
                    Ok(result) => result,
                    Err(_) => {
                        let e = BudgetExceeded {
                            limit: BudgetLimit::WallTime,
                            spent: wall.as_secs_f64(),
                            allowed: wall.as_secs_f64(),
                        };
                        report(
                            rt,
                            self.name(),
                            "exhausted",
                            json!({"limit": "wall_time", "spent": e.spent, "allowed": e.allowed}),
                        )
                        .await;
                        return self.stop(e, spent);
                    }
                }
            }
            None => next.call(request).await,
        };
        let execution = result?;
        let message = &execution.response.message;
        if let Some(usage) = message.usage {
            spent.input_tokens = spent.input_tokens.saturating_add(usage.input_tokens);
            spent.output_tokens = spent.output_tokens.saturating_add(usage.output_tokens);
            let cost = message
                .metadata
                .get("cost_usd")
                .and_then(Value::as_f64)
                .or_else(|| crate::model::pricing::cost(&model, &usage))
                .unwrap_or(0.0);
            spent.cost_usd += cost;
        }
        spent.model_calls = spent.model_calls.saturating_add(1);
        spent.finished = message.tool_calls.is_empty();
        let elapsed = Duration::from_millis(now_ms().saturating_sub(spent.started_ms));
        report(
            rt,
            self.name(),
            "remaining",
            spent.remaining(&self.budget, elapsed),
        )
        .await;
        Ok(with_custom(execution, BUDGET_KEY, to_value(&spent)))
    }

    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        let Some(wall) = self.budget.wall_time else {
            return next.call(call, ctx).await;
        };
        let (_, elapsed) = current(ctx.state(), rt.node().invocation_id());
        let left = wall.saturating_sub(elapsed);
        match tokio::time::timeout(left, next.call(call.clone(), ctx)).await {
            Ok(result) => result,
            Err(_) => Ok(ToolExecution::error(
                &call,
                format!(
                    "Budget exhausted: the wall time of {:.1}s ran out while `{}` ran; it was \
                     stopped.",
                    wall.as_secs_f64(),
                    call.name
                ),
            )),
        }
    }
}

impl AgentBuilder {
    /// Enforces a budget on every run of the agent, ending with a final answer when it runs
    /// out (sugar for `.middleware(BudgetMiddleware::new(budget))`; use the middleware itself
    /// for the other options).
    pub fn budget(self, budget: Budget) -> Self {
        self.middleware(BudgetMiddleware::new(budget))
    }
}
