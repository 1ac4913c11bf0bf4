//! Structured output: the final answer as a validated value of a schema, typed when you ask.
//!
//! Give an agent a response format (`response_format = Report` in `#[agent]`, or
//! [`AgentBuilder::response_format`](super::AgentBuilder::response_format)) and its final
//! answer is checked against the schema and kept in `AgentState::structured_response`.
//!
//! | strategy | how the model answers | used |
//! |---|---|---|
//! | [`Provider`](StructuredStrategy::Provider) | the provider's native JSON-schema mode (`response_format` on OpenAI) | by default when the model supports it |
//! | [`Tool`](StructuredStrategy::Tool) | it calls a tool named after the format, whose arguments are the answer (LangChain's `ToolStrategy`) | otherwise (Anthropic) |
//!
//! An answer that does not parse or does not match the schema is sent back to the model with
//! what is wrong, up to [`max_retries`](StructuredOutput::max_retries) times (2 by default);
//! then the run fails with [`StructuredOutputError`], which says what failed validation and
//! keeps the last answer. Nothing panics, and with a checkpointer the thread stays resumable.
//!
//! ```
//! use kit::agent::{Agent, StructuredOutput};
//! use kit::testing::ScriptedModel;
//! use kit::Message;
//!
//! /// A short report.
//! #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
//! struct Report {
//!     title: String,
//!     score: u8,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::AgentError> {
//! let model = ScriptedModel::new([
//!     Message::assistant("not json"),                        // fed back once
//!     Message::assistant(r#"{"title": "Q3", "score": 7}"#),
//! ]);
//! let agent = Agent::builder()
//!     .model(model)
//!     .response_format(StructuredOutput::of::<Report>())
//!     .build()?;
//! let report: Report = agent.invoke("Rate Q3.").await?.structured()?.unwrap();
//! assert_eq!(report, Report { title: "Q3".into(), score: 7 });
//! # Ok(()) }
//! ```

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{AgentError, AgentOutcome, AgentState};
use crate::graph::{Interrupted, Outcome};
use crate::message::{Message, Role};
use crate::model::{ResponseFormat, ToolSpec};

/// How the model is asked for a structured answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StructuredStrategy {
    /// The provider's native mode when the model has one, else a tool.
    #[default]
    Auto,
    /// The provider's native JSON-schema mode.
    Provider,
    /// A tool named after the format, whose arguments are the answer.
    Tool,
}

/// A structured answer asked of an agent: the format, the strategy, and how many invalid
/// answers are sent back to the model before the run fails.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct StructuredOutput {
    /// The schema of the answer.
    pub format: ResponseFormat,
    /// How the model is asked.
    pub strategy: StructuredStrategy,
    /// Invalid answers fed back to the model before the run fails (default 2).
    pub max_retries: u32,
}

impl StructuredOutput {
    /// The format of `T`'s JSON Schema (its name, strict), the `Auto` strategy, two retries.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        let name = T::schema_name().to_string();
        ResponseFormat {
            name: tool_name(&name),
            schema: crate::__private::tool_schema::<T>(),
            strict: true,
        }
        .into()
    }

    /// The strategy.
    pub fn strategy(mut self, strategy: StructuredStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// How many invalid answers go back to the model before the run fails.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }
}

impl From<ResponseFormat> for StructuredOutput {
    fn from(format: ResponseFormat) -> Self {
        StructuredOutput {
            format,
            strategy: StructuredStrategy::Auto,
            max_retries: 2,
        }
    }
}

/// A provider-safe tool name from a schema name (`Report`, `my::Report<T>`).
fn tool_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "structured_answer".to_string()
    } else {
        cleaned
    }
}

/// The model's answers never matched the schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the model's structured answer is not valid after {attempts} attempt(s): {}; the last answer \
     was: {answer} — make the schema easier to follow, raise `max_retries`, or choose a model \
     with native structured output",
    .errors.join("; ")
)]
#[non_exhaustive]
pub struct StructuredOutputError {
    /// What failed validation in the last answer.
    pub errors: Vec<String>,
    /// The last answer (its text, or the format tool's arguments).
    pub answer: String,
    /// How many answers were tried.
    pub attempts: u32,
}

