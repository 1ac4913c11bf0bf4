//! Chat models: the [`ChatModel`] trait, requests, responses, streaming and errors.
//!
//! Providers implement [`ChatModel`]; agents call it. Streaming providers yield
//! [`ModelChunk`]s (text, reasoning and tool-call argument deltas, whole provider blocks,
//! usage, the answer's metadata); [`StreamAssembler`] turns them back into the complete
//! assistant [`Message`], so a streamed call and a plain call produce the same result — the
//! response id, model and cost included.
//!
//! Real providers talk HTTP through [`crate::http`] (shared client, timeouts, retries with
//! backoff, redacted tracing): [`openai::OpenAiModel`] (OpenAI Chat Completions and every
//! compatible server — DeepSeek, Mistral, Groq, OpenRouter, Cerebras, Gemini's OpenAI
//! endpoint, Ollama, vLLM, llama.cpp, Azure — and the Responses API) and
//! [`anthropic::AnthropicModel`] (the Messages API). [`init`] resolves `provider:model`
//! strings; [`pricing`] turns token usage into cost; [`generate_traced`] makes a direct call
//! one trace run with its own trace options.
//!
//! **Reasoning is content.** What a model thinks before it answers — Anthropic's thinking
//! blocks with their signatures, DeepSeek's `reasoning_content`, OpenRouter's
//! `reasoning_details`, Gemini's thought signatures, the Responses API's reasoning items — is
//! kept on the assistant message as [`Reasoning`](crate::message::Reasoning) parts in the
//! order it came, streamed as [`ModelChunk::Reasoning`], counted in
//! [`Usage::reasoning_tokens`](crate::message::Usage::reasoning_tokens), and sent back
//! unchanged to the provider (and wire form) that produced it, never to another.
//!
//! Provider errors become typed [`ModelError`]s from the providers' real error bodies:
//! 401/403 → `Authentication`, 429 → `RateLimited` (with `Retry-After`), a context-window
//! overflow (OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long", vLLM's and
//! llama.cpp's messages) → `ContextLengthExceeded`, other 4xx → `BadRequest`, 5xx and
//! Anthropic's 529 `overloaded_error` → `Server`. Rate limits, server errors, timeouts and
//! connection failures are retried first (`ModelOptions::retries`, default 2).
//!
//! A provider is a peer like any other. Its answers are bounded by the
//! [`HttpLimits`](crate::http::HttpLimits) of the model's client (a whole answer, an event-stream
//! line and event, a whole stream — which bounds the assembled message — and the stream's total
//! deadline); a broken limit is [`ModelError::Limit`] naming the field to raise. Every error
//! text built from what a provider sent is scrubbed of the model's credentials (the key,
//! custom header values, the base URL's password) in every escaped form, before and after
//! the body is parsed; token counts are added with saturating arithmetic.

pub mod anthropic;
mod assemble;
pub(crate) mod common;
mod error;
pub mod openai;
pub mod pricing;
mod traced;

pub use assemble::{MAX_ARGS_DEPTH, StreamAssembler, parse_args};
pub use common::DEFAULT_MODEL_TIMEOUT;
pub use error::ModelError;
pub use traced::generate_traced;

use std::sync::Arc;

#[cfg(test)]
use std::time::Duration;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Content, ContentPart, Message, Usage};
use crate::state::Messages;

/// A tool as the model sees it.
///
/// ```
/// use kit::model::ToolSpec;
/// let spec = ToolSpec::new("add", "Adds two numbers.", serde_json::json!({"type": "object"})).strict(true);
/// assert_eq!(spec.strict, Some(true));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Value,
    /// Ask the provider to hold the model's arguments to the schema exactly (OpenAI's
    /// `strict`; the schema must then meet the provider's strict-mode rules). `None` leaves
    /// the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl ToolSpec {
    /// A tool with this name, description and argument schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            strict: None,
        }
    }

    /// Sets strict argument checking (builder style).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = Some(strict);
        self
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// Ask the model for JSON matching a schema (structured output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A name for the schema.
    pub name: String,
    /// The JSON Schema the answer must match.
    pub schema: Value,
    /// Ask the provider to enforce the schema strictly, where supported.
    pub strict: bool,
}

