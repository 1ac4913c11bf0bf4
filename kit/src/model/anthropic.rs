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
//! [`Usage::input_tokens`] includes them (`input_tokens + cache_read_input_tokens +
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

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value, json};

use super::common::{
    DEFAULT_MODEL_TIMEOUT, ProviderError, SseParser, annotate_cost, classify, clip, event_json,
    f32_json, map_http_error_scrubbed, merge_extra, model_stream, u64_at,
};
use super::{
    ChatModel, FinishReason, ModelChunk, ModelError, ModelOptions, ModelProfile, ModelRequest,
    ModelResponse, ModelStream, ToolChoice,
};
use crate::http::{HttpClient, HttpRequest, SseEvent};
use crate::message::{Content, ContentPart, ImageSource, Message, Role, ToolCall, Usage};

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
            .field("base_url", &self.base_url)
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
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the `anthropic-version` header.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Adds a header to every request (e.g. `anthropic-beta`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Default options, used where a request leaves them unset.
    pub fn options(mut self, options: ModelOptions) -> Self {
        self.defaults = options;
        self
    }

    /// Uses this HTTP client (its timeout and retry policy are the defaults of every call).
    pub fn http_client(mut self, http: HttpClient) -> Self {
        self.http = http;
        self
    }

    /// Sets the capabilities.
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

    fn parse_response(&self, v: &Value) -> Result<ModelResponse, ModelError> {
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

fn stop_reason(r: &str) -> FinishReason {
    match r {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Messages API `usage` → [`Usage`] (input tokens include the cached ones).
fn usage(u: &Value) -> Usage {
    let cache_read = u64_at(u, "cache_read_input_tokens");
    let cache_creation = u64_at(u, "cache_creation_input_tokens");
    Usage {
        input_tokens: u64_at(u, "input_tokens") + cache_read + cache_creation,
        output_tokens: u64_at(u, "output_tokens"),
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_creation,
    }
}

fn image_block(source: &ImageSource) -> Value {
    match source {
        ImageSource::Url { url } => match parse_data_url(url) {
            Some((media_type, data)) => json!({"type": "image", "source": {
                "type": "base64", "media_type": media_type, "data": data,
            }}),
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
        ImageSource::Base64 { media_type, data } => json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data,
        }}),
    }
}

/// `data:image/png;base64,AAAA` → (`image/png`, `AAAA`).
fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// Content as blocks; empty text blocks are left out (the API rejects them).
fn blocks(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(t) if t.is_empty() => Vec::new(),
        Content::Text(t) => vec![json!({"type": "text", "text": t})],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } if text.is_empty() => None,
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::Image { source } => Some(image_block(source)),
            })
            .collect(),
    }
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// Adds blocks to the conversation, merging into the last turn when it has the same role;
/// `tool_result` blocks go before the other blocks of a user turn.
fn push_turn(turns: &mut Vec<Value>, role: &str, new: Vec<Value>) {
    if new.is_empty() {
        return;
    }
    if let Some(last) = turns.last_mut()
        && last.get("role").and_then(Value::as_str) == Some(role)
        && let Some(Value::Array(content)) = last.get_mut("content")
    {
        for block in new {
            if is_tool_result(&block) {
                let at = content
                    .iter()
                    .position(|b| !is_tool_result(b))
                    .unwrap_or(content.len());
                content.insert(at, block);
            } else {
                content.push(block);
            }
        }
        return;
    }
    turns.push(json!({"role": role, "content": new}));
}

/// The conversation as Messages API turns, plus the text of system messages found in it.
fn turns(conversation: &[Message]) -> (Vec<String>, Vec<Value>) {
    let mut system = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    for m in conversation {
        match m.role {
            Role::System => {
                let t = m.text();
                if !t.is_empty() {
                    system.push(t);
                }
            }
            Role::User => push_turn(&mut out, "user", blocks(&m.content)),
            Role::Assistant => {
                let mut content = blocks(&m.content);
                content.retain(|b| b.get("type").and_then(Value::as_str) == Some("text"));
                for call in &m.tool_calls {
                    let input = match &call.args {
                        Value::Object(_) => call.args.clone(),
                        // Arguments the model produced as invalid JSON: the API needs an object;
                        // the error tool result quotes the raw text to the model.
                        _ => Value::Object(Map::new()),
                    };
                    content.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": input,
                    }));
                }
                push_turn(&mut out, "assistant", content);
            }
            Role::Tool => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert(
                    "tool_use_id".into(),
                    Value::from(m.tool_call_id.clone().unwrap_or_default()),
                );
                match &m.content {
                    Content::Text(t) if t.is_empty() => {}
                    Content::Text(t) => {
                        block.insert("content".into(), Value::from(t.clone()));
                    }
                    parts @ Content::Parts(_) => {
                        block.insert("content".into(), Value::Array(blocks(parts)));
                    }
                }
                block.insert("is_error".into(), Value::Bool(m.is_error()));
                push_turn(&mut out, "user", vec![Value::Object(block)]);
            }
            Role::Remove => {}
        }
    }
    (system, out)
}

