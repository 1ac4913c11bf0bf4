//! PII guardrail: find personal data in what the user sends, what the model answers (text and
//! tool-call arguments) and what tools return; redact, mask or hash it, or stop the run.
//!
//! One [`PiiMiddleware`] handles one type — a built-in [`PiiType`] or a custom one found by a
//! regex or a function ([`Detector`]) — with one [`PiiStrategy`]. Add one per type:
//!
//! ```
//! use kit::agent::Agent;
//! use kit::middleware::pii::{PiiMiddleware, PiiStrategy, PiiType};
//! use kit::testing::ScriptedModel;
//! use kit::{Message, RunOptions};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new([Message::assistant("Noted.")]);
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .middleware(PiiMiddleware::new(PiiType::Email))
//!     .middleware(PiiMiddleware::new(PiiType::CreditCard).strategy(PiiStrategy::Mask))
//!     .middleware(PiiMiddleware::regex("api_key", r"sk-[A-Za-z0-9]{16,}")?.strategy(PiiStrategy::Hash))
//!     .build()?;
//! agent
//!     .invoke("I'm ann@example.com, card 4111-1111-1111-1111, key sk-0123456789abcdefXYZ")
//!     .await?;
//! assert_eq!(
//!     model.requests()[0].messages[0].text(),
//!     "I'm [REDACTED_EMAIL], card ****-****-****-1111, key <api_key_hash:a41145f1>"
//! );
//! # Ok(()) }
//! ```
//!
//! **Where it applies** (each can be switched on and off):
//!
//! | option | default | what is checked | when |
//! |---|---|---|---|
//! | `apply_to_input` | on | the user messages after the last assistant message (the new input) | before the model call; the scrubbed message replaces the original in the state |
//! | `apply_to_output` | off | the model's answer: its text **and its tool-call arguments** (every string, recursively) | as the answer leaves the model call, so the state, the checkpoints, other hooks, human review and the tools only ever see the scrubbed answer |
//! | `apply_to_tool_results` | off | tool results | as each result leaves the tool, and again before the model call for tool messages written by other means |
//!
//! **Closing the anchor's gaps.** LangChain's `PIIMiddleware` passes tool-call arguments to the
//! tool unredacted (langchain #37659), finds only IPv4, and only 16-digit cards (no 15-digit
//! Amex, no 13-digit cards). Here arguments are scrubbed before any tool runs, IPv6 is found
//! and validated (code such as `arr[::2]` is not an address), cards are found when they are
//! plausible — issuer range and length, printed grouping, Luhn — in any script's digits and
//! with the separators people use, URLs of the `ftp`, `sftp` and `ws` families too, redaction
//! never splits a UTF-8 character (custom detectors' byte offsets are snapped outwards to
//! character boundaries), and overlapping matches are merged into one replacement. The
//! [keyed hash](PiiMiddleware::keyed_hash) replaces LangChain's brute-forceable 32-bit hash
//! where compatibility with it is not needed. `docs/pii.md` in the repository lists what is
//! and is not found, type by type, with the measured precision and recall.
//!
//! **Cost.** Every built-in detector and the stream filter run in time linear in the text
//! (tens of milliseconds per MiB). A message or tool result over 64 KiB is scanned on
//! tokio's blocking pool (`spawn_blocking`), so a large tool result does not stall the
//! runtime; the input is scrubbed where it enters the run, synchronously.
//!
//! **Streaming.** With `apply_to_output`, streamed tokens are scrubbed too: the middleware's
//! [event filter](crate::agent::Middleware::event_filter) holds back the last 128 characters of
//! each streamed answer and tool-call argument text ([`stream_lookback`] changes it), so a
//! match split across two `model_delta` events is still found; a match reaching into the
//! held-back part waits whole. Text is released in pieces of at least half the lookback, so
//! each byte is scanned about three times. When the call ends the rest is released, so the
//! deltas of a call add up to the scrubbed answer that `model_end`, the state and the trace
//! hold. Subagents' tokens (and their `model_end`) pass through the same filter; a sync
//! subagent also runs this middleware itself (inherited, see
//! [`subagents`](crate::middleware::subagents)), on its input, its tool results as configured
//! here, and always on its answer, so what it stores and what it returns are scrubbed. A model
//! call that ends without an answer (a retry, an error) drops what it held back: with the
//! `block` strategy the stream shows the data redacted if it was released at all, then the run
//! fails with `PiiDetected`. A tool call's first chunk (its id and name) goes out at once, so
//! it can overtake answer text still held back: group deltas by their
//! `tool_call.index`. Filters apply to [`Agent`](crate::Agent) runs (`stream_events`, or an
//! event sink in the options); streaming the compiled graph itself bypasses them.
//!
//! **Known limits.** Image parts are not inspected. A custom detector whose values only match
//! once complete, and are longer than the lookback, can have their beginning released before
//! they are recognised (raise [`stream_lookback`]); one whose matches keep growing holds the
//! stream back until they end.
//!
//! [`stream_lookback`]: PiiMiddleware::stream_lookback

