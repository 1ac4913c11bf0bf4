//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`), plain and streamed.
//!
//! One client serves OpenAI and every server that speaks its wire format: Ollama, vLLM,
//! llama.cpp, OpenRouter, LM Studio, Azure OpenAI. Point [`OpenAiModel::base_url`] at the
//! server; add headers with [`OpenAiModel::header`]; Azure has its own constructor.
//!
//! **Request.** The system prompt is the first `system` message; user messages with images send
//! `image_url` parts (an `https:` URL or a `data:` URL for base64 images); assistant tool calls
//! carry their arguments as JSON *strings*; tool results are `tool` messages with their
//! `tool_call_id`. Tools are `{"type":"function","function":{name, description, parameters}}`,
//! `tool_choice` is `auto` / `none` / `required` / `{"type":"function","function":{"name"}}`
//! (sent only with tools), structured output is `response_format: {"type":"json_schema", ...}`.
//! Streams ask for `stream_options.include_usage` so the last chunk carries token usage.
//!
//! **Output-token cap.** OpenAI deprecated `max_tokens` for `max_completion_tokens` (reasoning
//! models reject the old name), but many compatible servers only know `max_tokens`. So:
//! [`MaxTokensParam::MaxCompletionTokens`] for OpenAI itself and Azure,
//! [`MaxTokensParam::MaxTokens`] for everything else (Ollama, [`OpenAiModel::compatible`]
//! servers, and `openai:` models whose `OPENAI_BASE_URL` points elsewhere); override with
//! [`OpenAiModel::max_tokens_param`].
//!
//! ```no_run
//! use kit::model::{ChatModel, ModelRequest, openai::OpenAiModel};
//! use kit::Message;
//! # async fn demo() -> Result<(), kit::model::ModelError> {
//! let model = OpenAiModel::new("gpt-4o-mini", std::env::var("OPENAI_API_KEY").unwrap_or_default());
//! let vllm = OpenAiModel::compatible("vllm", "Qwen/Qwen2.5-7B-Instruct", "http://localhost:8000/v1");
//! let answer = model.generate(ModelRequest::new(vec![Message::user("Hi!")])).await?;
//! println!("{}", answer.message.text());
//! # let _ = vllm; Ok(()) }
//! ```

mod stream;
mod wire;
use stream::ChunkParser;
use wire::{finish_reason, messages, openai_context_window, usage};

use serde_json::{Map, Value, json};

use super::common::{
    DEFAULT_MODEL_TIMEOUT, ProviderError, annotate_cost, classify, clip, f32_json,
    map_http_error_scrubbed, merge_extra, model_stream,
};
use super::{
    ChatModel, FinishReason, ModelError, ModelOptions, ModelProfile, ModelRequest, ModelResponse,
    ModelStream, ToolChoice, parse_args,
};
use crate::http::{HttpClient, HttpRequest, Secrets, redact_url_text};
use crate::message::{Message, ToolCall};

/// OpenAI's API base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Ollama's OpenAI-compatible base URL on the local machine.
pub const OLLAMA_BASE_URL: &str = "http://localhost:11434/v1";

/// Which body field carries the output-token cap (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensParam {
    /// `max_completion_tokens` (OpenAI, Azure; required by reasoning models).
    MaxCompletionTokens,
    /// `max_tokens` (Ollama, vLLM, llama.cpp and most compatible servers).
    MaxTokens,
}

#[derive(Clone)]
enum Auth {
    None,
    Bearer(String),
    Header(String, String),
}

