//! The OpenAI Chat Completions wire format, for the mock server: `chat.completion` objects,
//! `chat.completion.chunk` SSE streams (ending with a usage chunk and `data: [DONE]`), and the
//! API's error bodies (`{"error":{"message","type","param","code"}}`) with their headers.

use std::ops::Deref;
use std::time::Duration;

use kit::http::{HttpClient, RetryPolicy};
use kit::model::openai::OpenAiModel;
use serde_json::{Value, json};

use super::{MockResponse, MockServer, SseFrame};

/// The API key the mock models send.
pub const TEST_KEY: &str = "sk-test-0123456789abcdef";

const CREATED: u64 = 1_731_000_000;

/// A mock OpenAI-compatible server (paths under `/v1`).
#[derive(Debug)]
pub struct MockOpenAi(MockServer);

impl Deref for MockOpenAi {
    type Target = MockServer;
    fn deref(&self) -> &MockServer {
        &self.0
    }
}

/// Fast retries for tests: the same rules, 10–50 ms backoff (a `Retry-After` is still honoured
/// exactly).
pub fn fast_retries() -> HttpClient {
    HttpClient::new().retry_policy(RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..RetryPolicy::default()
    })
}

impl MockOpenAi {
    /// Starts the server.
    pub async fn start() -> std::io::Result<Self> {
        Ok(MockOpenAi(MockServer::start().await?))
    }

    /// The base URL to give a client (`http://127.0.0.1:<port>/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// A `kit::Config` pointing `openai:` models here, with [`TEST_KEY`].
    pub fn config(&self) -> kit::Config {
        kit::Config {
            openai_api_key: Some(TEST_KEY.into()),
            openai_base_url: Some(self.base_url()),
            ..kit::Config::default()
        }
    }

    /// An OpenAI model talking to this server with [`TEST_KEY`] and [`fast_retries`].
    pub fn model(&self, name: &str) -> OpenAiModel {
        OpenAiModel::new(name, TEST_KEY)
            .base_url(self.base_url())
            .http_client(fast_retries())
    }
}

/// `200 application/json` with this body.
pub fn json(body: Value) -> MockResponse {
    MockResponse::json(200, &body).header("x-request-id", "req_mock_0001")
}

/// A `usage` object (`prompt_tokens` includes the cached ones).
pub fn usage(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
        },
    })
}

fn completion_object(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-mock123",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": usage(12, 5, 0),
        "service_tier": "default",
        "system_fingerprint": "fp_mock",
    })
}

/// A `chat.completion` answering with text.
pub fn completion(text: &str) -> Value {
    completion_object(
        json!({"role": "assistant", "content": text, "refusal": null, "annotations": []}),
        "stop",
    )
}

/// A `chat.completion` calling tools: `(id, name, arguments)`; arguments are sent as the JSON
/// string the API uses.
pub fn tool_calls_completion(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {
                "name": name, "arguments": args.to_string(),
            }})
        })
        .collect();
    completion_object(
        json!({"role": "assistant", "content": null, "tool_calls": calls, "refusal": null, "annotations": []}),
        "tool_calls",
    )
}

/// One `chat.completion.chunk` frame with this `delta` (and finish reason).
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> SseFrame {
    SseFrame::data(
        json!({
            "id": "chatcmpl-mock123",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-4o-mini-2024-07-18",
            "service_tier": "default",
            "system_fingerprint": "fp_mock",
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
            "usage": null,
        })
        .to_string(),
    )
}

/// The first chunk: the role, and empty content.
pub fn role_chunk() -> SseFrame {
    chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )
}

/// A text delta.
pub fn text_chunk(text: &str) -> SseFrame {
    chunk(json!({"content": text}), None)
}

/// The chunk starting tool call `index`: id, name and empty arguments.
pub fn tool_start_chunk(index: usize, id: &str, name: &str) -> SseFrame {
    chunk(
        json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
        None,
    )
}

/// A piece of tool call `index`'s argument JSON.
pub fn tool_args_chunk(index: usize, arguments: &str) -> SseFrame {
    chunk(
        json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
        None,
    )
}

/// The last choice chunk: an empty delta with the finish reason.
pub fn finish_chunk(reason: &str) -> SseFrame {
    chunk(json!({}), Some(reason))
}

/// The usage chunk sent with `stream_options.include_usage`: no choices.
pub fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> SseFrame {
    SseFrame::data(
        json!({
            "id": "chatcmpl-mock123",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-4o-mini-2024-07-18",
            "service_tier": "default",
            "system_fingerprint": "fp_mock",
            "choices": [],
            "usage": usage(prompt, completion, cached),
        })
        .to_string(),
    )
}

/// `data: [DONE]`.
pub fn done() -> SseFrame {
    SseFrame::data("[DONE]")
}

/// A complete text stream: role chunk, one chunk per piece, stop, usage, `[DONE]`.
pub fn text_stream(pieces: &[&str]) -> MockResponse {
    let mut frames = vec![role_chunk()];
    frames.extend(pieces.iter().map(|p| text_chunk(p)));
    frames.extend([finish_chunk("stop"), usage_chunk(12, 5, 0), done()]);
    MockResponse::sse(frames)
}

/// An error with the API's body shape.
pub fn error(
    status: u16,
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> MockResponse {
    MockResponse::json(
        status,
        &json!({"error": {"message": message, "type": kind, "param": param, "code": code}}),
    )
    .header("x-request-id", "req_mock_0001")
}

/// 401 for a wrong key, as OpenAI sends it.
pub fn unauthorized() -> MockResponse {
    error(
        401,
        "Incorrect API key provided: sk-test-****cdef. You can find your API key at \
         https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        None,
        Some("invalid_api_key"),
    )
}

/// 429 with `retry-after` (seconds) and the rate-limit headers, as OpenAI sends it.
pub fn rate_limited(retry_after_secs: u64) -> MockResponse {
    error(
        429,
        "Rate limit reached for gpt-4o-mini in organization org-mock on requests per min \
         (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit \
         https://platform.openai.com/account/rate-limits to learn more.",
        "requests",
        None,
        Some("rate_limit_exceeded"),
    )
    .header("retry-after", &retry_after_secs.to_string())
    .header("x-ratelimit-limit-requests", "3")
    .header("x-ratelimit-remaining-requests", "0")
    .header("x-ratelimit-reset-requests", "20s")
}

/// 400 for a prompt longer than the context window, as OpenAI sends it.
pub fn context_length_exceeded() -> MockResponse {
    error(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted \
         in 130532 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        Some("messages"),
        Some("context_length_exceeded"),
    )
}

/// 400 for an invalid request (an unknown parameter).
pub fn bad_request() -> MockResponse {
    error(
        400,
        "Unrecognized request argument supplied: bogus",
        "invalid_request_error",
        None,
        None,
    )
}

/// 500, as OpenAI sends it.
pub fn server_error() -> MockResponse {
    error(
        500,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
        None,
    )
}