/// Per-call options (the spec's `model_opts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelOptions {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Maximum tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Request timeout, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Retries on rate limits, server errors and connection failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// How hard a reasoning model thinks (`minimal`, `low`, `medium`, `high`, ...): OpenAI's
    /// `reasoning_effort` (Chat Completions) or `reasoning.effort` (Responses). Anthropic's
    /// thinking takes a token budget instead (`AnthropicModel::thinking`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Whether the model may call several tools in one answer (OpenAI's
    /// `parallel_tool_calls`, Anthropic's `disable_parallel_tool_use`); sent only with tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Extra provider-specific body fields, merged into the request as given.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ModelOptions {
    /// Sets the temperature.
    #[must_use]
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Sets the maximum output tokens.
    #[must_use]
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sets the timeout in milliseconds.
    #[must_use]
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Sets the number of retries.
    #[must_use]
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = Some(n);
        self
    }

    /// Sets the reasoning effort.
    #[must_use]
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
        self
    }

    /// Allows or forbids parallel tool calls.
    #[must_use]
    pub fn parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.parallel_tool_calls = Some(allowed);
        self
    }

    /// Options of `self`, with unset ones taken from `base`.
    #[must_use]
    pub fn or(mut self, base: &ModelOptions) -> Self {
        self.temperature = self.temperature.or(base.temperature);
        self.max_tokens = self.max_tokens.or(base.max_tokens);
        self.timeout_ms = self.timeout_ms.or(base.timeout_ms);
        self.retries = self.retries.or(base.retries);
        if self.reasoning_effort.is_none() {
            self.reasoning_effort.clone_from(&base.reasoning_effort);
        }
        self.parallel_tool_calls = self.parallel_tool_calls.or(base.parallel_tool_calls);
        for (k, v) in &base.extra {
            self.extra.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self
    }
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// The system prompt (sent the way each provider expects it).
    pub system: Option<String>,
    /// The conversation, oldest first: shared with the agent's state, not copied (edit it
    /// with [`Messages::make_mut`], which copies it first if it is shared).
    pub messages: Messages,
    /// Tools the model may call: shared by every call of an agent, not copied (build a new
    /// list to change it: `request.tools = request.tools.iter().filter(..).cloned().collect()`).
    pub tools: Arc<[ToolSpec]>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Structured output.
    pub response_format: Option<ResponseFormat>,
    /// Sampling and transport options.
    pub options: ModelOptions,
}

