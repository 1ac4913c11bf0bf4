//! What a budget allows, what has been spent, and the error of a budget that ran out.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Hard limits on what one run (or one subagent's run) may spend. Unset limits are unlimited.
///
/// ```
/// use std::time::Duration;
/// use kit::middleware::budget::Budget;
///
/// let budget = Budget::new()
///     .max_input_tokens(200_000)
///     .max_output_tokens(20_000)
///     .max_cost_usd(0.50)
///     .max_wall_time(Duration::from_secs(120))
///     .max_model_calls(25);
/// # drop(budget);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Budget {
    /// Input tokens (the prompt of every call, cached ones included).
    pub input_tokens: Option<u64>,
    /// Output tokens (reasoning included).
    pub output_tokens: Option<u64>,
    /// Dollars, priced by [`kit::model::pricing`](crate::model::pricing).
    pub cost_usd: Option<f64>,
    /// Wall time of one invocation, from its first model call.
    pub wall_time: Option<Duration>,
    /// Model calls.
    pub model_calls: Option<u64>,
}

impl Budget {
    /// No limits yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most this many input tokens.
    #[must_use]
    pub fn max_input_tokens(mut self, n: u64) -> Self {
        self.input_tokens = Some(n);
        self
    }

    /// At most this many output tokens.
    #[must_use]
    pub fn max_output_tokens(mut self, n: u64) -> Self {
        self.output_tokens = Some(n);
        self
    }

    /// At most this many dollars.
    #[must_use]
    pub fn max_cost_usd(mut self, dollars: f64) -> Self {
        self.cost_usd = Some(dollars);
        self
    }

    /// At most this long per invocation.
    #[must_use]
    pub fn max_wall_time(mut self, time: Duration) -> Self {
        self.wall_time = Some(time);
        self
    }

    /// At most this many model calls.
    #[must_use]
    pub fn max_model_calls(mut self, n: u64) -> Self {
        self.model_calls = Some(n);
        self
    }

    /// True when no limit is set.
    pub fn is_unlimited(&self) -> bool {
        *self == Budget::default()
    }

    /// The tighter of two budgets, limit by limit.
    #[must_use]
    pub fn min(&self, other: &Budget) -> Budget {
        fn tighter<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if y < x { y } else { x }),
                (x, None) => x,
                (None, y) => y,
            }
        }
        Budget {
            input_tokens: tighter(self.input_tokens, other.input_tokens),
            output_tokens: tighter(self.output_tokens, other.output_tokens),
            cost_usd: tighter(self.cost_usd, other.cost_usd),
            wall_time: tighter(self.wall_time, other.wall_time),
            model_calls: tighter(self.model_calls, other.model_calls),
        }
    }

    /// What is left of this budget after `spent` and `elapsed`, as a budget.
    pub(crate) fn left_after(&self, spent: &Spent, elapsed: Duration) -> Budget {
        Budget {
            input_tokens: self
                .input_tokens
                .map(|n| n.saturating_sub(spent.input_tokens)),
            output_tokens: self
                .output_tokens
                .map(|n| n.saturating_sub(spent.output_tokens)),
            cost_usd: self.cost_usd.map(|d| (d - spent.cost_usd).max(0.0)),
            wall_time: self.wall_time.map(|d| d.saturating_sub(elapsed)),
            model_calls: self
                .model_calls
                .map(|n| n.saturating_sub(spent.model_calls)),
        }
    }
}

/// Which limit of a [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    /// [`Budget::input_tokens`].
    InputTokens,
    /// [`Budget::output_tokens`].
    OutputTokens,
    /// [`Budget::cost_usd`].
    CostUsd,
    /// [`Budget::wall_time`].
    WallTime,
    /// [`Budget::model_calls`].
    ModelCalls,
}

impl BudgetLimit {
    /// The limit's name (`input_tokens`, `cost_usd`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetLimit::InputTokens => "input_tokens",
            BudgetLimit::OutputTokens => "output_tokens",
            BudgetLimit::CostUsd => "cost_usd",
            BudgetLimit::WallTime => "wall_time",
            BudgetLimit::ModelCalls => "model_calls",
        }
    }
}