/// How an agent with a structured answer ended: the typed answer with the final state, or a
/// pause.
#[derive(Debug, Clone)]
pub enum TypedOutcome<T> {
    /// The run finished with this answer.
    Done {
        /// The answer.
        output: T,
        /// The final state.
        state: AgentState,
    },
    /// The run paused for outside input; resume it to get the answer.
    Interrupted(Interrupted<AgentState>),
}

impl<T> TypedOutcome<T> {
    /// The answer, or `None` when the run paused.
    pub fn output(self) -> Option<T> {
        match self {
            TypedOutcome::Done { output, .. } => Some(output),
            TypedOutcome::Interrupted(_) => None,
        }
    }

    /// The state, whether the run finished or paused.
    pub fn state(&self) -> &AgentState {
        match self {
            TypedOutcome::Done { state, .. } => state,
            TypedOutcome::Interrupted(i) => &i.state,
        }
    }

    /// True when the run paused.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, TypedOutcome::Interrupted(_))
    }
}

impl Outcome<AgentState> {
    /// The structured answer as a `T`: `None` when the run paused or the agent has no
    /// response format; an error when the answer is not a `T`.
    pub fn structured<T: DeserializeOwned>(&self) -> Result<Option<T>, AgentError> {
        match self {
            Outcome::Done(state) => state
                .structured_response
                .as_ref()
                .map(|v| serde_json::from_value(v.clone()).map_err(|e| not_a_t::<T>(v, e)))
                .transpose(),
            Outcome::Interrupted(_) => Ok(None),
        }
    }

    /// This outcome with the structured answer as a `T` (what `#[agent]` with a response
    /// format returns).
    pub fn typed<T: DeserializeOwned>(self) -> Result<TypedOutcome<T>, AgentError> {
        match self {
            Outcome::Done(state) => {
                let value = state.structured_response.clone().ok_or_else(|| {
                    AgentError::StructuredOutput(StructuredOutputError {
                        errors: vec!["the run ended without a structured answer".into()],
                        answer: state.final_text(),
                        attempts: 0,
                    })
                })?;
                let output =
                    serde_json::from_value(value.clone()).map_err(|e| not_a_t::<T>(&value, e))?;
                Ok(TypedOutcome::Done { output, state })
            }
            Outcome::Interrupted(i) => Ok(TypedOutcome::Interrupted(i)),
        }
    }
}

/// The typed outcome of a declared agent's run.
#[doc(hidden)]
pub fn typed_outcome<T: DeserializeOwned>(
    outcome: AgentOutcome,
) -> Result<TypedOutcome<T>, AgentError> {
    outcome.typed()
}

fn not_a_t<T>(value: &Value, e: serde_json::Error) -> AgentError {
    AgentError::StructuredOutput(StructuredOutputError {
        errors: vec![format!("it is not a `{}`: {e}", std::any::type_name::<T>())],
        answer: crate::text::clip(&value.to_string(), 2000),
        attempts: 1,
    })
}

/// The metadata key marking the messages that send an invalid answer back.
const RETRY_MARK: &str = "kit_structured_retry";

/// What the model node does with an answer, given the agent's structured output.
pub(crate) enum Verdict {
    /// Not a final answer (it calls the agent's tools): carry on.
    NotFinal,
    /// A valid answer: keep it, then finish. `ack` answers the format tool's call.
    Valid { value: Value, ack: Vec<Message> },
    /// An invalid answer: these messages send it back to the model.
    Retry(Vec<Message>),
}

impl StructuredOutput {
    /// The strategy this model gets.
    pub(crate) fn resolved(&self, native: bool) -> StructuredStrategy {
        match self.strategy {
            StructuredStrategy::Auto if native => StructuredStrategy::Provider,
            StructuredStrategy::Auto => StructuredStrategy::Tool,
            other => other,
        }
    }