impl ModelRequest {
    /// A request with these messages and nothing else.
    pub fn new(messages: impl Into<Messages>) -> Self {
        ModelRequest {
            messages: messages.into(),
            ..Self::default()
        }
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Binds tools.
    #[must_use]
    pub fn tools(mut self, tools: impl Into<Arc<[ToolSpec]>>) -> Self {
        self.tools = tools.into();
        self
    }

    /// Sets the tool choice.
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Asks for structured output.
    #[must_use]
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// Rough size of the request in tokens (about four characters per token), for budgets
    /// and compaction when the provider has not reported usage yet.
    pub fn estimate_tokens(&self) -> u64 {
        let mut chars = self.system.as_ref().map_or(0, String::len);
        for m in &self.messages {
            chars += estimate_message_chars(m);
        }
        for t in self.tools.iter() {
            chars += t.name.len() + t.description.len() + t.parameters.to_string().len();
        }
        (chars as u64).div_ceil(4)
    }
}

/// What an image counts for in an estimate, in characters: about 1,600 tokens, what the
/// providers charge for an image at the size they scale it to (Anthropic's `w·h/750` at
/// 1.15 megapixels; OpenAI's high detail, 85 + 170 per 512-pixel tile, for a 1024 by 1024).
/// Counting its base64 bytes instead, as LangChain's estimate does, would call a one-megabyte
/// photo 350,000 tokens; counting nothing would let a conversation of screenshots past every
/// budget.
pub const IMAGE_CHARS: usize = 4 * 1_600;

/// Characters a message contributes to a request (text, reasoning sent back, tool calls,
/// images, provider blocks, overhead).
pub fn estimate_message_chars(m: &Message) -> usize {
    let mut chars = m.content.text_len() + 16;
    if let Content::Parts(parts) = &m.content {
        for part in parts {
            match part {
                ContentPart::Image { .. } => chars += IMAGE_CHARS,
                ContentPart::ProviderBlock { block, .. } => chars += crate::json::approx_len(block),
                _ => {}
            }
        }
    }
    for r in m.content.reasoning() {
        chars += r.text.len() + r.signature.as_ref().map_or(0, String::len) / 4;
    }
    for call in &m.tool_calls {
        chars += call.name.len() + call.args.to_string().len() + 16;
    }
    chars
}

/// Why the model stopped.
///
/// | kit | OpenAI (Chat, Responses) | Anthropic `stop_reason` |
/// |---|---|---|
/// | `Stop` | `stop`, `completed` | `end_turn`, `stop_sequence` |
/// | `ToolCalls` | `tool_calls`, `function_call` | `tool_use` |
/// | `Length` | `length`, `max_output_tokens` | `max_tokens`, `model_context_window_exceeded` |
/// | `ContentFilter` | `content_filter` | `refusal` |
/// | `Other("pause_turn")` | — | `pause_turn` (a server tool paused the turn: send the answer back to continue) |
/// | `Other(..)` | anything else, as sent (`error`, ...) | anything else, as sent |
///
/// A missing or blank reason is `ToolCalls` when the answer called tools and `Stop`
/// otherwise. The provider's own word is kept in the message's metadata (`finish_reason`,
/// `stop_reason`, `stop_sequence`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end.
    #[default]
    Stop,
    /// It called tools.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// The provider filtered or refused the content.
    ContentFilter,
    /// Something else, as the provider said it.
    Other(String),
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message (text and tool calls; `usage` is set when known).
    pub message: Message,
    /// Why it stopped.
    pub finish_reason: FinishReason,
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelChunk {
    /// Text to append.
    Text {
        /// The text delta.
        text: String,
    },
    /// Part of a tool call. The first chunk of a call carries its id and name; later ones carry
    /// argument text to append. `index` identifies the call within the answer.
    ToolCall {
        /// Position of the call in the answer.
        index: usize,
        /// The call id, when this chunk starts the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name, when this chunk starts the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Argument JSON text to append.
        #[serde(default)]
        args: String,
    },
    /// Part of the model's reasoning: text to append to reasoning block `index`, and whatever
    /// else the provider sent for it (a signature, encrypted reasoning, its raw record), merged
    /// with [`Reasoning::merge`](crate::message::Reasoning::merge).
    Reasoning {
        /// Which reasoning block of the answer it belongs to.
        index: usize,
        /// The piece.
        part: crate::message::Reasoning,
    },
    /// A whole content part, placed here in the answer (a provider block that arrives
    /// complete, such as a server tool's result).
    Part {
        /// The part.
        part: crate::message::ContentPart,
    },
    /// Token usage (usually at the end).
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// Details of the answer for the message's metadata (response id, model, cost, the
    /// provider's finish reason), usually at the end.
    Metadata {
        /// Entries to set.
        metadata: Map<String, Value>,
    },
    /// The answer ended.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}

/// A stream of chunks.
pub type ModelStream = BoxStream<'static, Result<ModelChunk, ModelError>>;

/// What a model can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelProfile {
    /// It can call tools (agents need this).
    pub tool_calling: bool,
    /// It supports structured output natively.
    pub structured_output: bool,
    /// Its context window, when known.
    pub max_input_tokens: Option<u64>,
}

impl Default for ModelProfile {
    fn default() -> Self {
        ModelProfile {
            tool_calling: true,
            structured_output: true,
            max_input_tokens: None,
        }
    }
}

/// A chat model.
///
/// Implement [`generate`](ChatModel::generate); override [`stream`](ChatModel::stream) when the
/// provider streams (the default yields the whole answer as one chunk sequence).
///
/// A model borrows its request: the caller keeps it, so a retry, a fallback or a second model
/// can be sent the same request without copying it.
///
/// ```
/// use kit::model::{ChatModel, FinishReason, ModelError, ModelRequest, ModelResponse};
/// use kit::Message;
///
/// /// Answers with the last user message, shouted.
/// struct Echo;
///
/// #[kit::async_trait]
/// impl ChatModel for Echo {
///     fn provider(&self) -> &str { "echo" }
///     fn model_name(&self) -> &str { "echo-1" }
///     async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
///         let last = request.messages.last().map(Message::text).unwrap_or_default();
///         Ok(ModelResponse { message: Message::assistant(last.to_uppercase()), finish_reason: FinishReason::Stop })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ModelError> {
/// let request = ModelRequest::new(vec![Message::user("hi")]);
/// let first = Echo.generate(&request).await?;
/// let again = Echo.generate(&request).await?; // the same request, not a copy
/// assert_eq!((first.message.text(), again.message.text()), ("HI".into(), "HI".into()));
/// # Ok(()) }
/// ```
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync + 'static {
    /// The provider's name (`openai`, `anthropic`, `scripted`, ...).
    fn provider(&self) -> &str;