/// A budget ran out (kind `budget_exceeded`): which limit, what was spent and what was
/// allowed. The thread's state is checkpointed as it was; continue it with a raised budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "budget exhausted: {} {spent} of {allowed} allowed; raise the budget and continue the \
     thread (`resume` after this error, or a new message)",
    limit.as_str()
)]
pub struct BudgetExceeded {
    /// The limit that ran out.
    pub limit: BudgetLimit,
    /// What was spent (tokens, dollars, seconds or calls).
    pub spent: f64,
    /// What was allowed.
    pub allowed: f64,
}

/// What a run has spent: kept in the state channel [`BUDGET_KEY`](super::BUDGET_KEY), so a run
/// continued after its budget ran out goes on counting.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Dollars (of the calls whose model has a price).
    pub cost_usd: f64,
    /// Model calls.
    pub model_calls: u64,
    /// True once the agent answered on its own: the next run starts a new count.
    #[serde(default)]
    pub finished: bool,
    /// The invocation the wall time counts in, and when it started (ms since the epoch).
    #[serde(default)]
    pub invocation: String,
    /// When that invocation's first model call started (ms since the epoch).
    #[serde(default)]
    pub started_ms: u64,
}

impl Spent {
    /// Adds `dollars`, saturating at `f64::MAX`: an infinite count would be saved as `null`
    /// and no longer read. Negative and non-finite amounts add nothing.
    pub(crate) fn add_cost(&mut self, dollars: f64) {
        if dollars.is_finite() && dollars > 0.0 {
            self.cost_usd = (self.cost_usd + dollars).min(f64::MAX);
        }
    }

    /// Adds what `other` spent (a subagent's run) to this.
    pub(crate) fn add(&mut self, other: &Spent) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.add_cost(other.cost_usd);
        self.model_calls = self.model_calls.saturating_add(other.model_calls);
    }

    /// The first limit of `budget` this has reached, with what was spent and allowed.
    pub(crate) fn exceeded(&self, budget: &Budget, elapsed: Duration) -> Option<BudgetExceeded> {
        let over = |limit, spent: f64, allowed: Option<f64>| {
            allowed
                .filter(|&a| spent >= a)
                .map(|allowed| BudgetExceeded {
                    limit,
                    spent,
                    allowed,
                })
        };
        over(
            BudgetLimit::InputTokens,
            self.input_tokens as f64,
            budget.input_tokens.map(|n| n as f64),
        )
        .or_else(|| {
            over(
                BudgetLimit::OutputTokens,
                self.output_tokens as f64,
                budget.output_tokens.map(|n| n as f64),
            )
        })
        .or_else(|| over(BudgetLimit::CostUsd, self.cost_usd, budget.cost_usd))
        .or_else(|| {
            over(
                BudgetLimit::ModelCalls,
                self.model_calls as f64,
                budget.model_calls.map(|n| n as f64),
            )
        })
        .or_else(|| {
            over(
                BudgetLimit::WallTime,
                elapsed.as_secs_f64(),
                budget.wall_time.map(|d| d.as_secs_f64()),
            )
        })
    }

    /// What is left of each set limit, as the `remaining` event reports it.
    pub(crate) fn remaining(&self, budget: &Budget, elapsed: Duration) -> Value {
        let mut left = Map::new();
        if let Some(n) = budget.input_tokens {
            left.insert(
                "input_tokens".into(),
                json!(n.saturating_sub(self.input_tokens)),
            );
        }
        if let Some(n) = budget.output_tokens {
            left.insert(
                "output_tokens".into(),
                json!(n.saturating_sub(self.output_tokens)),
            );
        }
        if let Some(d) = budget.cost_usd {
            left.insert("cost_usd".into(), json!((d - self.cost_usd).max(0.0)));
        }
        if let Some(d) = budget.wall_time {
            left.insert(
                "wall_time_ms".into(),
                json!(d.saturating_sub(elapsed).as_millis() as u64),
            );
        }
        if let Some(n) = budget.model_calls {
            left.insert(
                "model_calls".into(),
                json!(n.saturating_sub(self.model_calls)),
            );
        }
        Value::Object(left)
    }
}
