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
//! (sent only with tools), with `parallel_tool_calls` when the options set it; a tool's
//! [`strict`](crate::model::ToolSpec::strict) is sent per tool; provider built-in tools
//! ([`OpenAiModel::builtin_tool`]) go alongside kit's. Structured output is
//! `response_format: {"type":"json_schema", ...}`. Streams ask for
//! `stream_options.include_usage` so the last chunk carries token usage (switch it off with
//! [`OpenAiModel::stream_usage`] for servers that refuse the field). Reasoning models get the
//! system prompt as a `developer` message ([`SystemRole`]) and `reasoning_effort` from the
//! options.
//!
//! **Reasoning.** What compatible servers add is kept on the assistant message as
//! [`Reasoning`](crate::message::Reasoning) parts and streamed as reasoning chunks:
//! `reasoning_content` (DeepSeek, vLLM, Qwen), `reasoning` (Groq, Cerebras, Ollama),
//! OpenRouter's `reasoning_details`, Mistral's `thinking` content chunks and Gemini's thought
//! signatures. It goes back to the server that produced it where that server needs it:
//! `reasoning_content` (DeepSeek's thinking mode with tools answers 400 without it),
//! `reasoning_details` entries unchanged, and Gemini's signatures on their tool calls. The
//! plain `reasoning` field and Mistral's chunks are not sent back — Groq rejects the field
//! with a 400 — and nothing goes to another provider. [`OpenAiModel::send_reasoning`] turns
//! it off.
//!
//! **The Responses API** ([`OpenAiApi::Responses`], or `openai-responses:<model>` in
//! [`init`](crate::model::init)): `POST {base_url}/responses`, stateless (`store: false`, the
//! conversation sent as input items, reasoning items sent back with their
//! `encrypted_content`), text, tool calls, streaming, reasoning summaries and usage.
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
//! let answer = model.generate(&ModelRequest::new(vec![Message::user("Hi!")])).await?;
//! println!("{}", answer.message.text());
//! # let _ = vllm; Ok(()) }
//! ```

mod request;
mod response;
mod responses;
mod stream;
mod wire;
use stream::ChunkParser;
use wire::openai_context_window;

use serde_json::Value;

use super::common::{
    DEFAULT_MODEL_TIMEOUT, JsonStreamBody, answer_stream, json_answer_of_stream,
    map_http_error_scrubbed, model_stream, replay_stream, within_answer_bounds,
    within_answer_depth,
};
use super::{
    ChatModel, ModelError, ModelOptions, ModelProfile, ModelRequest, ModelResponse, ModelStream,
};
use crate::http::{HttpClient, HttpRequest, Secrets, redact_url_text};

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

/// Which OpenAI API a model talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenAiApi {
    /// Chat Completions (`/chat/completions`), which every compatible server speaks.
    #[default]
    ChatCompletions,
    /// The Responses API (`/responses`), OpenAI's recommended API.
    Responses,
}

/// The role the system prompt is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemRole {
    /// `system`.
    System,
    /// `developer` (OpenAI's reasoning models; OpenAI's newer models take it too).
    Developer,
}

impl SystemRole {
    fn as_str(self) -> &'static str {
        match self {
            SystemRole::System => "system",
            SystemRole::Developer => "developer",
        }
    }
}