    /// The model's name.
    fn model_name(&self) -> &str;

    /// Capabilities.
    fn profile(&self) -> ModelProfile {
        ModelProfile::default()
    }

    /// Generates a complete answer.
    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;

    /// Streams an answer.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let response = self.generate(request).await?;
        Ok(common::answer_stream(&response))
    }
}

/// The providers `init` knows.
pub const PROVIDERS: &[&str] = &["openai", "openai-responses", "anthropic", "ollama"];

/// Resolves a `provider:model` string to a model, with credentials and endpoints from `config`
/// and `options` as the model's default options (temperature, max tokens, timeout, retries).
///
/// | spec | model | credentials | endpoint |
/// |---|---|---|---|
/// | `openai:<model>` | [`openai::OpenAiModel`] (Chat Completions) | `OPENAI_API_KEY` (required) | `OPENAI_BASE_URL`, default `https://api.openai.com/v1` (another server there gets `max_tokens` instead of `max_completion_tokens`) |
/// | `openai-responses:<model>` | [`openai::OpenAiModel`] on the Responses API | `OPENAI_API_KEY` (required) | `OPENAI_BASE_URL`, as above |
/// | `anthropic:<model>` | [`anthropic::AnthropicModel`] | `ANTHROPIC_API_KEY` (required) | `ANTHROPIC_BASE_URL`, default `https://api.anthropic.com` |
/// | `ollama:<model>` | [`openai::OpenAiModel`] | none | `OLLAMA_BASE_URL`, default `http://localhost:11434/v1` |
///
/// A missing key is [`ModelError::MissingCredentials`] naming the variable, reported here,
/// before any request; an unknown provider is [`ModelError::UnknownProvider`] listing the
/// known ones.
///
/// ```
/// use kit::model::{self, ModelError, ModelOptions};
/// use kit::Config;
///
/// let config = Config { openai_api_key: Some("sk-test".into()), ..Config::default() };
/// let m = model::init("openai:gpt-4o-mini", &config, ModelOptions::default().temperature(0.0)).unwrap();
/// assert_eq!((m.provider(), m.model_name()), ("openai", "gpt-4o-mini"));
///
/// let err = model::init("anthropic:claude-haiku-4-5", &Config::default(), ModelOptions::default()).err().unwrap();
/// assert!(matches!(err, ModelError::MissingCredentials { ref variable, .. } if variable == "ANTHROPIC_API_KEY"));
///
/// let err = model::init("mistral:large", &config, ModelOptions::default()).err().unwrap();
/// assert!(err.to_string().contains("known providers: openai, openai-responses, anthropic, ollama"));
/// ```
pub fn init(
    spec: &str,
    config: &crate::config::Config,
    options: ModelOptions,
) -> Result<Arc<dyn ChatModel>, ModelError> {
    let Some((provider, model)) = spec.split_once(':') else {
        return Err(ModelError::Other(format!(
            "model `{spec}` must be written `provider:model`, e.g. `openai:gpt-4o-mini` \
             (known providers: {})",
            PROVIDERS.join(", ")
        )));
    };
    let provider = provider.trim();
    let model = model.trim();
    if !PROVIDERS.contains(&provider) {
        return Err(ModelError::UnknownProvider {
            name: provider.to_string(),
            known: PROVIDERS.join(", "),
        });
    }
    if model.is_empty() {
        return Err(ModelError::Other(format!(
            "model `{spec}` names no model after `{provider}:`; write e.g. `openai:gpt-4o-mini`"
        )));
    }
    let missing = |variable: &str| ModelError::MissingCredentials {
        provider: provider.to_string(),
        variable: variable.to_string(),
    };
    let key = |k: &Option<String>| k.clone().filter(|k| !k.trim().is_empty());
    Ok(match provider {
        "openai" | "openai-responses" => {
            let api_key = key(&config.openai_api_key).ok_or_else(|| missing("OPENAI_API_KEY"))?;
            let mut m = openai::OpenAiModel::new(model, api_key).options(options);
            if provider == "openai-responses" {
                m = m.api(openai::OpenAiApi::Responses);
            }
            if let Some(url) = &config.openai_base_url {
                m = m.base_url(url.clone());
                // Another server behind OPENAI_BASE_URL most likely knows `max_tokens` only.
                if !url.contains("api.openai.com") && !url.contains(".openai.azure.com") {
                    m = m.max_tokens_param(openai::MaxTokensParam::MaxTokens);
                }
            }
            Arc::new(m)
        }
        "anthropic" => {
            let api_key =
                key(&config.anthropic_api_key).ok_or_else(|| missing("ANTHROPIC_API_KEY"))?;
            let mut m = anthropic::AnthropicModel::new(model, api_key).options(options);
            if let Some(url) = &config.anthropic_base_url {
                m = m.base_url(url.clone());
            }
            Arc::new(m)
        }
        _ => {
            let url = config
                .ollama_base_url
                .clone()
                .unwrap_or_else(|| openai::OLLAMA_BASE_URL.to_string());
            Arc::new(openai::OpenAiModel::compatible("ollama", model, url).options(options))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image counts the same at 1 KiB and 1 MiB of base64 (what the provider charges for it
    /// does not follow its bytes), a provider block by its JSON, text by its bytes.
    #[test]
    fn images_and_provider_blocks_count_in_the_estimate() {
        for size in [1 << 10, 1 << 20] {
            let block =
                serde_json::json!({"type": "web_search_tool_result", "content": "r".repeat(500)});
            let mut m = Message::user("look");
            m.content = Content::Parts(vec![
                ContentPart::text("look"),
                ContentPart::image_base64("image/png", "A".repeat(size)),
                ContentPart::image_url("https://example.com/a.png"),
                ContentPart::ProviderBlock {
                    provider: "anthropic".into(),
                    block: block.clone(),
                },
            ]);
            assert_eq!(
                estimate_message_chars(&m),
                4 + 16 + 2 * IMAGE_CHARS + crate::json::approx_len(&block),
                "{size}"
            );
        }
        assert_eq!(estimate_message_chars(&Message::user("abcd")), 4 + 16);
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = ModelError::MissingCredentials {
            provider: "openai".into(),
            variable: "OPENAI_API_KEY".into(),
        };
        assert!(e.to_string().contains("OPENAI_API_KEY"));
        let e = ModelError::RateLimited {
            provider: "openai".into(),
            retry_after: Some(Duration::from_secs(2)),
            message: "slow down".into(),
        };
        assert!(e.to_string().contains("retry after 2.0s"), "{e}");
        assert!(e.is_transient());
    }

    #[test]
    fn options_fall_back_to_base() {
        let base = ModelOptions::default().temperature(0.5).retries(3);
        let opts = ModelOptions::default().temperature(0.1).or(&base);
        assert_eq!(opts.temperature, Some(0.1));
        assert_eq!(opts.retries, Some(3));
    }
}
