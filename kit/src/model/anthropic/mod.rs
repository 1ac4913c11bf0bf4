//! Anthropic Messages API (`POST {base_url}/v1/messages`), plain and streamed.
//!
//! **Request.** Headers `x-api-key` and `anthropic-version: 2023-06-01`. The system prompt is the
//! top-level `system` field (system messages inside the conversation are appended to it).
//! Messages are content blocks: `text`, `image` (`base64` or `url` source; `data:` URLs are sent
//! as base64), `tool_use` with the arguments as a JSON object, and `tool_result` with
//! `tool_use_id` and `is_error`. An assistant message's `thinking` blocks (with their
//! `signature`), `redacted_thinking` blocks and server-tool blocks (`server_tool_use`,
//! `web_search_tool_result`, ...) go back byte for byte, in their order: the API requires the
//! thinking blocks of a tool-use turn on the next request. Consecutive turns of the same role are merged into one turn
//! (so the results of parallel tool calls travel together in one user turn, `tool_result`
//! blocks first, as the API requires); empty assistant turns are dropped. Tools are
//! `{name, description, input_schema}`, followed by the server tools given to
//! [`AnthropicModel::server_tool`]; `tool_choice` is `auto` / `any` / `tool` / `none` (sent
//! only with tools, with `disable_parallel_tool_use` when the options forbid parallel calls).
//!
//! **Extended thinking** is on with [`AnthropicModel::thinking`] (a token budget). Thinking
//! streams as reasoning chunks (`thinking_delta`, then `signature_delta`) and is kept on the
//! assistant message as [`Reasoning`](crate::message::Reasoning) parts.
//!
//! **Prompt caching** is opt-in: [`AnthropicModel::prompt_cache`] marks the system prompt,
//! the tools and the last message as cache breakpoints (`cache_control`), with the
//! five-minute or one-hour lifetime. Usage counts cache reads and writes (and the one-hour
//! share of writes), and the cost prices each.
//!
//! **`max_tokens`** is required by the API. When unset kit sends 8192 — within the output limit
//! of every current model — and 4096 for the Claude 3 (not 3.5 / 3.7) models, whose limit it is.
//!
//! **Structured output** is asked for in the system prompt (the schema, and "answer with JSON
//! only"); the profile reports no native support.
//!
//! **Usage.** Anthropic's `input_tokens` excludes cached tokens; kit's
//! [`Usage::input_tokens`](crate::message::Usage::input_tokens) includes them (`input_tokens + cache_read_input_tokens +
//! cache_creation_input_tokens`), with the cache counts also reported separately.
//!
//! ```no_run
//! use kit::model::{ChatModel, ModelRequest, anthropic::AnthropicModel};
//! use kit::Message;
//! # async fn demo() -> Result<(), kit::model::ModelError> {
//! let model = AnthropicModel::new("claude-haiku-4-5", std::env::var("ANTHROPIC_API_KEY").unwrap_or_default());
//! let request = ModelRequest::new(vec![Message::user("Hi!")]).system("Be brief.");
//! let answer = model.generate(&request).await?;
//! println!("{}", answer.message.text());
//! # Ok(()) }
//! ```

mod response;
mod stream;
mod wire;
use stream::EventParser;
use wire::{mark_last_message, turns};

use serde_json::{Map, Value, json};

use super::common::{
    DEFAULT_MODEL_TIMEOUT, JsonStreamBody, answer_stream, f32_json, json_answer_of_stream,
    map_http_error_scrubbed, merge_extra, model_stream, replay_stream, within_answer_bounds,
    within_answer_depth,
};
use super::{
    ChatModel, ModelError, ModelOptions, ModelProfile, ModelRequest, ModelResponse, ModelStream,
    ToolChoice,
};
use crate::http::{HttpClient, HttpRequest, Secrets, redact_url_text};

/// Anthropic's API base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header kit sends.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How long a prompt-cache entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheTtl {
    /// Five minutes, refreshed on every hit (the default; writes cost 1.25× input).
    #[default]
    FiveMinutes,
    /// One hour (writes cost 2× input).
    OneHour,
}

/// Where prompt-cache breakpoints go (`cache_control`), for [`AnthropicModel::prompt_cache`].
///
/// ```
/// use kit::model::anthropic::{AnthropicModel, CacheTtl, PromptCache};
/// let model = AnthropicModel::new("claude-sonnet-4-5", "sk-ant-…")
///     .prompt_cache(PromptCache::all().ttl(CacheTtl::OneHour));
/// # drop(model);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptCache {
    /// The system prompt.
    pub system: bool,
    /// The tool definitions (the breakpoint goes on the last tool).
    pub tools: bool,
    /// The conversation so far (the breakpoint goes on the last block of the last message).
    pub last_message: bool,
    /// The entries' lifetime.
    pub ttl: CacheTtl,
}