/// True for OpenAI's reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5`, ...).
fn is_reasoning_model(model: &str) -> bool {
    let bare = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| bare.starts_with(p))
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
    api: OpenAiApi,
    system_role: SystemRole,
    stream_usage: bool,
    send_reasoning: bool,
    builtin_tools: Vec<Value>,
    defaults: ModelOptions,
    http: HttpClient,
    profile: ModelProfile,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("api", &self.api)
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
    /// An OpenAI model (`gpt-4o-mini`, `gpt-4.1`, `o4-mini`, ...) at [`OPENAI_BASE_URL`], on
    /// Chat Completions. Reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5`, ...) get the system
    /// prompt as a `developer` message.
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        let model = model.into();
        let system_role = if is_reasoning_model(&model) {
            SystemRole::Developer
        } else {
            SystemRole::System
        };
        OpenAiModel {
            api: OpenAiApi::ChatCompletions,
            system_role,
            stream_usage: true,
            send_reasoning: true,
            builtin_tools: Vec::new(),
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
        m.system_role = SystemRole::System;
        m.profile.max_input_tokens = None;
        m.base_url(base_url)
    }

    /// An OpenAI model on the Responses API (what `openai-responses:<model>` resolves to).
    pub fn responses(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self::new(model, api_key).api(OpenAiApi::Responses)
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

    /// Chooses the API (Chat Completions by default).
    #[must_use]
    pub fn api(mut self, api: OpenAiApi) -> Self {
        self.api = api;
        self
    }

    /// Chooses the role of the system prompt (and of system messages).
    #[must_use]
    pub fn system_role(mut self, role: SystemRole) -> Self {
        self.system_role = role;
        self
    }

    /// Whether streams ask for a final usage chunk (`stream_options.include_usage`; on by
    /// default). Some compatible servers refuse the field: switch it off for them.
    #[must_use]
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = on;
        self
    }

    /// Whether reasoning the server produced goes back to it on later requests (on by
    /// default; see the [module docs](self) for which forms go back).
    #[must_use]
    pub fn send_reasoning(mut self, on: bool) -> Self {
        self.send_reasoning = on;
        self
    }

    /// Adds a provider built-in tool, sent as given next to kit's tools on every request
    /// (`{"type": "web_search"}` on the Responses API, a compatible server's own tools).
    #[must_use]
    pub fn builtin_tool(mut self, tool: Value) -> Self {
        self.builtin_tools.push(tool);
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
        match self.api {
            OpenAiApi::ChatCompletions => super::common::replay_stream(
                body,
                limits,
                ChunkParser::new(&self.provider, &self.model),
            ),
            OpenAiApi::Responses => super::common::replay_stream(
                body,
                limits,
                responses::EventParser::new(&self.provider, &self.model),
            ),
        }
    }

    /// Reads a whole answer of the model's API.
    pub(crate) fn parse_body(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        match self.api {
            OpenAiApi::ChatCompletions => self.parse_response(v),
            OpenAiApi::Responses => self.parse_responses(v),
        }
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

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let http_request = self.http_request(request, false);
        let secrets = self.secrets(&http_request);
        let response = self
            .http
            .send(http_request)
            .await
            .map_err(|e| self.map_error(e, &secrets))?;
        within_answer_bounds(&self.provider, "the answer", &response.body)?;
        let v: Value = response.json().map_err(|e| self.map_error(e, &secrets))?;
        let v = within_answer_depth(&self.provider, v)?;
        self.parse_body(&v).map_err(|e| e.scrubbed(&secrets))
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let http_request = self.http_request(request, true);
        let secrets = self.secrets(&http_request);
        let response = self
            .http
            .send_stream(http_request)
            .await
            .map_err(|e| self.map_error(e, &secrets))?;
        if response.is_json() {
            let limits = *self.http.get_limits();
            let answer = match json_answer_of_stream(&self.provider, response, &secrets).await? {
                JsonStreamBody::Json(v) => self.parse_body(&v),
                JsonStreamBody::Events(body) => match self.api {
                    OpenAiApi::ChatCompletions => replay_stream(
                        &body,
                        &limits,
                        ChunkParser::new(&self.provider, &self.model),
                    ),
                    OpenAiApi::Responses => replay_stream(
                        &body,
                        &limits,
                        responses::EventParser::new(&self.provider, &self.model),
                    ),
                },
            }
            .map_err(|e| e.scrubbed(&secrets))?;
            return Ok(answer_stream(&answer));
        }
        Ok(match self.api {
            OpenAiApi::ChatCompletions => model_stream(
                &self.provider,
                response.sse(),
                ChunkParser::new(&self.provider, &self.model),
                secrets,
            ),
            OpenAiApi::Responses => model_stream(
                &self.provider,
                response.sse(),
                responses::EventParser::new(&self.provider, &self.model),
                secrets,
            ),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
