//! What the HTTP providers share: error mapping, option merging, SSE-to-chunk streaming.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Map, Value};

use super::{MAX_ARGS_DEPTH, ModelChunk, ModelError, ModelStream};
use crate::http::{HttpError, HttpErrorKind, MAX_ERROR_CHARS, Secrets, SseEvent, SseStream};
use crate::json::nests_within;
use crate::message::Usage;

/// The default timeout of a model call: 10 minutes, like the official OpenAI and Anthropic
/// SDKs (a long non-streamed answer from a reasoning model can take minutes). For streams it
/// bounds the wait for the response head and each silence between two chunks.
pub const DEFAULT_MODEL_TIMEOUT: Duration = Duration::from_secs(600);

/// Phrases of context-window overflow errors across providers and OpenAI-compatible servers
/// (OpenAI, Azure, vLLM, llama.cpp, Anthropic, OpenRouter), lowercase.
const OVERFLOW_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "context window",
    "prompt is too long",
    "input is too long",
    "exceeds the available context size",
    "exceed_context_size",
    "longer than the model's context length",
    "longer than the maximum model length",
    "too many tokens in the prompt",
    "exceed context limit",
];

/// True when a provider's error text says the request does not fit the context window.
pub(crate) fn looks_like_context_overflow(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| t.contains(p))
}

/// What a provider said in an error body.
#[derive(Debug, Default)]
pub(crate) struct ProviderError {
    /// The provider's error type (`invalid_request_error`, `rate_limit_error`, ...).
    pub kind: Option<String>,
    /// The provider's error code (`context_length_exceeded`, `invalid_api_key`, ...).
    pub code: Option<String>,
    /// The message.
    pub message: String,
}

impl ProviderError {
    /// Reads the error shapes of OpenAI (`{"error":{"message","type","param","code"}}`),
    /// Anthropic (`{"type":"error","error":{"type","message"}}`), vLLM
    /// (`{"object":"error","message","type","code"}`) and plain `{"error":"text"}` bodies;
    /// anything else is kept as text.
    pub fn parse(body: &str) -> ProviderError {
        // Clipped: this also reads error events inside successful answers, whose bodies are
        // bounded only by the stream's limits.
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(clip(s, MAX_ERROR_CHARS)),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        match serde_json::from_str::<Value>(body) {
            Ok(v) => {
                let (obj, outer) = match v.get("error") {
                    Some(e @ Value::Object(_)) => (e.clone(), Some(v.clone())),
                    Some(Value::String(s)) => {
                        return ProviderError {
                            message: clip(s, MAX_ERROR_CHARS),
                            ..Default::default()
                        };
                    }
                    _ => (v.clone(), None),
                };
                let message = text(obj.get("message"))
                    .or_else(|| outer.as_ref().and_then(|o| text(o.get("message"))))
                    .unwrap_or_else(|| clip(body.trim(), 500));
                ProviderError {
                    kind: text(obj.get("type")).filter(|t| t != "error"),
                    code: text(obj.get("code")),
                    message,
                }
            }
            Err(_) => ProviderError {
                message: clip(body.trim(), 500),
                ..Default::default()
            },
        }
    }

    fn overflow(&self) -> bool {
        self.code.as_deref() == Some("context_length_exceeded")
            || self.kind.as_deref() == Some("exceed_context_size_error")
            || looks_like_context_overflow(&self.message)
    }