impl PromptCache {
    /// Breakpoints on the system prompt, the tools and the last message.
    pub fn all() -> Self {
        PromptCache {
            system: true,
            tools: true,
            last_message: true,
            ttl: CacheTtl::FiveMinutes,
        }
    }

    /// Sets the lifetime.
    #[must_use]
    pub fn ttl(mut self, ttl: CacheTtl) -> Self {
        self.ttl = ttl;
        self
    }

    fn control(&self) -> Value {
        match self.ttl {
            CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
            CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
        }
    }
}

/// The key of [`ModelOptions::extra`] that asks for prompt-cache breakpoints on one request:
/// its value is the `cache_control` object to place (`{"type": "ephemeral"}`, with an optional
/// `"ttl": "1h"`). Anthropic models mark the system prompt, the tools and the last message with
/// it and do not send the key; other providers ignore it.
pub const REQUEST_CACHE_CONTROL: &str = "kit_cache_control";

/// The breakpoints of one request.
struct RequestCache {
    system: bool,
    tools: bool,
    last_message: bool,
    control: Value,
}

/// A Claude model behind the Messages API.
#[derive(Clone)]
pub struct AnthropicModel {
    model: String,
    base_url: String,
    api_key: String,
    version: String,
    headers: Vec<(String, String)>,
    thinking_budget: Option<u32>,
    cache: PromptCache,
    server_tools: Vec<Value>,
    defaults: ModelOptions,
    http: HttpClient,
    profile: ModelProfile,
}

