//! Provider moderation: checks the user's input, the model's answers and tool results with
//! OpenAI's moderation endpoint, and ends the run, replaces the content or fails when
//! something is flagged.
//!
//! ```no_run
//! use kit::agent::Agent;
//! use kit::middleware::moderation::{ExitBehavior, ModerationMiddleware};
//! use kit::{Config, RunOptions};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let moderation = ModerationMiddleware::new(&Config::from_env())? // needs OPENAI_API_KEY
//!     .check_tool_results(true)
//!     .exit_behavior(ExitBehavior::End);
//! let agent = Agent::builder()
//!     .model("openai:gpt-4o-mini")
//!     .middleware(moderation)
//!     .build()?;
//! let out = agent.invoke("Hello!").await?;
//! println!("{}", out.state().final_text());
//! # Ok(()) }
//! ```
//!
//! **The request.** `POST {base_url}/moderations` with `{"model": "omni-moderation-latest",
//! "input": [texts]}` and the key as a bearer token; the base URL is `Config::openai_base_url`
//! (default `https://api.openai.com/v1`) or [`ModerationMiddleware::base_url`]. Every text a
//! hook checks goes in one request; the answer's `results` are read in the same order
//! ([`ModerationResult`]: `flagged`, `categories`, `category_scores`,
//! `category_applied_input_types`).
//!
//! **What is checked** (as in LangChain's `OpenAIModerationMiddleware`):
//!
//! | option | default | checked | stage |
//! |---|---|---|---|
//! | `check_tool_results` | off | before each model call: each tool result after the last assistant message | `tool` |
//! | `check_input` | on | before each model call: the last user message, once (when it is newer than the last assistant message; the anchor sends it again before every model call of the run) | `input` |
//! | `check_output` | on | after each model call: the assistant message's text | `output` |
//!
//! **When something is flagged** ([`ExitBehavior`]):
//!
//! | behaviour | flagged input or tool result | flagged output |
//! |---|---|---|
//! | `end` (default) | an assistant message with the violation text is appended and the run ends; the model is not called | the violation text is appended as a second assistant message and the run ends (its tool calls do not run) |
//! | `replace` | the message's content is replaced by the violation text and the run goes on | the answer's text is replaced in place (its tool calls are kept) |
//! | `error` | the run fails with [`ModerationFlagged`] (stage, categories, message), read with [`AgentError::moderation_flagged`] | same |
//!
//! The violation text defaults to "I'm sorry, but I can't comply with that request. It was
//! flagged for {categories}." where `{categories}` lists the flagged categories with `-`, `/`
//! and `_` read as spaces ("violence, self harm intent"), or "OpenAI's safety policies" when
//! none is named. A custom template may use `{categories}`, `{category_scores}` (the scores as
//! sorted JSON) and `{original_content}`; a template with another placeholder is used as is.
//!
//! **Failures.** A missing key is an error when the middleware is made
//! ([`ModerationError::MissingApiKey`]). Requests go through the shared HTTP layer
//! ([`kit::http`](crate::http): 30 s timeout, retries on 429, 5xx and connection failures,
//! redacted tracing). A request that still fails (network, HTTP status, an answer that does
//! not parse) fails the run with [`AgentError::Middleware`] naming the cause: a guardrail
//! that cannot check does not let content through.

mod api;
mod error;
mod violation;
pub use api::{ModerationResponse, ModerationResult};
pub use error::{ModerationError, ModerationFlagged};
use violation::{Flagged, format_violation};

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::agent::{
    AgentError, AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware, Runtime,
};
use crate::config::Config;
use crate::http::{HttpClient, HttpRequest};
use crate::message::{Message, Role};

/// The moderation model used unless another is set.
pub const DEFAULT_MODEL: &str = "omni-moderation-latest";

/// The API base URL used unless the configuration or [`ModerationMiddleware::base_url`] sets
/// another.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The anchor's violation text.
pub const DEFAULT_VIOLATION_MESSAGE: &str =
    "I'm sorry, but I can't comply with that request. It was flagged for {categories}.";

/// The middleware's name.
pub const NAME: &str = "OpenAIModerationMiddleware";

/// The categories of the moderation API, in its documented order (flagged categories are
/// listed in this order; others after them, alphabetically).
pub const CATEGORIES: [&str; 13] = [
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
];

/// What happens when content is flagged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitBehavior {
    /// End the run with the violation message.
    #[default]
    End,
    /// Replace the flagged content with the violation message and go on.
    Replace,
    /// Fail the run with [`ModerationFlagged`].
    Error,
}

impl std::str::FromStr for ExitBehavior {
    type Err = ModerationError;

    fn from_str(s: &str) -> Result<Self, ModerationError> {
        match s {
            "end" => Ok(ExitBehavior::End),
            "replace" => Ok(ExitBehavior::Replace),
            "error" => Ok(ExitBehavior::Error),
            other => Err(ModerationError::UnknownExitBehavior(other.to_string())),
        }
    }
}