    /// The tool the model answers through (tool strategy).
    pub(crate) fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.format.name.clone(),
            description: format!(
                "Give your final answer by calling this tool once, with the answer as its \
                 arguments (the `{}` structure). Call it only when you are done.",
                self.format.name
            ),
            parameters: self.format.schema.clone(),
            strict: None,
        }
    }

    /// Judges an answer; `history` is the conversation before it (to count earlier attempts).
    pub(crate) fn judge(
        &self,
        strategy: StructuredStrategy,
        answer: &Message,
        history: &[Message],
    ) -> Result<Verdict, AgentError> {
        let (candidate, call) = match strategy {
            StructuredStrategy::Tool => {
                let Some(call) = answer
                    .tool_calls
                    .iter()
                    .find(|c| c.name == self.format.name)
                else {
                    if !answer.tool_calls.is_empty() {
                        return Ok(Verdict::NotFinal);
                    }
                    // A plain-text answer: still a final answer, sent back to use the tool.
                    let text = answer.text();
                    let errors = vec![format!(
                        "the final answer must be given by calling the `{}` tool",
                        self.format.name
                    )];
                    return self.retry(errors, text, None, &[], history);
                };
                (Ok(call.args.clone()), Some(call))
            }
            _ => {
                if !answer.tool_calls.is_empty() {
                    return Ok(Verdict::NotFinal);
                }
                let text = answer.text();
                let trimmed = strip_fence(text.trim());
                (
                    serde_json::from_str::<Value>(trimmed)
                        .map_err(|e| vec![format!("the answer is not JSON ({e})")]),
                    None,
                )
            }
        };
        let shown = match &candidate {
            Ok(v) => crate::text::clip(&v.to_string(), 2000),
            Err(_) => crate::text::clip(&answer.text(), 2000),
        };
        let checked = candidate.and_then(|value| {
            crate::tool::validate_args(&self.format.schema, &value).map(|()| value)
        });
        match checked {
            Ok(value) => {
                let ack = match call {
                    Some(call) => {
                        let mut ack = vec![
                            Message::tool(
                                &call.id,
                                format!("Returning structured response: {value}"),
                            )
                            .with_name(&call.name),
                        ];
                        // Other calls of the same message are not run: the answer is final.
                        for other in answer.tool_calls.iter().filter(|c| c.id != call.id) {
                            ack.push(
                                Message::tool_error(
                                    &other.id,
                                    "Not run: the final answer was given in the same message.",
                                )
                                .with_name(&other.name),
                            );
                        }
                        ack
                    }
                    None => Vec::new(),
                };
                Ok(Verdict::Valid { value, ack })
            }
            Err(errors) => self.retry(errors, shown, call, &answer.tool_calls, history),
        }
    }

    fn retry(
        &self,
        errors: Vec<String>,
        answer: String,
        call: Option<&crate::message::ToolCall>,
        calls: &[crate::message::ToolCall],
        history: &[Message],
    ) -> Result<Verdict, AgentError> {
        let attempts = earlier_attempts(history) + 1;
        if attempts > self.max_retries {
            return Err(AgentError::StructuredOutput(StructuredOutputError {
                errors,
                answer,
                attempts,
            }));
        }
        let feedback = format!(
            "Your answer does not match the required `{}` structure: {}. Answer again{}.",
            self.format.name,
            errors.join("; "),
            if call.is_some() {
                " by calling the tool with corrected arguments"
            } else {
                " with only a JSON value that matches the schema"
            }
        );
        let mut message = match call {
            Some(call) => Message::tool_error(&call.id, feedback).with_name(&call.name),
            None => Message::user(feedback),
        };
        message
            .metadata
            .insert(RETRY_MARK.to_string(), Value::Bool(true));
        let mut feedback = vec![message];
        // The answer goes back to the model: the other calls of its message are not run, and
        // each still gets its one result.
        if let Some(call) = call {
            for other in calls.iter().filter(|c| c.id != call.id) {
                feedback.push(
                    Message::tool_error(
                        &other.id,
                        "Not run: the final answer in the same message was invalid; call the \
                         tool again if it is still needed.",
                    )
                    .with_name(&other.name),
                );
            }
        }
        Ok(Verdict::Retry(feedback))
    }
}

/// Invalid answers sent back since the last message a person (or a caller) wrote.
fn earlier_attempts(history: &[Message]) -> u32 {
    let mut attempts = 0u32;
    for m in history.iter().rev() {
        if m.metadata.contains_key(RETRY_MARK) {
            attempts = attempts.saturating_add(1);
        } else if m.role == Role::User {
            break;
        }
    }
    attempts
}

/// The JSON inside a Markdown code fence, when the model wrapped it in one.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}
