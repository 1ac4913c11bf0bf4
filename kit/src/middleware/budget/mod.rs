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
//! **Subagents.** A sync subagent's run (a `task` call) may spend no more than its parent
//! has left when the call starts, and what it spends counts against the parent's budget (in
//! the parent's [`BUDGET_KEY`] channel); [`subagent_budget`](BudgetMiddleware::subagent_budget)
//! sets a tighter budget for each subagent run. Parallel `task` calls each get what was left
//! when they started. A subagent's result larger than a size can go to the filesystem, the
//! parent getting its path (see
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

mod ledger;
mod limits;

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

pub use limits::{Budget, BudgetExceeded, BudgetLimit, Spent};

use ledger::Ledger;

use super::subagents::TASK_TOOL;
use super::support::{report, set_custom, with_custom};
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

/// The field of a write to [`BUDGET_KEY`] that adds a subagent run's spending.
const SUBAGENTS_DELTA: &str = "subagents_delta";

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
    /// Where the subagent runs of this agent's `task` calls get their cap and report.
    ledger: Arc<Ledger>,
    /// For a subagent's copy: the parent's ledger.
    reports_to: Option<Arc<Ledger>>,
}

impl BudgetMiddleware {
    /// Enforces `budget`, ending with a final answer when it runs out.
    pub fn new(budget: Budget) -> Self {
        BudgetMiddleware {
            budget,
            on_exhausted: OnExhausted::FinalAnswer,
            subagent: None,
            ledger: Arc::default(),
            reports_to: None,
        }
    }

    /// What happens when a limit is reached.
    #[must_use]
    pub fn on_exhausted(mut self, on: OnExhausted) -> Self {
        self.on_exhausted = on;
        self
    }

    /// Gives every sync subagent run this budget (stopping the same way), within what the
    /// parent has left.
    #[must_use]
    pub fn subagent_budget(mut self, budget: Budget) -> Self {
        self.subagent = Some(budget);
        self
    }