/// Checks content with OpenAI's moderation endpoint (see the [module documentation](self)).
///
/// ```
/// use kit::middleware::moderation::{ExitBehavior, ModerationError, ModerationMiddleware};
/// use kit::Config;
///
/// let config = Config { openai_api_key: Some("sk-test".into()), ..Config::default() };
/// let moderation = ModerationMiddleware::new(&config)
///     .unwrap()
///     .base_url("http://127.0.0.1:9/v1")
///     .check_output(false)
///     .exit_behavior(ExitBehavior::Error)
///     .violation_message("Blocked ({categories}).");
/// # let _ = moderation;
///
/// let err = ModerationMiddleware::new(&Config::default()).unwrap_err();
/// assert!(matches!(err, ModerationError::MissingApiKey));
/// assert!(err.to_string().contains("OPENAI_API_KEY"));
/// ```
#[derive(Clone)]
pub struct ModerationMiddleware {
    model: String,
    check_input: bool,
    check_output: bool,
    check_tool_results: bool,
    exit_behavior: ExitBehavior,
    violation_message: Option<String>,
    base_url: String,
    api_key: String,
    http: HttpClient,
}

impl std::fmt::Debug for ModerationMiddleware {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModerationMiddleware")
            .field("model", &self.model)
            .field("check_input", &self.check_input)
            .field("check_output", &self.check_output)
            .field("check_tool_results", &self.check_tool_results)
            .field("exit_behavior", &self.exit_behavior)
            .field("violation_message", &self.violation_message)
            .field("base_url", &crate::http::redact_url_text(&self.base_url))
            .finish_non_exhaustive()
    }
}

impl ModerationMiddleware {
    /// Moderation with the key and base URL of `config`; fails when it has no OpenAI key.
    pub fn new(config: &Config) -> Result<Self, ModerationError> {
        let api_key = config
            .openai_api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or(ModerationError::MissingApiKey)?;
        Ok(ModerationMiddleware {
            model: DEFAULT_MODEL.to_string(),
            check_input: true,
            check_output: true,
            check_tool_results: false,
            exit_behavior: ExitBehavior::End,
            violation_message: None,
            base_url: config
                .openai_base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_string()),
            api_key,
            http: HttpClient::new().timeout(Duration::from_secs(30)),
        })
    }

    /// Moderation configured from the environment (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    pub fn from_env() -> Result<Self, ModerationError> {
        Self::new(&Config::from_env())
    }

    /// The moderation model (default `omni-moderation-latest`).
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Check the user's input (default on).
    #[must_use]
    pub fn check_input(mut self, on: bool) -> Self {
        self.check_input = on;
        self
    }

    /// Check the model's answers (default on).
    #[must_use]
    pub fn check_output(mut self, on: bool) -> Self {
        self.check_output = on;
        self
    }

    /// Check tool results (default off).
    #[must_use]
    pub fn check_tool_results(mut self, on: bool) -> Self {
        self.check_tool_results = on;
        self
    }

    /// What happens when something is flagged (default [`ExitBehavior::End`]).
    #[must_use]
    pub fn exit_behavior(mut self, behavior: ExitBehavior) -> Self {
        self.exit_behavior = behavior;
        self
    }

    /// The violation text template (placeholders `{categories}`, `{category_scores}`,
    /// `{original_content}`).
    #[must_use]
    pub fn violation_message(mut self, template: impl Into<String>) -> Self {
        self.violation_message = Some(template.into());
        self
    }

    /// The API base URL, up to and including `/v1` (default from the configuration, else
    /// `https://api.openai.com/v1`).
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key (default from the configuration).
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = key.into();
        self
    }

    /// The timeout of one moderation request (default 30 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.http = self.http.timeout(timeout);
        self
    }

    /// The HTTP client (default: the shared pool, 30 s timeout, the default retry policy),
    /// e.g. to change retries or use your own `reqwest::Client`.
    #[must_use]
    pub fn http_client(mut self, http: HttpClient) -> Self {
        self.http = http;
        self
    }

    /// Moderates texts in one request; one result per text, in order.
    pub async fn moderate(&self, texts: &[&str]) -> Result<Vec<ModerationResult>, ModerationError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let url = format!("{}/moderations", self.base_url.trim_end_matches('/'));
        let body = json!({"model": self.model, "input": texts});
        let request = HttpRequest::post(&url)
            .bearer_auth(&self.api_key)
            .json(&body);
        let response: ModerationResponse = self.http.send(request).await?.json()?;
        if response.results.len() != texts.len() {
            return Err(ModerationError::Decode {
                url,
                message: format!(
                    "{} result(s) for {} input(s)",
                    response.results.len(),
                    texts.len()
                ),
            });
        }
        Ok(response.results)
    }

    /// The violation text for a flagged result.
    pub fn violation_text(&self, result: &ModerationResult, original: &str) -> String {
        let template = self
            .violation_message
            .as_deref()
            .unwrap_or(DEFAULT_VIOLATION_MESSAGE);
        format_violation(template, result, original)
    }

    async fn check(&self, texts: &[&str]) -> Result<Vec<ModerationResult>, AgentError> {
        self.moderate(texts)
            .await
            .map_err(|e| AgentError::middleware_error(NAME, "middleware", e))
    }

    /// What a flagged text leads to: the replacement text, or the end of the run / an error.
    fn on_flagged(
        &self,
        stage: &str,
        result: &ModerationResult,
        original: &str,
    ) -> Result<Flagged, AgentError> {
        let message = self.violation_text(result, original);
        match self.exit_behavior {
            ExitBehavior::Error => Err(AgentError::middleware_error(
                NAME,
                ModerationFlagged::KIND,
                ModerationFlagged {
                    stage: stage.to_string(),
                    categories: result.flagged_categories(),
                    message,
                },
            )),
            ExitBehavior::End => Ok(Flagged::End(message)),
            ExitBehavior::Replace => Ok(Flagged::Replace(message)),
        }
    }
}