    /// The message with the provider's type and code, for error texts.
    fn describe(&self, fallback: &str) -> String {
        let mut m = if self.message.is_empty() {
            fallback.to_string()
        } else {
            self.message.clone()
        };
        let tags: Vec<&str> = [self.kind.as_deref(), self.code.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if !tags.is_empty() {
            m = format!("{m} [{}]", tags.join(", "));
        }
        m
    }
}

/// Maps an HTTP failure to a model error. `status` errors are classified by status, the
/// provider's error type and code, and the message (context overflow).
pub(crate) fn map_http_error(provider: &str, e: HttpError) -> ModelError {
    let provider = provider.to_string();
    match e.kind() {
        HttpErrorKind::Status => {
            let status = e.status().unwrap_or(0);
            let parsed = ProviderError::parse(e.body());
            classify(provider, Some(status), &parsed, e.retry_after())
        }
        HttpErrorKind::Timeout | HttpErrorKind::TooLarge if e.limit().is_some() => {
            ModelError::Limit {
                provider,
                limit: e.limit().unwrap_or_default().to_string(),
                message: e.to_string(),
            }
        }
        HttpErrorKind::TooLarge => ModelError::Limit {
            provider,
            limit: "max_body_bytes".to_string(),
            message: e.to_string(),
        },
        HttpErrorKind::Timeout => ModelError::Timeout {
            provider,
            after: e.timeout().unwrap_or_default(),
        },
        HttpErrorKind::Connection => ModelError::Connection {
            provider,
            message: format!(
                "{} {} ({} attempt{}): {}; check the base URL and the network",
                e.method(),
                e.url(),
                e.attempts(),
                if e.attempts() == 1 { "" } else { "s" },
                e.message()
            ),
        },
        HttpErrorKind::Body => ModelError::Connection {
            provider,
            message: format!(
                "the answer broke off mid-stream ({}); it is incomplete — try again",
                e.message()
            ),
        },
        HttpErrorKind::Decode => ModelError::MalformedResponse {
            provider,
            message: e.to_string(),
        },
        HttpErrorKind::Request => ModelError::Other(format!("{provider}: {e}")),
    }
}

/// [`map_http_error`], with `secrets` (the credentials) scrubbed from what the peer sent —
/// before the body is parsed and again after, since parsing undoes the escapes a peer may
/// have hidden a key in.
pub(crate) fn map_http_error_scrubbed(
    provider: &str,
    e: HttpError,
    secrets: &Secrets,
) -> ModelError {
    map_http_error(provider, e.scrubbed(secrets)).scrubbed(secrets)
}

/// Classifies a provider error by HTTP status (when known — stream error events have none)
/// and the provider's error type.
pub(crate) fn classify(
    provider: String,
    status: Option<u16>,
    error: &ProviderError,
    retry_after: Option<Duration>,
) -> ModelError {
    // The Responses API names its errors by `code` alone (`server_error`, ...).
    let kind = error
        .kind
        .as_deref()
        .or(error.code.as_deref())
        .unwrap_or("");
    // A stream's error event has no HTTP status of its own: the provider's numeric code
    // (OpenRouter's `{"code": 502}`, vLLM's `{"code": 400}`) is one, else the error type
    // says which status it stands for; only an unknown type is taken as a server error.
    let code_status = error
        .code
        .as_deref()
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (400..600).contains(c));
    let status = status.or(code_status).unwrap_or(match kind {
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "NotFoundError" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" | "requests" | "tokens" => 429,
        "overloaded_error" => 529,
        "api_error" | "server_error" | "internal_error" => 500,
        "invalid_request_error" | "BadRequestError" | "invalid_prompt" => 400,
        _ if error.code.as_deref() == Some("rate_limit_exceeded") => 429,
        _ if error.code.as_deref() == Some("invalid_api_key") => 401,
        _ if error.overflow() => 400,
        _ => 500,
    });
    let message = error.describe(&format!("HTTP {status}"));
    match status {
        401 | 403 => ModelError::Authentication { provider, message },
        429 => ModelError::RateLimited {
            provider,
            retry_after,
            message,
        },
        s if (400..500).contains(&s) && error.overflow() => {
            ModelError::ContextLengthExceeded { provider, message }
        }
        s if (400..500).contains(&s) => ModelError::BadRequest {
            provider,
            status: s,
            message,
        },
        s => ModelError::Server {
            provider,
            status: s,
            message,
        },
    }
}

/// Merges `extra` options into a request body (they win over kit's fields).
pub(crate) fn merge_extra(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        // kit's own per-request hints are read by the providers that know them, never sent.
        if k == super::anthropic::REQUEST_CACHE_CONTROL {
            continue;
        }
        body.insert(k.clone(), v.clone());
    }
}