    /// The budget enforced.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// This run's budget: the configured one, and for a subagent's run no more than its
    /// parent had left when the `task` call started.
    fn effective(&self, rt: &Runtime) -> (Budget, Option<String>) {
        let Some(parent) = &self.reports_to else {
            return (self.budget, None);
        };
        // The parent's share is keyed by the run of the `task` call that started this run
        // (not by namespace: a reused call id or a `|` in one changes the child's namespace).
        let Some(key) = rt.node().parent_task_id() else {
            return (self.budget, None);
        };
        match parent.cap(key) {
            Some(cap) => (self.budget.min(&cap), Some(key.to_string())),
            None => (self.budget, None),
        }
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

/// A budget record: `null` and `{}` are a fresh count; anything else must read whole.
fn read_spent(record: &Value) -> Result<Spent, serde_json::Error> {
    match record {
        Value::Null => Ok(Spent::default()),
        Value::Object(fields) if fields.is_empty() => Ok(Spent::default()),
        other => Spent::deserialize(other),
    }
}

/// What the state says was spent, with a new count if the last run finished and the wall
/// clock of this invocation. A record that does not read (changed through `update_state`,
/// say) is an error, not a budget reset to zero: a budget fails closed.
fn current(
    state: &crate::agent::AgentState,
    invocation: &str,
) -> Result<(Spent, Duration), String> {
    let mut spent =
        read_spent(state.custom.get(BUDGET_KEY).unwrap_or(&Value::Null)).map_err(|e| {
            format!(
                "the budget's record `{BUDGET_KEY}` in the state does not read ({e}); it was \
                 changed outside the budget: set it back, or remove it (update_state with \
                 null) to start counting again"
            )
        })?;
    if spent.finished {
        spent = Spent::default();
    }
    let now = now_ms();
    if spent.invocation != invocation {
        spent.invocation = invocation.to_string();
        spent.started_ms = now;
    }
    let elapsed = Duration::from_millis(now.saturating_sub(spent.started_ms));
    Ok((spent, elapsed))
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
        // A model call writes the whole count; a `task` call adds what its subagent spent.
        let reducer: DynReducer =
            Arc::new(
                |current: &mut Value, update: Value| match update.get(SUBAGENTS_DELTA) {
                    Some(delta) => {
                        // A record that does not read stays as it is, for the next model call
                        // to report (adding to zero would forget what was spent).
                        if let Ok(mut spent) = read_spent(current) {
                            if let Ok(delta) = Spent::deserialize(delta) {
                                spent.add(&delta);
                            }
                            *current = to_value(&spent);
                        }
                    }
                    None => *current = update,
                },
            );
        vec![(BUDGET_KEY.to_string(), Some(reducer))]
    }

    /// Subagents always run under a copy: with [`subagent_budget`](Self::subagent_budget) if
    /// set, and never beyond what the parent has left, which their spending then counts
    /// against.
    fn for_subagent(&self) -> Option<Arc<dyn Middleware>> {
        Some(Arc::new(BudgetMiddleware {
            budget: self.subagent.unwrap_or_default(),
            on_exhausted: self.on_exhausted,
            subagent: self.subagent,
            ledger: Arc::default(),
            reports_to: Some(self.ledger.clone()),
        }))
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let (budget, ledger_key) = self.effective(rt);
        let (mut spent, elapsed) = current(rt.state(), rt.node().invocation_id())
            .map_err(|e| AgentError::middleware(self.name(), e))?;
        let mut exceeded = spent.exceeded(&budget, elapsed);
        // A call whose prompt alone would go over the input budget is not made.
        if exceeded.is_none()
            && let Some(max) = budget.input_tokens
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
        if let Some(max) = budget.output_tokens {
            let left = u32::try_from(max.saturating_sub(spent.output_tokens)).unwrap_or(u32::MAX);
            let cap = request.options.max_tokens.map_or(left, |m| m.min(left));
            request.options.max_tokens = Some(cap);
        }
        let model = next.model().model_name().to_string();
        let result = match budget.wall_time {
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
            // A cost that is negative or not a number (from a provider or a custom model)
            // gives no budget back (`add_cost` ignores it).
            spent.add_cost(cost);
        }
        spent.model_calls = spent.model_calls.saturating_add(1);
        spent.finished = message.tool_calls.is_empty();
        if let (Some(parent), Some(key)) = (&self.reports_to, &ledger_key) {
            parent.record(key, &spent);
        }
        let elapsed = Duration::from_millis(now_ms().saturating_sub(spent.started_ms));
        report(
            rt,
            self.name(),
            "remaining",
            spent.remaining(&budget, elapsed),
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
        let (budget, _) = self.effective(rt);
        let (spent, elapsed) = match current(ctx.state(), rt.node().invocation_id()) {
            Ok(found) => found,
            Err(e) => return Ok(ToolExecution::error(&call, format!("Error: {e}"))),
        };
        // A subagent run may spend what this run has left, and what it spends counts here.
        let child = (call.name == TASK_TOOL).then(|| {
            // Each call runs as a task of its own: its run is the subagent run's parent.
            let key = rt.node().run_id().to_string();
            let pool = rt.node().invocation_id();
            self.ledger
                .open(key, pool, budget.left_after(&spent, elapsed))
        });
        let result = match budget.wall_time {
            Some(wall) => {
                let left = wall.saturating_sub(elapsed);
                match tokio::time::timeout(left, next.call(call.clone(), ctx)).await {
                    Ok(result) => result,
                    Err(_) => Ok(ToolExecution::error(
                        &call,
                        format!(
                            "Budget exhausted: the wall time of {:.1}s ran out while `{}` ran; \
                             it was stopped.",
                            wall.as_secs_f64(),
                            call.name
                        ),
                    )),
                }
            }
            None => next.call(call.clone(), ctx).await,
        };
        let child_spent = child.and_then(ledger::Share::close);
        let mut execution = result?;
        if let Some(child_spent) = child_spent.filter(|s| *s != Spent::default()) {
            let mut update = execution.update.take().unwrap_or_default();
            set_custom(
                &mut update,
                BUDGET_KEY,
                json!({ SUBAGENTS_DELTA: to_value(&child_spent) }),
            );
            execution.update = Some(update);
        }
        Ok(execution)
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