/// Messages API stream events → model chunks.
#[derive(Default)]
struct EventParser {
    /// Content-block index → tool-call index.
    calls: HashMap<u64, usize>,
    next_call: usize,
    stopped: bool,
    done: bool,
}

impl SseParser for EventParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        let v = event_json("anthropic", &event)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage").filter(|u| u.is_object()) {
                    out.push_back(ModelChunk::Usage { usage: usage(u) });
                }
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = v.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let call = self.next_call;
                        self.next_call += 1;
                        self.calls.insert(index, call);
                        let args = match block.get("input") {
                            Some(Value::Object(m)) if !m.is_empty() => {
                                Value::Object(m.clone()).to_string()
                            }
                            _ => String::new(),
                        };
                        out.push_back(ModelChunk::ToolCall {
                            index: call,
                            id: block.get("id").and_then(Value::as_str).map(str::to_string),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                            args,
                        });
                    }
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            out.push_back(ModelChunk::Text {
                                text: t.to_string(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = v.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            out.push_back(ModelChunk::Text {
                                text: t.to_string(),
                            });
                        }
                    }
                    Some("input_json_delta") => {
                        let Some(&call) = self.calls.get(&index) else {
                            return Err(ModelError::MalformedResponse {
                                provider: "anthropic".into(),
                                message: format!(
                                    "input_json_delta for content block {index}, which did not \
                                     start as a tool_use block"
                                ),
                            });
                        };
                        let part = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        out.push_back(ModelChunk::ToolCall {
                            index: call,
                            id: None,
                            name: None,
                            args: part.to_string(),
                        });
                    }
                    _ => {} // thinking_delta, signature_delta, citations_delta
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stopped = true;
                    out.push_back(ModelChunk::Finish {
                        reason: stop_reason(r),
                    });
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    out.push_back(ModelChunk::Usage { usage: usage(u) });
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let parsed = ProviderError::parse(&v.to_string());
                return Err(classify("anthropic".into(), None, &parsed, None));
            }
            _ => {} // ping, content_block_stop, and event types added later
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self) -> Result<(), ModelError> {
        if self.done || self.stopped {
            return Ok(());
        }
        Err(ModelError::MalformedResponse {
            provider: "anthropic".to_string(),
            message: "the stream ended before `message_stop` and without a stop reason; the \
                      answer is incomplete — try again"
                .to_string(),
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
        let response = self
            .http
            .send(self.http_request(&request, false))
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &[&self.api_key]))?;
        let v: Value = response
            .json()
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &[&self.api_key]))?;
        self.parse_response(&v)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let response = self
            .http
            .send_stream(self.http_request(&request, true))
            .await
            .map_err(|e| map_http_error_scrubbed("anthropic", e, &[&self.api_key]))?;
        Ok(model_stream(
            "anthropic",
            response.sse(),
            EventParser::default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_merge_and_order_tool_results_first() {
        let calls = vec![
            ToolCall::with_id("a", "one", json!({})),
            ToolCall::with_id("b", "two", Value::String("{bad".into())),
        ];
        let (system, turns) = turns(&[
            Message::system("extra rule"),
            Message::user("go"),
            Message::assistant_with_tool_calls("", calls),
            Message::tool("a", "1"),
            Message::user("and hurry"),
            Message::tool_error("b", "bad args"),
            Message::assistant(""),
        ]);
        assert_eq!(system, ["extra rule"]);
        assert_eq!(turns.len(), 3, "{turns:#?}");
        assert_eq!(turns[1]["content"][1]["input"], json!({}));
        let user = &turns[2]["content"];
        assert_eq!(user[0]["tool_use_id"], "a");
        assert_eq!(user[1]["tool_use_id"], "b");
        assert_eq!(user[1]["is_error"], true);
        assert_eq!(user[2]["text"], "and hurry");
    }

    #[test]
    fn data_urls_become_base64_sources() {
        let b = image_block(&ImageSource::Url {
            url: "data:image/jpeg;base64,/9j/".into(),
        });
        assert_eq!(
            b["source"],
            json!({"type": "base64", "media_type": "image/jpeg", "data": "/9j/"})
        );
        assert_eq!(default_max_tokens("claude-3-haiku-20240307"), 4096);
        assert_eq!(default_max_tokens("claude-3-5-haiku-latest"), 8192);
    }
}