/// A chat model behind an OpenAI-compatible Chat Completions endpoint.
#[derive(Clone)]
pub struct OpenAiModel {
    provider: String,
    model: String,
    base_url: String,
    auth: Auth,
    headers: Vec<(String, String)>,
    query: Vec<(String, String)>,
    max_tokens_param: MaxTokensParam,
    defaults: ModelOptions,
    http: HttpClient,
    profile: ModelProfile,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &redact_url_text(&self.base_url))
            .field(
                "auth",
                &match self.auth {
                    Auth::None => "none",
                    Auth::Bearer(_) => "bearer [REDACTED]",
                    Auth::Header(..) => "header [REDACTED]",
                },
            )
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// An OpenAI model (`gpt-4o-mini`, `gpt-4.1`, `o4-mini`, ...) at [`OPENAI_BASE_URL`].
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        let model = model.into();
        OpenAiModel {
            provider: "openai".to_string(),
            profile: ModelProfile {
                max_input_tokens: openai_context_window(&model),
                ..ModelProfile::default()
            },
            model,
            base_url: OPENAI_BASE_URL.to_string(),
            auth: Auth::Bearer(api_key.into()),
            headers: Vec::new(),
            query: Vec::new(),
            max_tokens_param: MaxTokensParam::MaxCompletionTokens,
            defaults: ModelOptions::default(),
            http: HttpClient::new().timeout(DEFAULT_MODEL_TIMEOUT),
        }
    }

    /// A model on another OpenAI-compatible server, without credentials (add them with
    /// [`api_key`](Self::api_key) or [`header`](Self::header)). `provider` names it in errors
    /// and traces (`ollama`, `vllm`, `openrouter`, ...).
    pub fn compatible(
        provider: impl Into<String>,
        model: impl Into<String>,
        base_url: impl Into<String>,
    ) -> Self {
        let mut m = Self::new(model, "");
        m.provider = provider.into();
        m.auth = Auth::None;
        m.max_tokens_param = MaxTokensParam::MaxTokens;
        m.profile.max_input_tokens = None;
        m.base_url(base_url)
    }

    /// An Azure OpenAI deployment: `{endpoint}/openai/deployments/{deployment}/chat/completions
    /// ?api-version={api_version}` with the `api-key` header. `endpoint` is
    /// `https://<resource>.openai.azure.com`.
    pub fn azure(
        endpoint: &str,
        deployment: impl Into<String>,
        api_version: impl Into<String>,
        api_key: impl Into<String>,
    ) -> Self {
        let deployment = deployment.into();
        let base = format!(
            "{}/openai/deployments/{deployment}",
            endpoint.trim_end_matches('/')
        );
        let mut m = Self::new(deployment, "");
        m.provider = "azure".to_string();
        m.auth = Auth::Header("api-key".to_string(), api_key.into());
        m.query
            .push(("api-version".to_string(), api_version.into()));
        m.base_url(base)
    }

    /// Sets the base URL (the part before `/chat/completions`).
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sends `Authorization: Bearer <key>`.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.auth = Auth::Bearer(key.into());
        self
    }

    /// Adds a header to every request (OpenRouter's `HTTP-Referer`, an organisation id, ...).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds a query parameter to every request.
    #[must_use]
    pub fn query(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((key.into(), value.into()));
        self
    }

    /// Chooses the body field of the output-token cap.
    #[must_use]
    pub fn max_tokens_param(mut self, param: MaxTokensParam) -> Self {
        self.max_tokens_param = param;
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
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(messages(request.system.as_deref(), &request.messages)),
        );
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(format) = &request.response_format {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": format.name,
                    "schema": format.schema,
                    "strict": format.strict,
                }}),
            );
        }
        if let Some(t) = opts.temperature {
            body.insert("temperature".into(), f32_json(t));
        }
        if let Some(n) = opts.max_tokens {
            let field = match self.max_tokens_param {
                MaxTokensParam::MaxCompletionTokens => "max_completion_tokens",
                MaxTokensParam::MaxTokens => "max_tokens",
            };
            body.insert(field.into(), json!(n));
        }
        body.insert("stream".into(), Value::Bool(stream));
        if stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        merge_extra(&mut body, &opts.extra);
        Value::Object(body)
    }

    fn http_request(&self, request: &ModelRequest, stream: bool) -> HttpRequest {
        let opts = request.options.clone().or(&self.defaults);
        let mut r = HttpRequest::post(&format!("{}/chat/completions", self.base_url))
            .json(&self.request_body(request, stream));
        for (k, v) in &self.query {
            r = r.query(k, v);
        }
        r = match &self.auth {
            Auth::None => r,
            Auth::Bearer(key) => r.bearer_auth(key),
            Auth::Header(name, value) => r.header(name, value),
        };
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

    /// Maps an HTTP failure, the credentials scrubbed from what the server sent back.
    fn map_error(&self, e: crate::http::HttpError, secrets: &Secrets) -> ModelError {
        map_http_error_scrubbed(&self.provider, e, secrets)
    }

    /// Every credential a request of this model carries: the key, custom header values,
    /// query values and the base URL's password (see [`HttpRequest::secrets`]).
    fn secrets(&self, request: &HttpRequest) -> Secrets {
        let mut secrets = request.secrets();
        if let Auth::Bearer(key) | Auth::Header(_, key) = &self.auth {
            secrets.add(key);
        }
        secrets
    }

    /// Replays a whole streamed body (for [`crate::fuzz`]).
    pub(crate) fn replay_stream(
        &self,
        body: &[u8],
        limits: &crate::http::HttpLimits,
    ) -> Result<ModelResponse, ModelError> {
        let parser = ChunkParser {
            provider: self.provider.clone(),
            done: false,
            finished: false,
        };
        super::common::replay_stream(body, limits, parser)
    }

    pub(crate) fn parse_response(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |what: &str| ModelError::MalformedResponse {
            provider: self.provider.clone(),
            message: format!("{what}: {}", clip(&v.to_string(), 500)),
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let parsed = ProviderError::parse(&json!({ "error": err }).to_string());
            return Err(classify(self.provider.clone(), None, &parsed, None));
        }
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("the response has no `choices`"))?;
        let msg = choice
            .get("message")
            .ok_or_else(|| malformed("the first choice has no `message`"))?;
        let mut text = msg
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut message_meta = Map::new();
        if let Some(refusal) = msg.get("refusal").and_then(Value::as_str) {
            message_meta.insert("refusal".into(), Value::from(refusal));
            if text.is_empty() {
                text = refusal.to_string();
            }
        }
        let mut calls = Vec::new();
        if let Some(list) = msg.get("tool_calls").and_then(Value::as_array) {
            for (i, call) in list.iter().enumerate() {
                let function = call.get("function").unwrap_or(&Value::Null);
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(&format!("tool call {i} has no function name")))?;
                let args = match function.get("arguments") {
                    Some(Value::String(raw)) => parse_args(raw),
                    Some(obj @ Value::Object(_)) => obj.clone(),
                    _ => Value::Object(Map::new()),
                };
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("call_{}", &crate::ids::random()[..8]));
                calls.push(ToolCall::with_id(id, name, args));
            }
        }
        let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
            Some(r) => finish_reason(r),
            None if calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let mut message = Message::assistant(text);
        message.tool_calls = calls;
        message.usage = v.get("usage").filter(|u| u.is_object()).map(usage);
        message.metadata = message_meta;
        for key in ["id", "model", "system_fingerprint"] {
            if let Some(s) = v.get(key).and_then(Value::as_str) {
                message.metadata.insert(key.into(), Value::from(s));
            }
        }
        message.metadata.insert(
            "finish_reason".into(),
            serde_json::to_value(&finish_reason).unwrap_or(Value::Null),
        );
        annotate_cost(&mut message.metadata, &self.model, message.usage.as_ref());
        Ok(ModelResponse {
            message,
            finish_reason,
        })
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAiModel {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn profile(&self) -> ModelProfile {
        self.profile.clone()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let http_request = self.http_request(&request, false);
        let secrets = self.secrets(&http_request);
        let response = self
            .http
            .send(http_request)
            .await
            .map_err(|e| self.map_error(e, &secrets))?;
        let v: Value = response.json().map_err(|e| self.map_error(e, &secrets))?;
        self.parse_response(&v).map_err(|e| e.scrubbed(&secrets))
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let http_request = self.http_request(&request, true);
        let secrets = self.secrets(&http_request);
        let response = self
            .http
            .send_stream(http_request)
            .await
            .map_err(|e| self.map_error(e, &secrets))?;
        let parser = ChunkParser {
            provider: self.provider.clone(),
            done: false,
            finished: false,
        };
        Ok(model_stream(
            &self.provider,
            response.sse(),
            parser,
            secrets,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