#[crate::async_trait]
impl Middleware for ModerationMiddleware {
    fn name(&self) -> &str {
        NAME
    }

    fn for_subagent(&self) -> Option<std::sync::Arc<dyn Middleware>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn hooks(&self) -> &[Hook] {
        match (
            self.check_input || self.check_tool_results,
            self.check_output,
        ) {
            (true, true) => &[Hook::BeforeModel, Hook::AfterModel],
            (true, false) => &[Hook::BeforeModel],
            (false, true) => &[Hook::AfterModel],
            (false, false) => &[],
        }
    }

    fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] {
        &[JumpTo::End]
    }

    /// Checks the tool results of the last turn (each) and the new user message.
    async fn before_model(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let from = state.last_ai_index().map_or(0, |i| i + 1);
        let recent = &state.messages[from..];
        let mut targets: Vec<(&Message, &str)> = Vec::new();
        if self.check_tool_results {
            targets.extend(
                recent
                    .iter()
                    .filter(|m| m.role == Role::Tool)
                    .map(|m| (m, "tool")),
            );
        }
        if self.check_input
            && let Some(user) = recent.iter().rev().find(|m| m.role == Role::User)
        {
            targets.push((user, "input"));
        }
        let texts: Vec<String> = targets.iter().map(|(m, _)| m.text()).collect();
        let checked: Vec<usize> = (0..texts.len())
            .filter(|i| !texts[*i].trim().is_empty())
            .collect();
        if checked.is_empty() {
            return Ok(None);
        }
        let inputs: Vec<&str> = checked.iter().map(|i| texts[*i].as_str()).collect();
        let results = self.check(&inputs).await?;
        let mut replaced = Vec::new();
        for (i, result) in checked.iter().zip(&results) {
            if !result.flagged {
                continue;
            }
            let (message, stage) = targets[*i];
            match self.on_flagged(stage, result, &texts[*i])? {
                Flagged::End(text) => return Ok(Some(end_answering(state, text))),
                Flagged::Replace(text) => {
                    let mut m = message.clone();
                    m.content = text.into();
                    replaced.push(m);
                }
            }
        }
        Ok((!replaced.is_empty()).then(|| HookUpdate::messages(replaced)))
    }

    /// Checks the model's answer.
    async fn after_model(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let Some(i) = state.last_ai_index() else {
            return Ok(None);
        };
        let answer = &state.messages[i];
        let text = answer.text();
        if text.trim().is_empty() {
            return Ok(None);
        }
        let results = self.check(&[text.as_str()]).await?;
        let Some(result) = results.first().filter(|r| r.flagged) else {
            return Ok(None);
        };
        Ok(Some(match self.on_flagged("output", result, &text)? {
            Flagged::End(violation) => end_answering(state, violation),
            Flagged::Replace(violation) => {
                let mut m = answer.clone();
                m.content = violation.into();
                HookUpdate::messages(vec![m])
            }
        }))
    }
}

/// Ends the run with `text`, first answering the calls still without a result (a flagged
/// answer's calls are not run), so the thread keeps one result per call.
fn end_answering(state: &AgentState, text: String) -> HookUpdate {
    let mut messages: Vec<Message> = state
        .pending_tool_calls()
        .into_iter()
        .map(|call| {
            Message::tool_error(&call.id, "Not run: the answer was flagged by moderation.")
                .with_name(&call.name)
        })
        .collect();
    messages.push(Message::assistant(text));
    HookUpdate::messages(messages).jump_to(crate::agent::JumpTo::End)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