mod card;
#[doc(hidden)]
pub mod corpus;
mod detect;
mod email;
mod error;
mod hash;
mod ip;
mod strategy;
mod stream;
#[cfg(test)]
mod tests;
mod url;

pub use detect::{Detector, PiiMatch, PiiType};
pub use error::PiiDetected;
pub use hash::HashKey;
pub use strategy::PiiStrategy;

use strategy::Replacer;

use std::sync::Arc;

use serde_json::Value;

use crate::agent::{
    AgentError, AgentState, Hook, HookResult, HookUpdate, Middleware, ModelExecution, ModelNext,
    Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::message::{Content, ContentPart, Message, Role, ToolCall};
use crate::middleware::support::offload;
use crate::model::ModelRequest;
use crate::tool::{ToolContext, ToolExecution};

/// A PII middleware could not be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PiiError {
    /// A type name that is not built in, given without a detector.
    #[error(
        "Unknown PII type: {0}. Must be one of ['email', 'credit_card', 'ip', 'mac_address', \
         'url'] or provide a custom detector (PiiMiddleware::regex or PiiMiddleware::function)."
    )]
    UnknownType(String),
    /// A custom detector's regex does not compile.
    #[error(
        "the detector pattern of PII type `{pii_type}` does not compile: {message}; fix the \
         pattern (Rust `regex` syntax: no look-around, no backreferences)"
    )]
    InvalidRegex {
        /// The type.
        pii_type: String,
        /// The compiler's message.
        message: String,
    },
    /// A custom type name that cannot name a placeholder.
    #[error(
        "`{0}` is not a valid PII type name: use letters, digits and `_` only (it becomes \
         `[REDACTED_{{TYPE}}]`)"
    )]
    InvalidTypeName(String),
    /// A strategy name that does not exist.
    #[error("unknown PII strategy `{0}`: use redact, mask, hash or block")]
    UnknownStrategy(String),
    /// A [`HashKey`] too short to keep hashed values secret.
    #[error(
        "the PII hash key is {len} bytes long; use at least 16 bytes of secret random data \
         (32 random bytes from your secret store are a good choice), or known emails and card \
         numbers can be recovered from their hashes by trying them"
    )]
    WeakHashKey {
        /// The key's length in bytes.
        len: usize,
    },
}

/// Messages and tool results larger than this are scanned on tokio's blocking pool.
const OFFLOAD_BYTES: usize = 64 * 1024;

/// Finds one type of personal data and redacts, masks, hashes or blocks it (see the
/// [module documentation](self) for where it applies).
///
/// ```
/// use kit::middleware::pii::{PiiMiddleware, PiiStrategy, PiiType};
///
/// let ips = PiiMiddleware::new(PiiType::Ip).strategy(PiiStrategy::Mask);
/// assert_eq!(ips.apply("from 192.168.1.100 and 2001:db8::1").unwrap(), "from *.*.*.100 and *:*::1");
///
/// let blocked = PiiMiddleware::new(PiiType::Email).strategy(PiiStrategy::Block);
/// let err = blocked.apply("write to a@b.com or c@d.org").unwrap_err();
/// assert_eq!(err.kind(), "pii_detected");
/// assert!(err.to_string().starts_with("detected 2 instance(s) of email"));
/// ```
#[derive(Debug, Clone)]
pub struct PiiMiddleware {
    name: String,
    detector: Detector,
    strategy: PiiStrategy,
    hash_key: Option<HashKey>,
    input: bool,
    output: bool,
    tool_results: bool,
    lookback: usize,
}