impl std::fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("model", &self.model)
            .field("base_url", &redact_url_text(&self.base_url))
            .field("api_key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

/// The `max_tokens` sent when the request sets none (see the [module docs](self)).
pub fn default_max_tokens(model: &str) -> u32 {
    let claude_3_0 = model.starts_with("claude-3-")
        && !model.starts_with("claude-3-5")
        && !model.starts_with("claude-3-7");
    if claude_3_0 { 4096 } else { 8192 }
}

impl AnthropicModel {
    /// A Claude model (`claude-sonnet-4-5`, `claude-haiku-4-5`, ...) at [`ANTHROPIC_BASE_URL`].
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        AnthropicModel {
            model: model.into(),
            base_url: ANTHROPIC_BASE_URL.to_string(),
            api_key: api_key.into(),
            version: ANTHROPIC_VERSION.to_string(),
            headers: Vec::new(),
            thinking_budget: None,
            cache: PromptCache::default(),
            server_tools: Vec::new(),
            defaults: ModelOptions::default(),
            http: HttpClient::new().timeout(DEFAULT_MODEL_TIMEOUT),
            profile: ModelProfile {
                tool_calling: true,
                structured_output: false,
                max_input_tokens: Some(200_000),
            },
        }
    }

    /// Sets the base URL (the part before `/v1/messages`).
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the `anthropic-version` header.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Adds a header to every request (e.g. `anthropic-beta`).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Turns extended thinking on with this token budget (`thinking: {type: enabled,
    /// budget_tokens}`; at least 1024). `max_tokens` must exceed the budget: when a request
    /// sets none, kit sends the budget plus the model's default.
    #[must_use]
    pub fn thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking_budget = Some(budget_tokens);
        self
    }

    /// Sets prompt-cache breakpoints (none by default).
    #[must_use]
    pub fn prompt_cache(mut self, cache: PromptCache) -> Self {
        self.cache = cache;
        self
    }

    /// Adds a server tool, sent as given after kit's tools on every request
    /// (`{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}`, the code
    /// execution tool, ...). Its calls and results stay on the answer as provider blocks.
    #[must_use]
    pub fn server_tool(mut self, tool: Value) -> Self {
        self.server_tools.push(tool);
        self
    }

    /// Default options, used where a request leaves them unset.
    #[must_use]
    pub fn options(mut self, options: ModelOptions) -> Self {
        self.defaults = options;
        self
    }

    /// Uses this HTTP client (its timeout and retry policy are the defaults of every call).
    #[must_use]
    pub fn http_client(mut self, http: HttpClient) -> Self {
        self.http = http;
        self
    }

    /// Sets the capabilities.
    #[must_use]
    pub fn profile(mut self, profile: ModelProfile) -> Self {
        self.profile = profile;
        self
    }

    /// The request body for `request` (what is sent; public for inspection and tests).
    ///
    /// A request whose options carry [`REQUEST_CACHE_CONTROL`] in `extra` (what
    /// `AnthropicPromptCachingMiddleware` sets) gets breakpoints on the system prompt, the tools
    /// and the last message with that `cache_control` value, whatever the model's own
    /// [`PromptCache`]; the key itself is not sent.
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Value {
        let mut opts = request.options.clone().or(&self.defaults);
        let cache = match opts.extra.remove(REQUEST_CACHE_CONTROL) {
            Some(control @ Value::Object(_)) => RequestCache {
                system: true,
                tools: true,
                last_message: true,
                control,
            },
            _ => RequestCache {
                system: self.cache.system,
                tools: self.cache.tools,
                last_message: self.cache.last_message,
                control: self.cache.control(),
            },
        };
        let (extra_system, turns) = turns(&request.messages);
        let mut system: Vec<String> = request
            .system
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        system.extend(extra_system);
        if let Some(format) = &request.response_format {
            system.push(format!(
                "Answer with only a JSON value that matches this JSON Schema — no prose, no code \
                 fences:\n{}",
                format.schema
            ));
        }
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model.clone()));
        let default_max = default_max_tokens(&self.model);
        let max_tokens = opts.max_tokens.unwrap_or(match self.thinking_budget {
            Some(budget) => budget.saturating_add(default_max),
            None => default_max,
        });
        body.insert("max_tokens".into(), json!(max_tokens));
        if let Some(budget) = self.thinking_budget {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        let control = cache.control;
        if !system.is_empty() {
            let text = system.join("\n\n");
            body.insert(
                "system".into(),
                if cache.system {
                    json!([{"type": "text", "text": text, "cache_control": control}])
                } else {
                    Value::from(text)
                },
            );
        }
        let mut turns = turns;
        if cache.last_message {
            mark_last_message(&mut turns, &control);
        }
        body.insert("messages".into(), Value::Array(turns));
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        tools.extend(self.server_tools.iter().cloned());
        if cache.tools
            && let Some(Value::Object(last)) = tools.last_mut()
        {
            last.insert("cache_control".into(), control);
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if !request.tools.is_empty() {
            let mut choice = match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            };
            if let (Some(parallel), Value::Object(c)) = (opts.parallel_tool_calls, &mut choice)
                && request.tool_choice != ToolChoice::None
            {
                c.insert("disable_parallel_tool_use".into(), Value::Bool(!parallel));
            }
            body.insert("tool_choice".into(), choice);
        }
        if let Some(t) = opts.temperature {
            body.insert("temperature".into(), f32_json(t));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        merge_extra(&mut body, &opts.extra);
        Value::Object(body)
    }

    fn http_request(&self, request: &ModelRequest, stream: bool) -> HttpRequest {
        let opts = request.options.clone().or(&self.defaults);
        let mut r = HttpRequest::post(&format!("{}/v1/messages", self.base_url))
            .json(&self.request_body(request, stream))
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", &self.version);
        for (k, v) in &self.headers {
            r = r.header(k, v);
        }
        if stream {
            r = r.header("accept", "text/event-stream");
        }
        if let Some(ms) = opts.timeout_ms {
            r = r.timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(n) = opts.retries {
            r = r.max_retries(n);
        }
        r
    }

    /// Replays a whole streamed body (for [`crate::fuzz`]).
    pub(crate) fn replay_stream(
        &self,
        body: &[u8],
        limits: &crate::http::HttpLimits,
    ) -> Result<ModelResponse, ModelError> {
        super::common::replay_stream(body, limits, EventParser::new(&self.model))
    }
}

#[async_trait::async_trait]
impl ChatModel for AnthropicModel {
    fn provider(&self) -> &str {
        "anthropic"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn profile(&self) -> ModelProfile {
        self.profile.clone()
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let http_request = self.http_request(request, false);
        let secrets = http_request.secrets().with(&self.api_key);
        let response = self
            .http
            .send(http_request)
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        within_answer_bounds(wire::PROVIDER, "the answer", &response.body)?;
        let v: Value = response
            .json()
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        let v = within_answer_depth(wire::PROVIDER, v)?;
        self.parse_response(&v).map_err(|e| e.scrubbed(&secrets))
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let http_request = self.http_request(request, true);
        let secrets: Secrets = http_request.secrets().with(&self.api_key);
        let response = self
            .http
            .send_stream(http_request)
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        if response.is_json() {
            let limits = *self.http.get_limits();
            let answer = match json_answer_of_stream(wire::PROVIDER, response, &secrets).await? {
                JsonStreamBody::Json(v) => self.parse_response(&v),
                JsonStreamBody::Events(body) => {
                    replay_stream(&body, &limits, EventParser::new(&self.model))
                }
            }
            .map_err(|e| e.scrubbed(&secrets))?;
            return Ok(answer_stream(&answer));
        }
        Ok(model_stream(
            "anthropic",
            response.sse(),
            EventParser::new(&self.model),
            secrets,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