/// An `f32` option as the JSON number the user wrote (`0.2`, not `0.20000000298023224`).
pub(crate) fn f32_json(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

pub(crate) use crate::text::clip;

pub(crate) fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Adds the cost of a call to the response metadata when the price table knows the model
/// (a cost the provider reported itself, such as OpenRouter's `usage.cost`, is kept).
pub(crate) fn annotate_cost(metadata: &mut Map<String, Value>, model: &str, usage: Option<&Usage>) {
    if metadata.get("cost_usd").is_some_and(Value::is_number) {
        return;
    }
    if let Some(cost) = usage.and_then(|u| super::pricing::cost(model, u)) {
        metadata.insert("cost_usd".into(), Value::from(cost));
    }
}

/// What a stream learns about its answer along the way (response id, model, the provider's
/// finish details, usage), closed into one metadata chunk at its end so a streamed answer
/// keeps what a plain one has, cost included.
#[derive(Debug, Default)]
pub(crate) struct StreamMeta {
    pub metadata: Map<String, Value>,
    pub usage: Option<Usage>,
}

impl StreamMeta {
    /// Keeps `key` when the event has it as a string and it is not known yet.
    pub fn keep_str(&mut self, key: &str, from: &Value) {
        if !self.metadata.contains_key(key)
            && let Some(s) = from
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        {
            self.metadata.insert(key.to_string(), Value::from(s));
        }
    }

    /// Sets an entry.
    pub fn set(&mut self, key: &str, value: Value) {
        self.metadata.insert(key.to_string(), value);
    }

    /// Notes usage as the stream reports it (later counts extend earlier ones).
    pub fn add_usage(&mut self, usage: &Usage) {
        match &mut self.usage {
            Some(u) => super::assemble::merge_usage(u, usage),
            None => self.usage = Some(*usage),
        }
    }

    /// The closing metadata chunk, with the cost at `model`'s price.
    pub fn close(&mut self, model: &str, out: &mut VecDeque<ModelChunk>) {
        let mut metadata = std::mem::take(&mut self.metadata);
        annotate_cost(&mut metadata, model, self.usage.as_ref());
        if !metadata.is_empty() {
            out.push_back(ModelChunk::Metadata { metadata });
        }
    }
}

/// Turns one provider's SSE events into model chunks.
pub(crate) trait SseParser: Send + 'static {
    /// Handles one event, appending chunks; an error event is an `Err` (chunks appended
    /// before it, such as the usage an error event carries, are still delivered).
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError>;

    /// True once the provider's end marker arrived (`[DONE]`, `message_stop`).
    fn is_done(&self) -> bool;

    /// The stream ended (its end marker arrived, or the body ended): appends the closing
    /// chunks (the answer's metadata), or errs when the answer is incomplete.
    fn at_end(&mut self, out: &mut VecDeque<ModelChunk>) -> Result<(), ModelError>;
}

struct StreamState<P> {
    provider: String,
    events: SseStream,
    parser: P,
    queue: VecDeque<ModelChunk>,
    /// An error to report once the chunks queued before it are delivered.
    error: Option<ModelError>,
    finished: bool,
    secrets: Secrets,
}

/// A model stream over an SSE body. Stops after the end marker; a broken body, a timeout, a
/// broken limit or an error event ends it with an error after the chunks that came before it
/// (no panic, nothing lost silently), `secrets` scrubbed from it.
pub(crate) fn model_stream<P: SseParser>(
    provider: &str,
    events: SseStream,
    parser: P,
    secrets: Secrets,
) -> ModelStream {
    let state = StreamState {
        provider: provider.to_string(),
        events,
        parser,
        queue: VecDeque::new(),
        error: None,
        finished: false,
        secrets,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(chunk) = st.queue.pop_front() {
                return Some((Ok(chunk), st));
            }
            if let Some(error) = st.error.take() {
                st.finished = true;
                return Some((Err(error), st));
            }
            if st.finished {
                return None;
            }
            if st.parser.is_done() {
                st.finished = true;
                if let Err(e) = st.parser.at_end(&mut st.queue) {
                    st.error = Some(e.scrubbed(&st.secrets));
                }
                continue;
            }
            match st.events.next().await {
                Some(Ok(event)) => {
                    if let Err(e) = st.parser.on_event(event, &mut st.queue) {
                        st.finished = true;
                        st.error = Some(e.scrubbed(&st.secrets));
                    }
                }
                Some(Err(e)) => {
                    st.finished = true;
                    st.error = Some(map_http_error_scrubbed(&st.provider, e, &st.secrets));
                }
                None => {
                    st.finished = true;
                    if let Err(e) = st.parser.at_end(&mut st.queue) {
                        st.error = Some(e.scrubbed(&st.secrets));
                    }
                }
            }
        }
    })
    .boxed()
}

/// The body of a streamed request a server answered with `application/json`.
pub(crate) enum JsonStreamBody {
    /// A JSON value: a proxy's error, or the whole answer at once.
    Json(Value),
    /// Server-sent events after all, under the wrong content type.
    Events(bytes::Bytes),
}