impl PiiMiddleware {
    /// A built-in type, with the `redact` strategy, applied to the input.
    pub fn new(pii_type: PiiType) -> Self {
        Self::with_detector(Detector::builtin(pii_type))
    }

    /// A built-in type by name (`email`, `credit_card`, `ip`, `mac_address`, `url`), as in
    /// configuration files; another name is [`PiiError::UnknownType`].
    pub fn from_name(pii_type: &str) -> Result<Self, PiiError> {
        Ok(Self::new(pii_type.parse()?))
    }

    /// A custom type found by a regex (see [`Detector::regex`]).
    pub fn regex(pii_type: impl Into<String>, pattern: &str) -> Result<Self, PiiError> {
        Ok(Self::with_detector(Detector::regex(pii_type, pattern)?))
    }

    /// A custom type found by a function returning byte ranges (see [`Detector::function`]).
    pub fn function<F>(pii_type: impl Into<String>, find: F) -> Result<Self, PiiError>
    where
        F: Fn(&str) -> Vec<PiiMatch> + Send + Sync + 'static,
    {
        Ok(Self::with_detector(Detector::function(pii_type, find)?))
    }

    /// Any detector.
    pub fn with_detector(detector: Detector) -> Self {
        PiiMiddleware {
            name: format!("PIIMiddleware[{}]", detector.pii_type()),
            detector,
            strategy: PiiStrategy::Redact,
            hash_key: None,
            input: true,
            output: false,
            tool_results: false,
            lookback: stream::DEFAULT_LOOKBACK,
        }
    }

