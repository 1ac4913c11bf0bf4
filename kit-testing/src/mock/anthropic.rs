//! The Anthropic Messages wire format, for the mock server: `message` objects, the event stream
//! (`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta`,
//! `message_stop`, `ping`, `error`), and the API's error bodies
//! (`{"type":"error","error":{"type","message"},"request_id"}`) with their headers.

use std::ops::Deref;

use kit::model::anthropic::AnthropicModel;
use serde_json::{Value, json};

use super::openai::fast_retries;
use super::{MockResponse, MockServer, SseFrame};

/// The API key the mock models send.
pub const TEST_KEY: &str = "sk-ant-test-0123456789abcdef";

const MODEL: &str = "claude-haiku-4-5-20251001";

/// A mock Anthropic server (`/v1/messages`).
#[derive(Debug)]
pub struct MockAnthropic(MockServer);

impl Deref for MockAnthropic {
    type Target = MockServer;
    fn deref(&self) -> &MockServer {
        &self.0
    }
}

impl MockAnthropic {
    /// Starts the server.
    pub async fn start() -> std::io::Result<Self> {
        Ok(MockAnthropic(MockServer::start().await?))
    }

    /// The base URL to give a client (`http://127.0.0.1:<port>`; the API path is `/v1/messages`).
    pub fn base_url(&self) -> String {
        self.url()
    }

    /// A `kit::Config` pointing `anthropic:` models here, with [`TEST_KEY`].
    pub fn config(&self) -> kit::Config {
        kit::Config {
            anthropic_api_key: Some(TEST_KEY.into()),
            anthropic_base_url: Some(self.base_url()),
            ..kit::Config::default()
        }
    }

    /// An Anthropic model talking to this server with [`TEST_KEY`] and fast retries.
    pub fn model(&self, name: &str) -> AnthropicModel {
        AnthropicModel::new(name, TEST_KEY)
            .base_url(self.base_url())
            .http_client(fast_retries())
    }
}

/// `200 application/json` with this body.
pub fn json(body: Value) -> MockResponse {
    MockResponse::json(200, &body).header("request-id", "req_011CMockRequest")
}

/// A `usage` object (`input_tokens` excludes the cached ones, as the API counts).
pub fn usage(input: u64, output: u64, cache_read: u64, cache_creation: u64) -> Value {
    json!({
        "input_tokens": input,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output,
        "service_tier": "standard",
    })
}

/// A text content block.
pub fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A `tool_use` content block.
pub fn tool_use_block(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A `message` object.
pub fn message(content: Vec<Value>, stop_reason: &str, usage: Value) -> Value {
    json!({
        "id": "msg_01MockMessage",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage,
    })
}

/// A `message` answering with text.
pub fn text_message(text: &str) -> Value {
    message(vec![text_block(text)], "end_turn", usage(20, 6, 0, 0))
}

fn frame(data: Value) -> SseFrame {
    let kind = data["type"].as_str().unwrap_or("message").to_string();
    SseFrame::event(kind, data.to_string())
}

/// `message_start` with the input usage (output 1, as the API sends it).
pub fn message_start(input: u64, cache_read: u64, cache_creation: u64) -> SseFrame {
    frame(json!({"type": "message_start", "message": {
        "id": "msg_01MockMessage",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": null,
        "stop_sequence": null,
        "usage": usage(input, 1, cache_read, cache_creation),
    }}))
}

/// `content_block_start` of a text block.
pub fn text_start(index: usize) -> SseFrame {
    frame(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""}}))
}

/// `content_block_start` of a `tool_use` block (input `{}`; it arrives as deltas).
pub fn tool_use_start(index: usize, id: &str, name: &str) -> SseFrame {
    frame(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
}

/// `content_block_delta` with a `text_delta`.
pub fn text_delta(index: usize, text: &str) -> SseFrame {
    frame(json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "text_delta", "text": text}}))
}

/// `content_block_delta` with an `input_json_delta`.
pub fn input_json_delta(index: usize, partial_json: &str) -> SseFrame {
    frame(json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json}}))
}

/// `content_block_stop`.
pub fn block_stop(index: usize) -> SseFrame {
    frame(json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta` with the stop reason and the output usage.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> SseFrame {
    frame(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens}}))
}

/// `message_stop`.
pub fn message_stop() -> SseFrame {
    frame(json!({"type": "message_stop"}))
}

/// `ping`.
pub fn ping() -> SseFrame {
    frame(json!({"type": "ping"}))
}

/// An `error` event inside a stream.
pub fn error_event(kind: &str, message: &str) -> SseFrame {
    frame(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// A complete text stream.
pub fn text_stream(pieces: &[&str]) -> MockResponse {
    let mut frames = vec![message_start(20, 0, 0), text_start(0), ping()];
    frames.extend(pieces.iter().map(|p| text_delta(0, p)));
    frames.extend([block_stop(0), message_delta("end_turn", 6), message_stop()]);
    MockResponse::sse(frames)
}

/// An error with the API's body shape.
pub fn error(status: u16, kind: &str, message: &str) -> MockResponse {
    MockResponse::json(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_011CMockRequest"}),
    )
    .header("request-id", "req_011CMockRequest")
}

/// 401, as the API sends it for a wrong key.
pub fn unauthorized() -> MockResponse {
    error(401, "authentication_error", "invalid x-api-key")
}

/// 429 with `retry-after` (seconds) and the rate-limit headers.
pub fn rate_limited(retry_after_secs: u64) -> MockResponse {
    error(
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per \
         minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    )
    .header("retry-after", &retry_after_secs.to_string())
    .header("anthropic-ratelimit-requests-limit", "50")
    .header("anthropic-ratelimit-requests-remaining", "0")
}

/// 400 for a prompt longer than the context window.
pub fn prompt_too_long() -> MockResponse {
    error(
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
    )
}

/// 529, the API is overloaded.
pub fn overloaded() -> MockResponse {
    error(529, "overloaded_error", "Overloaded")
}

/// 500, an internal error.
pub fn api_error() -> MockResponse {
    error(500, "api_error", "Internal server error")
}
