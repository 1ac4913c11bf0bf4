//! Anthropic Messages API (`POST {base_url}/v1/messages`), plain and streamed.
//!
//! **Request.** Headers `x-api-key` and `anthropic-version: 2023-06-01`. The system prompt is the
//! top-level `system` field (system messages inside the conversation are appended to it).
//! Messages are content blocks: `text`, `image` (`base64` or `url` source; `data:` URLs are sent
//! as base64), `tool_use` with the arguments as a JSON object, and `tool_result` with
//! `tool_use_id` and `is_error`. Consecutive turns of the same role are merged into one turn
//! (so the results of parallel tool calls travel together in one user turn, `tool_result`
//! blocks first, as the API requires); empty assistant turns are dropped. Tools are
//! `{name, description, input_schema}`; `tool_choice` is `auto` / `any` / `tool` / `none`
//! (sent only with tools).
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
//! let answer = model.generate(ModelRequest::new(vec![Message::user("Hi!")]).system("Be brief.")).await?;
//! println!("{}", answer.message.text());
//! # Ok(()) }
//! ```

mod stream;
mod wire;
use stream::EventParser;
use wire::{stop_reason, turns, usage};

use serde_json::{Map, Value, json};

use super::common::{
    DEFAULT_MODEL_TIMEOUT, ProviderError, annotate_cost, classify, clip, f32_json,
    map_http_error_scrubbed, merge_extra, model_stream,
};
use super::{
    ChatModel, FinishReason, ModelError, ModelOptions, ModelProfile, ModelRequest, ModelResponse,
    ModelStream, ToolChoice,
};
use crate::http::{HttpClient, HttpRequest, Secrets, redact_url_text};
use crate::message::{Message, ToolCall};

/// Anthropic's API base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header kit sends.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A Claude model behind the Messages API.
#[derive(Clone)]
pub struct AnthropicModel {
    model: String,
    base_url: String,
    api_key: String,
    version: String,
    headers: Vec<(String, String)>,
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
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Value {
        let opts = request.options.clone().or(&self.defaults);
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
        body.insert(
            "max_tokens".into(),
            json!(
                opts.max_tokens
                    .unwrap_or_else(|| default_max_tokens(&self.model))
            ),
        );
        if !system.is_empty() {
            body.insert("system".into(), Value::from(system.join("\n\n")));
        }
        body.insert("messages".into(), Value::Array(turns));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
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
            body.insert("tools".into(), Value::Array(tools));
            let choice = match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            };
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
        super::common::replay_stream(body, limits, EventParser::default())
    }

    pub(crate) fn parse_response(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |what: &str| ModelError::MalformedResponse {
            provider: "anthropic".to_string(),
            message: format!("{what}: {}", clip(&v.to_string(), 500)),
        };
        if v.get("type").and_then(Value::as_str) == Some("error") {
            let parsed = ProviderError::parse(&v.to_string());
            return Err(classify("anthropic".into(), None, &parsed, None));
        }
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("the response has no `content` array"))?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""))
                }
                Some("tool_use") => {
                    let id = block.get("id").and_then(Value::as_str);
                    let name = block.get("name").and_then(Value::as_str);
                    let (Some(id), Some(name)) = (id, name) else {
                        return Err(malformed(&format!(
                            "tool_use block {i} lacks `id` or `name`"
                        )));
                    };
                    let input = block
                        .get("input")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    calls.push(ToolCall::with_id(id, name, input));
                }
                _ => {} // thinking, server tool blocks, ...: not part of kit's message
            }
        }
        let stop = v.get("stop_reason").and_then(Value::as_str);
        let finish_reason = match stop {
            Some(r) => stop_reason(r),
            None if calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let mut message = Message::assistant(text);
        message.tool_calls = calls;
        message.usage = v.get("usage").filter(|u| u.is_object()).map(usage);
        for key in ["id", "model", "stop_reason"] {
            if let Some(s) = v.get(key).and_then(Value::as_str) {
                message.metadata.insert(key.into(), Value::from(s));
            }
        }
        annotate_cost(&mut message.metadata, &self.model, message.usage.as_ref());
        Ok(ModelResponse {
            message,
            finish_reason,
        })
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

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let http_request = self.http_request(&request, false);
        let secrets = http_request.secrets().with(&self.api_key);
        let response = self
            .http
            .send(http_request)
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        let v: Value = response
            .json()
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        self.parse_response(&v).map_err(|e| e.scrubbed(&secrets))
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let http_request = self.http_request(&request, true);
        let secrets: Secrets = http_request.secrets().with(&self.api_key);
        let response = self
            .http
            .send_stream(http_request)
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &secrets))?;
        Ok(model_stream(
            "anthropic",
            response.sse(),
            EventParser::default(),
            secrets,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