    /// What to do with what is found (default [`PiiStrategy::Redact`]).
    #[must_use]
    pub fn strategy(mut self, strategy: PiiStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The [`Hash`](PiiStrategy::Hash) strategy keyed with a secret: each value becomes
    /// `<{type}_hmac:{32 hex digits}>`, the first 128 bits of its HMAC-SHA-256 under `key`.
    /// Equal values still get equal replacements, so they can be correlated, but nobody
    /// without the key can recover a value by hashing guesses, as they can with the unkeyed,
    /// 32-bit, LangChain-compatible `Hash`. The key applies whenever the strategy is `Hash`.
    ///
    /// ```
    /// use kit::middleware::pii::{HashKey, PiiMiddleware, PiiType};
    ///
    /// let key = HashKey::new("0123456789abcdef0123456789abcdef").unwrap();
    /// let cards = PiiMiddleware::new(PiiType::CreditCard).keyed_hash(key);
    /// let once = cards.apply("card 4111 1111 1111 1111").unwrap();
    /// let twice = cards.apply("again 4111 1111 1111 1111").unwrap();
    /// assert!(once.starts_with("card <credit_card_hmac:"));
    /// assert_eq!(once["card ".len()..], twice["again ".len()..]);
    /// assert!(!format!("{cards:?}").contains("0123456789abcdef"));
    /// ```
    #[must_use]
    pub fn keyed_hash(mut self, key: HashKey) -> Self {
        self.strategy = PiiStrategy::Hash;
        self.hash_key = Some(key);
        self
    }

    /// Check the user's input (default on).
    #[must_use]
    pub fn apply_to_input(mut self, on: bool) -> Self {
        self.input = on;
        self
    }

    /// Check the model's answers: text and tool-call arguments (default off).
    #[must_use]
    pub fn apply_to_output(mut self, on: bool) -> Self {
        self.output = on;
        self
    }

    /// Check tool results (default off).
    #[must_use]
    pub fn apply_to_tool_results(mut self, on: bool) -> Self {
        self.tool_results = on;
        self
    }

    /// How many characters of a streamed answer are held back so a match split across tokens
    /// is still found (default 128, as in LangChain); text is released in pieces of at least
    /// half of it. Matters only with [`apply_to_output`](Self::apply_to_output); raise it for
    /// custom types with longer values.
    #[must_use]
    pub fn stream_lookback(mut self, chars: usize) -> Self {
        self.lookback = chars;
        self
    }

    /// Renames the middleware (default `PIIMiddleware[{type}]`), e.g. to use two instances for
    /// one type with different strategies.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The detector.
    pub fn detector(&self) -> &Detector {
        &self.detector
    }

    /// Applies the strategy to one text: the scrubbed text, or
    /// [`PiiDetected`] (location `text`) for the block strategy when something is found.
    pub fn apply(&self, text: &str) -> Result<String, AgentError> {
        match self.scrub(text) {
            None => Ok(text.to_string()),
            Some((_, Some(scrubbed))) => Ok(scrubbed),
            Some((count, None)) => Err(self.blocked(count, "text")),
        }
    }

    fn blocked(&self, count: usize, location: &str) -> AgentError {
        let detected = PiiDetected {
            pii_type: self.detector.pii_type().to_string(),
            count,
            location: location.to_string(),
        };
        AgentError::middleware_error(&self.name, PiiDetected::KIND, detected)
    }

    /// What replaces a match.
    fn replacer(&self) -> Replacer {
        Replacer::new(self.strategy, self.hash_key.clone())
    }

    /// `None` when nothing is found; else the count and the scrubbed text (`None` to block).
    fn scrub(&self, text: &str) -> Option<(usize, Option<String>)> {
        let found = self.detector.find(text);
        if found.is_empty() {
            return None;
        }
        let scrubbed = self.replacer().apply_detector(&self.detector, text, &found);
        Some((found.len(), scrubbed))
    }

    /// [`scrub_message`](Self::scrub_message), on the blocking pool for a large message.
    async fn scrub_message_async(
        &self,
        message: &Message,
        location: &'static str,
    ) -> Result<Option<Message>, AgentError> {
        if message_bytes(message) < OFFLOAD_BYTES {
            return self.scrub_message(message, location);
        }
        let (this, message) = (self.clone(), message.clone());
        offload(move || this.scrub_message(&message, location)).await
    }

    /// [`scrub_content`](Self::scrub_content), on the blocking pool for a large content.
    async fn scrub_content_async(&self, content: &Content) -> (usize, Option<Content>) {
        if content_bytes(content) < OFFLOAD_BYTES {
            return self.scrub_content(content);
        }
        let (this, content) = (self.clone(), content.clone());
        offload(move || this.scrub_content(&content)).await
    }

    /// The count found in the content, and the scrubbed content when it changed.
    fn scrub_content(&self, content: &Content) -> (usize, Option<Content>) {
        let mut count = 0;
        let mut changed = false;
        let mut out = content.clone();
        out.map_text(|text| match self.scrub(text) {
            None => text.to_string(),
            Some((n, scrubbed)) => {
                count += n;
                changed = true;
                scrubbed.unwrap_or_else(|| text.to_string())
            }
        });
        (count, changed.then_some(out))
    }

    /// Scrubs every string in a JSON value (tool-call arguments) in place; returns the count.
    fn scrub_value(&self, value: &mut Value) -> usize {
        match value {
            Value::String(s) => match self.scrub(s) {
                None => 0,
                Some((n, scrubbed)) => {
                    if let Some(scrubbed) = scrubbed {
                        *s = scrubbed;
                    }
                    n
                }
            },
            Value::Array(items) => items.iter_mut().map(|v| self.scrub_value(v)).sum(),
            Value::Object(map) => map.values_mut().map(|v| self.scrub_value(v)).sum(),
            _ => 0,
        }
    }

    /// Scrubs a message's content (and, for an assistant message, its tool-call arguments).
    /// `Ok(None)` when nothing was found.
    fn scrub_message(
        &self,
        message: &Message,
        location: &'static str,
    ) -> Result<Option<Message>, AgentError> {
        let (in_text, content) = self.scrub_content(&message.content);
        let mut calls: Vec<ToolCall> = message.tool_calls.clone();
        let in_args: usize = calls
            .iter_mut()
            .map(|c| self.scrub_value(&mut c.args))
            .sum();
        if in_text + in_args == 0 {
            return Ok(None);
        }
        if self.strategy == PiiStrategy::Block {
            let location = if in_text > 0 {
                location
            } else {
                "tool call arguments"
            };
            return Err(self.blocked(in_text + in_args, location));
        }
        let mut scrubbed = message.clone();
        if let Some(content) = content {
            scrubbed.content = content;
        }
        scrubbed.tool_calls = calls;
        Ok(Some(scrubbed))
    }
}

#[crate::async_trait]
impl Middleware for PiiMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    /// A sync subagent runs the same detector and strategy on what it is given and on its
    /// tool results as this agent does, and always on its own answers: its answer is what it
    /// returns to this agent, and what its thread stores.
    fn for_subagent(&self) -> Option<Arc<dyn Middleware>> {
        let mut child = self.clone();
        child.output = true;
        Some(Arc::new(child))
    }