/// Reads the body a server answered a streamed request with under `application/json`, within
/// [`HttpLimits::max_body_bytes`](crate::http::HttpLimits): JSON parsed within the bounds of
/// a `generate` body, or events when it reads as events (`data:`, `event:`, `:` first).
/// (Read only as an event stream, a JSON answer or error would hold no event and be lost.)
pub(crate) async fn json_answer_of_stream(
    provider: &str,
    response: crate::http::HttpStream,
    secrets: &Secrets,
) -> Result<JsonStreamBody, ModelError> {
    let body = response
        .read_all()
        .await
        .map_err(|e| map_http_error_scrubbed(provider, e, secrets))?;
    let start = body.trim_ascii_start();
    if [&b"data:"[..], b"event:", b":", b"id:"]
        .iter()
        .any(|field| start.starts_with(field))
    {
        return Ok(JsonStreamBody::Events(body));
    }
    within_answer_bounds(provider, "the answer", &body)?;
    let v = serde_json::from_slice(&body).map_err(|e| {
        ModelError::MalformedResponse {
            provider: provider.to_string(),
            message: format!(
                "the streamed request was answered with `application/json` that does not read \
                 ({e}): {}",
                clip(&String::from_utf8_lossy(&body[..body.len().min(4096)]), 300)
            ),
        }
        .scrubbed(secrets)
    })?;
    within_answer_depth(provider, v).map(JsonStreamBody::Json)
}

/// A complete answer as the stream of chunks it would have been streamed as.
pub(crate) fn answer_stream(response: &super::ModelResponse) -> super::ModelStream {
    Box::pin(futures::stream::iter(
        super::assemble::chunks_of(response).into_iter().map(Ok),
    ))
}

/// Decodes a whole event-stream body and replays it through `parser` into the answer a
/// streamed call would assemble: what [`model_stream`] does, without a connection (for
/// [`crate::fuzz`]).
pub(crate) fn replay_stream<P: SseParser>(
    body: &[u8],
    limits: &crate::http::HttpLimits,
    mut parser: P,
) -> Result<super::ModelResponse, ModelError> {
    let mut decoder = crate::http::SseDecoder::with_limits(limits);
    let malformed = |e: crate::http::SseError| ModelError::Limit {
        provider: "replay".to_string(),
        limit: e.limit().to_string(),
        message: e.to_string(),
    };
    let mut assembler = super::StreamAssembler::new();
    let mut queue = VecDeque::new();
    // Fed a network read's worth at a time and drained in between, as a live stream is: the
    // decoder's backlog stays small however long the body.
    'body: for piece in body.chunks(64 << 10).map(Some).chain([None]) {
        match piece {
            Some(piece) => decoder.try_feed(piece).map_err(malformed)?,
            None => decoder.finish(),
        }
        while let Some(event) = decoder.next_event() {
            if parser.is_done() {
                break 'body;
            }
            parser.on_event(event, &mut queue)?;
            for chunk in queue.drain(..) {
                assembler.push(&chunk);
            }
        }
    }
    parser.at_end(&mut queue)?;
    for chunk in queue.drain(..) {
        assembler.push(&chunk);
    }
    Ok(assembler.finish())
}

/// The deepest nesting of a provider's answer (a whole body, or one stream event). Tool
/// arguments may nest [`MAX_ARGS_DEPTH`] levels below the answer's own few; what is kept from
/// an answer (provider blocks verbatim, usage details, reasoning entries) is saved up to about
/// 15 levels deeper, and serde_json reads no deeper than 128. A deeper answer would be kept
/// and then make its thread, its runs and their event log unreadable.
pub(crate) const MAX_ANSWER_DEPTH: usize = MAX_ARGS_DEPTH + 16;

/// `v` when it nests at most [`MAX_ANSWER_DEPTH`] levels, or a malformed-answer error.
pub(crate) fn within_answer_depth(provider: &str, v: Value) -> Result<Value, ModelError> {
    if nests_within(&v, MAX_ANSWER_DEPTH) {
        return Ok(v);
    }
    Err(ModelError::MalformedResponse {
        provider: provider.to_string(),
        message: format!(
            "the answer nests more than {MAX_ANSWER_DEPTH} levels deep, deeper than kit can \
             save and read back; a model's tool arguments may nest {MAX_ARGS_DEPTH}"
        ),
    })
}

/// The most JSON objects and arrays kit parses from one answer body, stream event or set of
/// tool-call arguments: about 60 MB parsed at worst. A model's longest answer holds far fewer.
pub(crate) const MAX_ANSWER_CONTAINERS: usize = 100_000;

/// Payloads shorter than this are parsed without counting their containers (they cannot cost
/// more than a few MB).
pub(crate) const COUNT_CONTAINERS_FROM: usize = 64 * 1024;

/// Whether a payload of a model's answer is small enough to parse: at most
/// [`MAX_ANSWER_CONTAINERS`] objects and arrays.
pub(crate) fn parses_within_bounds(bytes: &[u8]) -> bool {
    bytes.len() < COUNT_CONTAINERS_FROM
        || crate::json::containers_within(bytes, MAX_ANSWER_CONTAINERS)
}

