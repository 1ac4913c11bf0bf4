//! Entry points into kit's parsers of outside input, for fuzzers: the benchmark's `fuzz`
//! workload, the adversarial test suite, or a `cargo fuzz` target.
//!
//! Each function takes raw input as a peer, a model or a file would send it and returns what
//! kit makes of it — a value or a typed error. None may panic, whatever the input; time and
//! memory stay linear in the input (and within the default limits of [`HttpLimits`] and
//! [`FsLimits`]). The other parsers of outside input are public already:
//! [`SseDecoder`], [`parse_retry_after`](crate::http::parse_retry_after)
//! and [`retry_after_value`](crate::http::retry_after_value),
//! [`validate_args`](crate::tool::validate_args) and [`parse_args`](crate::model::parse_args),
//! [`task_path_segment`](crate::protocol::task_path_segment),
//! [`resolve_channels`](crate::checkpoint::resolve_channels) and
//! [`State::restore_channel`](crate::State::restore_channel).
//!
//! ```
//! assert!(kit::fuzz::openai_response(b"{\"choices\": 7}").is_err());
//! assert!(kit::fuzz::glob_matches(&"{a,}".repeat(2000), "/a").is_err());
//! ```

use serde_json::Value;

use crate::http::{HttpLimits, SseDecoder, SseError, SseEvent};
use crate::middleware::filesystem::FsLimits;
use crate::model::anthropic::AnthropicModel;
use crate::model::openai::OpenAiModel;
use crate::model::{ModelError, ModelResponse};

fn json(provider: &str, body: &[u8]) -> Result<Value, ModelError> {
    serde_json::from_slice(body).map_err(|e| ModelError::MalformedResponse {
        provider: provider.to_string(),
        message: format!("the body is not JSON ({e})"),
    })
}

/// Decodes a whole `text/event-stream` body into events, within `limits`.
pub fn sse(body: &[u8], limits: &HttpLimits) -> Result<Vec<SseEvent>, SseError> {
    let mut decoder = SseDecoder::with_limits(limits);
    let mut events = Vec::new();
    // A network read's worth at a time, read out in between, as a live stream is.
    for piece in body.chunks(64 << 10) {
        decoder.try_feed(piece)?;
        events.extend(std::iter::from_fn(|| decoder.next_event()));
    }
    decoder.finish();
    events.extend(std::iter::from_fn(|| decoder.next_event()));
    Ok(events)
}

/// An OpenAI Chat Completions answer (a whole, non-streamed body) as kit reads it.
pub fn openai_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let model = OpenAiModel::new("gpt-4o-mini", "");
    model.parse_response(&json("openai", body)?)
}

/// An OpenAI Chat Completions event stream (a whole body) as kit assembles it.
pub fn openai_stream(body: &[u8]) -> Result<ModelResponse, ModelError> {
    OpenAiModel::new("gpt-4o-mini", "").replay_stream(body, &HttpLimits::default())
}

/// An Anthropic Messages answer (a whole, non-streamed body) as kit reads it.
pub fn anthropic_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let model = AnthropicModel::new("claude-haiku-4-5", "");
    model.parse_response(&json("anthropic", body)?)
}

/// An Anthropic Messages event stream (a whole body) as kit assembles it.
pub fn anthropic_stream(body: &[u8]) -> Result<ModelResponse, ModelError> {
    AnthropicModel::new("claude-haiku-4-5", "").replay_stream(body, &HttpLimits::default())
}

/// An OpenAI Responses API answer (a whole, non-streamed body) as kit reads it.
pub fn openai_responses_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    OpenAiModel::responses("gpt-5", "").parse_body(&json("openai", body)?)
}

/// An OpenAI Responses API event stream (a whole body) as kit assembles it.
pub fn openai_responses_stream(body: &[u8]) -> Result<ModelResponse, ModelError> {
    OpenAiModel::responses("gpt-5", "").replay_stream(body, &HttpLimits::default())
}

/// The model error kit makes of an error answer with this status and body.
pub fn provider_error(status: u16, body: &str) -> ModelError {
    let parsed = crate::model::common::ProviderError::parse(body);
    crate::model::common::classify("fuzz".to_string(), Some(status), &parsed, None)
}

/// Whether `path` matches the `glob` tool's `pattern` (searching from `/`), within the default
/// [`FsLimits`]; the error is what the tool tells the model.
pub fn glob_matches(pattern: &str, path: &str) -> Result<bool, String> {
    crate::middleware::filesystem::glob_matches(pattern, path, "/", &FsLimits::default())
}

/// How many lines of `text` the `grep` tool matches with this pattern (literal, or a regular
/// expression when `regex`); the error is what the tool tells the model.
pub fn grep_lines(pattern: &str, regex: bool, text: &str) -> Result<usize, String> {
    crate::middleware::filesystem::grep_lines(pattern, regex, text)
}

/// What the worker makes of a `POST /runs` body: `Ok` with the graph id when it would queue
/// the run, else the client error's message.
#[cfg(feature = "server")]
pub fn run_request(body: &[u8]) -> Result<String, String> {
    crate::server::parse_run_request(body)
}