    fn hooks(&self) -> &[Hook] {
        if self.input || self.tool_results {
            &[Hook::BeforeModel]
        } else {
            &[]
        }
    }

    /// Scrubs streamed tokens when the output is checked.
    fn event_filter(&self) -> Option<Arc<dyn crate::event::EventFilter>> {
        self.output.then(|| {
            Arc::new(stream::StreamScrubber::with_replacer(
                self.detector.clone(),
                &self.replacer(),
                self.lookback,
            )) as Arc<dyn crate::event::EventFilter>
        })
    }

    /// Scrubs (or blocks) the user messages of the input before the input is stored, so
    /// checkpoints and traces never hold them raw.
    fn transform_input(
        &self,
        input: &mut crate::agent::AgentStateUpdate,
    ) -> Result<(), AgentError> {
        if !self.input {
            return Ok(());
        }
        if let Some(write) = input.messages.as_mut() {
            let messages = match write {
                crate::state::Write::Value(v) | crate::state::Write::Overwrite(v) => v,
            };
            for message in messages.iter_mut().filter(|m| m.role == Role::User) {
                if let Some(scrubbed) = self.scrub_message(message, "input")? {
                    *message = scrubbed;
                }
            }
        }
        Ok(())
    }

    /// Scrubs the new user input and the tool results of the last turn; the scrubbed messages
    /// replace the originals (same ids).
    async fn before_model(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let from = state.last_ai_index().map_or(0, |i| i + 1);
        let mut scrubbed = Vec::new();
        for message in &state.messages[from..] {
            let location = match message.role {
                Role::User if self.input => "input",
                Role::Tool if self.tool_results => "tool result",
                _ => continue,
            };
            if let Some(m) = self.scrub_message_async(message, location).await? {
                scrubbed.push(m);
            }
        }
        Ok((!scrubbed.is_empty()).then(|| HookUpdate::messages(scrubbed)))
    }

    /// Scrubs the model's answer — text and tool-call arguments — before anything else sees it.
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        _rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let mut execution = next.call(request).await?;
        if self.output
            && let Some(scrubbed) = self
                .scrub_message_async(&execution.response.message, "output")
                .await?
        {
            execution.response.message = scrubbed;
        }
        Ok(execution)
    }

    /// Scrubs each tool result as it leaves the tool (the block strategy is applied before the
    /// next model call, where the run can be stopped).
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        let mut execution = next.call(call, ctx).await?;
        if self.tool_results
            && self.strategy != PiiStrategy::Block
            && let (_, Some(content)) = self.scrub_content_async(&execution.message.content).await
        {
            execution.message.content = content;
        }
        Ok(execution)
    }
}

/// The bytes of text a detector reads in a content.
fn content_bytes(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.len(),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                ContentPart::Text { text } => text.len(),
                _ => 0,
            })
            .sum(),
    }
}

/// The bytes of text a detector reads in a JSON value's strings.
fn value_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(value_bytes).sum(),
        Value::Object(map) => map.values().map(value_bytes).sum(),
        _ => 0,
    }
}

/// The bytes of text a detector reads in a message: its text and its tool-call arguments.
fn message_bytes(message: &Message) -> usize {
    content_bytes(&message.content)
        + message
            .tool_calls
            .iter()
            .map(|c| value_bytes(&c.args))
            .sum::<usize>()
}
