//! Custom guardrails: the pattern, and a ready-made topic filter.
//!
//! A guardrail is a [`Middleware`] that looks at the conversation in a hook and either lets
//! the run go on (`Ok(None)`), changes the state (`Ok(Some(update))`), ends the run with a
//! message of its own (`HookUpdate::end_with(message)`, declaring [`JumpTo::End`] in
//! `can_jump_to`), or fails it (`Err(AgentError::..)`). Which hook decides what it sees:
//!
//! | hook | runs | good for |
//! |---|---|---|
//! | `before_agent` | once per invocation, before anything | checking the request: off-topic, abusive, too long |
//! | `before_model` / `after_model` | around every model call | checking each turn: tool results, the model's tool calls |
//! | `after_agent` | once, after the final answer | checking the answer: replace it, or end with a refusal |
//! | `wrap_model_call` / `wrap_tool_call` | around each call | changing what goes in or comes out before anything else sees it |
//!
//! A jump to `end` from `before_agent` skips the model and goes to the `after_agent` hooks;
//! from `after_agent` it finishes. A guardrail that ends the run leaves the user's message in
//! the state and adds its own answer, so the conversation stays well formed for the next
//! invocation.
//!
//! The whole pattern, as a guardrail that refuses requests for medical advice:
//!
//! ```
//! use kit::agent::{Agent, AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware, Runtime};
//! use kit::testing::ScriptedModel;
//! use kit::{Message, Role, RunOptions};
//!
//! struct NoMedicalAdvice;
//!
//! #[kit::async_trait]
//! impl Middleware for NoMedicalAdvice {
//!     fn name(&self) -> &str { "NoMedicalAdvice" }
//!     // Only the hook it implements gets a node.
//!     fn hooks(&self) -> &[Hook] { &[Hook::BeforeAgent] }
//!     // A jump must be declared.
//!     fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] { &[JumpTo::End] }
//!     async fn before_agent(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
//!         let asked = state.messages.iter().rev().find(|m| m.role == Role::User);
//!         if asked.is_some_and(|m| m.text().to_lowercase().contains("diagnos")) {
//!             let refusal = Message::assistant("I can't give medical advice; please ask a doctor.");
//!             return Ok(Some(HookUpdate::end_with(refusal)));
//!         }
//!         Ok(None)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
//! let model = ScriptedModel::new([Message::assistant("never called")]);
//! let agent = Agent::builder().model(model.clone()).middleware(NoMedicalAdvice).build()?;
//! let out = agent.invoke("Can you diagnose my rash?").await?;
//! assert_eq!(out.state().final_text(), "I can't give medical advice; please ask a doctor.");
//! assert_eq!(model.calls(), 0);
//! # Ok(()) }
//! ```
//!
//! [`TopicFilter`] is the same pattern, ready to use, with an output check in `after_agent`.

use crate::agent::{AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware, Runtime};
use crate::message::{Message, Role};

/// A guardrail that keeps the agent off blocked topics: a request that mentions one ends the
/// run with the refusal before the model is called (`before_agent`), and, with
/// [`check_output`](Self::check_output), a final answer that mentions one is replaced by the
/// refusal (`after_agent`).
///
/// Topics are words or phrases matched case-insensitively as whole words ("crypto" matches
/// "Crypto?" but not "cryptography").
///
/// ```
/// use kit::agent::Agent;
/// use kit::middleware::guardrail::TopicFilter;
/// use kit::testing::ScriptedModel;
/// use kit::{Message, RunOptions};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
/// let filter = TopicFilter::new("I can only help with cooking.").block(["crypto", "stock tips"]);
/// assert_eq!(filter.blocked_topic("Any STOCK TIPS today?"), Some("stock tips"));
/// assert_eq!(filter.blocked_topic("cryptography recipes"), None);
///
/// let agent = Agent::builder()
///     .model(ScriptedModel::new([Message::assistant("Boil the pasta for 9 minutes.")]))
///     .middleware(filter)
///     .build()?;
/// let out = agent.invoke("Should I buy crypto?").await?;
/// assert_eq!(out.state().final_text(), "I can only help with cooking.");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TopicFilter {
    name: String,
    topics: Vec<String>,
    refusal: String,
    check_output: bool,
}

impl TopicFilter {
    /// A filter that answers blocked requests with `refusal`; add topics with
    /// [`block`](Self::block).
    pub fn new(refusal: impl Into<String>) -> Self {
        TopicFilter {
            name: "TopicFilter".to_string(),
            topics: Vec::new(),
            refusal: refusal.into(),
            check_output: false,
        }
    }

    /// Blocks these topics (words or phrases).
    #[must_use]
    pub fn block<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics.extend(
            topics
                .into_iter()
                .map(Into::into)
                .filter(|t: &String| !t.trim().is_empty()),
        );
        self
    }

    /// Also replace a final answer that mentions a blocked topic (default off).
    #[must_use]
    pub fn check_output(mut self, on: bool) -> Self {
        self.check_output = on;
        self
    }

    /// Renames the middleware (default `TopicFilter`), to use several.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The first blocked topic `text` mentions, if any.
    pub fn blocked_topic(&self, text: &str) -> Option<&str> {
        let text = text.to_lowercase();
        self.topics
            .iter()
            .find(|topic| mentions(&text, &topic.to_lowercase()))
            .map(String::as_str)
    }
}

/// Whether `text` contains `topic` as a whole word or phrase (both lowercase).
fn mentions(text: &str, topic: &str) -> bool {
    let is_word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(topic).any(|(at, found)| {
        !is_word(text[..at].chars().next_back())
            && !is_word(text[at + found.len()..].chars().next())
    })
}

#[crate::async_trait]
impl Middleware for TopicFilter {
    fn name(&self) -> &str {
        &self.name
    }

    fn for_subagent(&self) -> Option<std::sync::Arc<dyn Middleware>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn hooks(&self) -> &[Hook] {
        if self.check_output {
            &[Hook::BeforeAgent, Hook::AfterAgent]
        } else {
            &[Hook::BeforeAgent]
        }
    }

    fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] {
        &[JumpTo::End]
    }

    /// Ends the run with the refusal when the latest user message mentions a blocked topic.
    async fn before_agent(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let asked = state.messages.iter().rev().find(|m| m.role == Role::User);
        match asked.and_then(|m| self.blocked_topic(&m.text())) {
            Some(_) => Ok(Some(HookUpdate::end_with(Message::assistant(
                self.refusal.clone(),
            )))),
            None => Ok(None),
        }
    }

    /// Replaces a final answer that mentions a blocked topic with the refusal.
    async fn after_agent(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let Some(answer) = state
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && !m.content.is_empty())
        else {
            return Ok(None);
        };
        if answer.text() == self.refusal || self.blocked_topic(&answer.text()).is_none() {
            return Ok(None);
        }
        let mut replaced = answer.clone();
        replaced.content = self.refusal.clone().into();
        Ok(Some(
            HookUpdate::messages(vec![replaced]).jump_to(JumpTo::End),
        ))
    }
}
