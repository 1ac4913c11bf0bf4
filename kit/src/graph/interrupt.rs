//! Interrupts, resume payloads and run outcomes.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A pause waiting for outside input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// Stable id; resume values can be addressed to it.
    pub id: String,
    /// What the node asked (the value given to `interrupt`; `null` for static interrupts).
    pub value: Value,
    /// The node that raised it.
    pub node: String,
    /// The path of subgraphs it was raised in (empty at the top level).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace: Vec<String>,
}

/// The signal that a run pauses for outside input, carrying the interrupts raised.
///
/// It is the one pause type of kit: [`NodeContext::interrupt`](super::NodeContext::interrupt)
/// returns it, and [`NodeError`](super::NodeError), [`AgentError`](crate::AgentError) and
/// [`ToolError`](crate::tool::ToolError) convert from it, so `?` pauses the run the same way from
/// a graph node, an agent hook, a model-call wrapper or a tool. The run then ends with
/// [`Outcome::Interrupted`]; callers of `invoke` and `resume` never see a `Pause` as an error.
///
/// It deliberately does not implement `std::error::Error`: it is control flow, not a failure,
/// and must not be swallowed by a blanket `From<E: Error>` conversion.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a pause must be propagated (with `?`) for the run to stop and wait"]
pub struct Pause {
    interrupts: Vec<Interrupt>,
}

impl Pause {
    /// A pause for these interrupts (for example, the ones a subgraph raised).
    pub fn new(interrupts: Vec<Interrupt>) -> Self {
        Pause { interrupts }
    }

    /// What the run waits for.
    pub fn interrupts(&self) -> &[Interrupt] {
        &self.interrupts
    }

    /// The interrupts, by value.
    pub fn into_interrupts(self) -> Vec<Interrupt> {
        self.interrupts
    }
}

impl std::fmt::Display for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "paused for outside input ({} pending)",
            self.interrupts.len()
        )
    }
}

/// How a run ended when it did not fail.
#[derive(Debug, Clone)]
pub enum Outcome<S> {
    /// The run finished; the final state.
    Done(S),
    /// The run paused; resume it with `resume` and the same thread.
    Interrupted(Interrupted<S>),
}

/// A paused run.
#[derive(Debug, Clone)]
pub struct Interrupted<S> {
    /// What the run waits for, one entry per pending interrupt.
    pub interrupts: Vec<Interrupt>,
    /// The state at the pause.
    pub state: S,
    /// The checkpoint the run paused at.
    pub checkpoint_id: Option<String>,
}

impl<S> Outcome<S> {
    /// The state, whether the run finished or paused.
    pub fn state(&self) -> &S {
        match self {
            Outcome::Done(s) => s,
            Outcome::Interrupted(i) => &i.state,
        }
    }

    /// The state, by value.
    pub fn into_state(self) -> S {
        match self {
            Outcome::Done(s) => s,
            Outcome::Interrupted(i) => i.state,
        }
    }

    /// True when the run paused.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Outcome::Interrupted(_))
    }

    /// The pending interrupts (empty when done).
    pub fn interrupts(&self) -> &[Interrupt] {
        match self {
            Outcome::Done(_) => &[],
            Outcome::Interrupted(i) => &i.interrupts,
        }
    }

    /// The final state, or `None` if the run paused.
    pub fn done(self) -> Option<S> {
        match self {
            Outcome::Done(s) => Some(s),
            Outcome::Interrupted(_) => None,
        }
    }
}

/// The payload of `resume`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Resume {
    /// No value: continue a thread paused by a static interrupt, or re-run the failed node of a
    /// thread whose last run failed.
    #[default]
    Continue,
    /// One value, for the single pending interrupt.
    Value(Value),
    /// Values by interrupt id, when several interrupts are pending.
    ByIds(HashMap<String, Value>),
}

impl Resume {
    /// The payload as JSON (traces and logs): `null` to continue, the value, or an object of
    /// values by interrupt id.
    pub fn to_json(&self) -> Value {
        match self {
            Resume::Continue => Value::Null,
            Resume::Value(v) => v.clone(),
            Resume::ByIds(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
        }
    }

    /// A single resume value.
    pub fn value(value: impl Serialize) -> Self {
        Resume::Value(serde_json::to_value(value).unwrap_or(Value::Null))
    }

    /// Values by interrupt id.
    pub fn by_ids<I, K, V>(values: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Serialize,
    {
        Resume::ByIds(
            values
                .into_iter()
                .map(|(k, v)| (k.into(), serde_json::to_value(v).unwrap_or(Value::Null)))
                .collect(),
        )
    }
}

impl From<Value> for Resume {
    fn from(value: Value) -> Self {
        Resume::Value(value)
    }
}