/// `Ok` when an answer's payload may be parsed (see [`parses_within_bounds`]), else a
/// malformed-answer error naming `what` it was.
pub(crate) fn within_answer_bounds(
    provider: &str,
    what: &str,
    bytes: &[u8],
) -> Result<(), ModelError> {
    if parses_within_bounds(bytes) {
        return Ok(());
    }
    Err(ModelError::MalformedResponse {
        provider: provider.to_string(),
        message: format!(
            "{what} holds more than {MAX_ANSWER_CONTAINERS} JSON objects and arrays, more \
             than any model's answer; it was not read"
        ),
    })
}

/// Parses an SSE data payload as JSON, or explains what was wrong.
pub(crate) fn event_json(provider: &str, event: &SseEvent) -> Result<Value, ModelError> {
    within_answer_bounds(provider, "a stream event", event.data.as_bytes())?;
    let v = serde_json::from_str(&event.data).map_err(|e| ModelError::MalformedResponse {
        provider: provider.to_string(),
        message: format!(
            "a stream event is not JSON ({e}): {}",
            clip(&event.data, 300)
        ),
    })?;
    within_answer_depth(provider, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream event of a mebibyte of tiny objects is refused before it is parsed (it would
    /// take some 90 MiB parsed); one of a mebibyte of text, or of 1 KiB of objects, is read.
    #[test]
    fn a_stream_event_of_too_many_objects_is_refused_unread() {
        let event = |data: String| SseEvent {
            data,
            ..Default::default()
        };
        for (size, read) in [(1 << 10, true), (1 << 20, false)] {
            let objects = format!("[{}{{\"a\":0}}]", "{\"a\":0},".repeat(size / 8 - 1));
            let result = event_json("p", &event(objects));
            assert_eq!(result.is_ok(), read, "{size}");
            if let Err(e) = result {
                assert!(e.to_string().contains("100000 JSON objects"), "{e}");
            }
            let text = format!("{{\"text\":\"{}\"}}", "x".repeat(size));
            assert!(event_json("p", &event(text)).is_ok(), "{size}");
        }
        // Tool-call arguments of as many objects are kept as their text.
        let args = format!("[{}1]", "{\"a\":0},".repeat(1 << 17));
        assert!(crate::model::parse_args(&args).is_string());
        assert!(crate::model::parse_args(r#"[{"a":0},{"a":1}]"#).is_array());
    }

    /// An error message of a mebibyte (in a successful answer or a stream event, which no
    /// error-body limit clips) is kept to its first 8,000 characters, as at a kibibyte it is
    /// kept whole; scrubbing secrets from it then costs the same either way.
    #[test]
    fn a_huge_error_message_is_clipped_like_an_error_body() {
        for n in [1 << 10, 1 << 20] {
            let message = format!("{}%", "x".repeat(n));
            let body = serde_json::json!({"error": {"message": message, "type": "e"}});
            let parsed = ProviderError::parse(&body.to_string());
            assert_eq!(
                parsed.message.chars().count(),
                (n + 1).min(MAX_ERROR_CHARS + 1)
            );
            let plain = ProviderError::parse(&serde_json::json!({"error": message}).to_string());
            assert_eq!(plain.message, parsed.message);
        }
    }

    #[test]
    fn error_bodies_of_each_provider() {
        let openai = ProviderError::parse(
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        );
        assert!(openai.overflow());
        assert!(classify("openai".into(), Some(400), &openai, None).is_context_overflow());
        let anthropic = ProviderError::parse(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
        );
        assert_eq!(anthropic.kind.as_deref(), Some("overloaded_error"));
        assert!(matches!(
            classify("anthropic".into(), None, &anthropic, None),
            ModelError::Server { status: 529, .. }
        ));
        let vllm = ProviderError::parse(
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert!(classify("vllm".into(), Some(400), &vllm, None).is_context_overflow());
        let llama = ProviderError::parse(
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#,
        );
        assert!(classify("llama.cpp".into(), Some(400), &llama, None).is_context_overflow());
        let plain = ProviderError::parse("<html>bad gateway</html>");
        assert!(matches!(
            classify("x".into(), Some(502), &plain, None),
            ModelError::Server { status: 502, .. }
        ));
        let ollama = ProviderError::parse(r#"{"error":"model 'nope' not found"}"#);
        assert!(matches!(
            classify("ollama".into(), Some(404), &ollama, None),
            ModelError::BadRequest { status: 404, ref message, .. } if message.contains("not found")
        ));
    }
}
