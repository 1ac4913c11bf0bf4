//! One suite, run against every provider (the shape of `checkpointer_conformance.rs`): each
//! provider's mock server answers the same situations in its own wire format, and the model
//! must come out the same: text, streams, and every error typed, retried or not as it should.
//! Provider-only behaviour (request bodies, tool-call encodings, `model::init`) stays in
//! `openai.rs` and `anthropic.rs`.
//!
//! The second half replays every fixture of `kit_testing::mock::fixtures` — real-shaped
//! traffic of OpenAI, Anthropic, the Responses API and seven compatible servers, each noting
//! where its shape comes from — and checks what kit makes of it: text, reasoning (with
//! signatures and encrypted data), tool calls and their ids, provider blocks, the finish
//! reason, usage with cache and reasoning counts, the response's id and cost, or the typed
//! error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::StreamExt;
use kit::Message;
use kit::model::{
    ChatModel, FinishReason, ModelChunk, ModelError, ModelOptions, ModelRequest, StreamAssembler,
};
use kit_testing::mock::{
    MockAnthropic, MockOpenAi, MockResponse, MockServer, SseFrame, StreamEnd, anthropic, openai,
};
use serde_json::json;

/// What the suite needs from a provider: its mock server, a model on it, and its wire form of
/// each situation.
trait Provider: std::ops::Deref<Target = MockServer> + Sized {
    async fn start() -> Self;
    fn chat_model(&self) -> Box<dyn ChatModel>;
    fn text(text: &str) -> MockResponse;
    fn text_stream(pieces: &[&str]) -> MockResponse;
    fn unauthorized() -> MockResponse;
    /// Words of the provider's own 401 message, kept in the error.
    const UNAUTHORIZED_SAYS: &'static str;
    fn rate_limited(retry_after_secs: u64) -> MockResponse;
    /// Words of the provider's 429 message, kept in the error.
    const RATE_LIMITED_SAYS: &'static str;
    fn context_overflow() -> MockResponse;
    /// Words of the provider's context-length message, kept in the error.
    const OVERFLOW_SAYS: &'static str;
    fn server_error() -> MockResponse;
    /// The status of `server_error`.
    const SERVER_ERROR_STATUS: u16;
    /// Words of the provider's server-error message, kept in the error.
    const SERVER_ERROR_SAYS: &'static str;
    /// Three chunks of a text-and-tool-call stream, then the connection drops.
    fn stream_then_drop() -> MockResponse;
    /// A text stream that ends without the provider's end marker.
    fn stream_cut_short() -> MockResponse;
    /// What the malformed-stream error names as missing.
    const CUT_SHORT_SAYS: &'static str;
    /// A stream that sends the text "Start", then an error event.
    fn error_in_stream() -> MockResponse;
    /// The status the error event of `error_in_stream` maps to.
    const STREAM_ERROR_STATUS: u16;
}

impl Provider for MockOpenAi {
    async fn start() -> Self {
        MockOpenAi::start().await.unwrap()
    }
    fn chat_model(&self) -> Box<dyn ChatModel> {
        Box::new(self.model("gpt-4o-mini"))
    }
    fn text(text: &str) -> MockResponse {
        openai::json(openai::completion(text))
    }
    fn text_stream(pieces: &[&str]) -> MockResponse {
        openai::text_stream(pieces)
    }
    fn unauthorized() -> MockResponse {
        openai::unauthorized()
    }
    const UNAUTHORIZED_SAYS: &'static str = "Incorrect API key provided";
    fn rate_limited(secs: u64) -> MockResponse {
        openai::rate_limited(secs)
    }
    const RATE_LIMITED_SAYS: &'static str = "rate_limit_exceeded";
    fn context_overflow() -> MockResponse {
        openai::context_length_exceeded()
    }
    const OVERFLOW_SAYS: &'static str = "maximum context length is 128000 tokens";
    fn server_error() -> MockResponse {
        openai::server_error()
    }
    const SERVER_ERROR_STATUS: u16 = 500;
    const SERVER_ERROR_SAYS: &'static str = "The server had an error";
    fn stream_then_drop() -> MockResponse {
        MockResponse::sse([
            openai::role_chunk(),
            openai::text_chunk("Partial"),
            openai::tool_start_chunk(0, "call_x", "get_weather"),
            openai::tool_args_chunk(0, "{\"city\": \"Pa"),
        ])
        .then_drop()
    }
    fn stream_cut_short() -> MockResponse {
        MockResponse::sse([openai::role_chunk(), openai::text_chunk("Half")]).end(StreamEnd::Close)
    }
    const CUT_SHORT_SAYS: &'static str = "before `[DONE]`";
    const STREAM_ERROR_STATUS: u16 = 500;
    fn error_in_stream() -> MockResponse {
        MockResponse::sse([
            openai::role_chunk(),
            openai::text_chunk("Start"),
            SseFrame::data(
                json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}}).to_string(),
            ),
        ])
    }
}

impl Provider for MockAnthropic {
    async fn start() -> Self {
        MockAnthropic::start().await.unwrap()
    }
    fn chat_model(&self) -> Box<dyn ChatModel> {
        Box::new(self.model("claude-haiku-4-5"))
    }
    fn text(text: &str) -> MockResponse {
        anthropic::json(anthropic::text_message(text))
    }
    fn text_stream(pieces: &[&str]) -> MockResponse {
        anthropic::text_stream(pieces)
    }
    fn unauthorized() -> MockResponse {
        anthropic::unauthorized()
    }
    const UNAUTHORIZED_SAYS: &'static str = "invalid x-api-key";
    fn rate_limited(secs: u64) -> MockResponse {
        anthropic::rate_limited(secs)
    }
    const RATE_LIMITED_SAYS: &'static str = "rate limit";
    fn context_overflow() -> MockResponse {
        anthropic::prompt_too_long()
    }
    const OVERFLOW_SAYS: &'static str = "prompt is too long";
    fn server_error() -> MockResponse {
        anthropic::overloaded()
    }
    const SERVER_ERROR_STATUS: u16 = 529;
    const SERVER_ERROR_SAYS: &'static str = "Overloaded [overloaded_error]";
    fn stream_then_drop() -> MockResponse {
        MockResponse::sse([
            anthropic::message_start(10, 0, 0),
            anthropic::tool_use_start(0, "toolu_x", "get_weather"),
            anthropic::input_json_delta(0, "{\"city\": \"Pa"),
        ])
        .then_drop()
    }
    fn stream_cut_short() -> MockResponse {
        MockResponse::sse([
            anthropic::message_start(10, 0, 0),
            anthropic::text_start(0),
            anthropic::text_delta(0, "Hal"),
        ])
        .end(StreamEnd::Close)
    }
    const CUT_SHORT_SAYS: &'static str = "before `message_stop`";
    const STREAM_ERROR_STATUS: u16 = 529;
    fn error_in_stream() -> MockResponse {
        MockResponse::sse([
            anthropic::message_start(10, 0, 0),
            anthropic::text_start(0),
            anthropic::text_delta(0, "Start"),
            anthropic::error_event("overloaded_error", "Overloaded"),
        ])
    }
}

async fn collect(
    model: &dyn ChatModel,
    request: ModelRequest,
) -> (Vec<ModelChunk>, Option<ModelError>) {
    let mut stream = model.stream(&request).await.unwrap();
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(c) => chunks.push(c),
            Err(e) => return (chunks, Some(e)),
        }
    }
    (chunks, None)
}

fn hi() -> ModelRequest {
    ModelRequest::new(vec![Message::user("hi")])
}

async fn a_json_answer_is_the_message<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::text("Hello!"));
    let answer = p.chat_model().generate(&hi()).await.unwrap();
    assert_eq!(answer.message.text(), "Hello!");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(p.requests()[0].method, "POST");
}

async fn a_plain_text_stream_assembles<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::text_stream(&["Hel", "lo", " world"]));
    let (chunks, error) = collect(p.chat_model().as_ref(), hi()).await;
    assert!(error.is_none(), "{error:?}");
    let text: String = chunks
        .iter()
        .filter_map(|c| match c {
            ModelChunk::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello world");
    assert!(chunks.contains(&ModelChunk::Finish {
        reason: FinishReason::Stop
    }));
    let mut a = StreamAssembler::new();
    chunks.iter().for_each(|c| a.push(c));
    let answer = a.finish();
    assert_eq!(answer.message.text(), "Hello world");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
}

async fn unauthorized_is_an_authentication_error_and_not_retried<P: Provider>() {
    let p = P::start().await;
    p.enqueue_all([P::unauthorized(), P::text("no")]);
    let err = p.chat_model().generate(&hi()).await.unwrap_err();
    assert!(matches!(err, ModelError::Authentication { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(P::UNAUTHORIZED_SAYS), "{text}");
    assert!(text.contains("check the API key"), "{text}");
    assert_eq!(p.request_count(), 1);
}

async fn rate_limits_wait_for_retry_after_then_succeed<P: Provider>() {
    let p = P::start().await;
    p.enqueue_all([P::rate_limited(1), P::text("finally")]);
    let answer = p.chat_model().generate(&hi()).await.unwrap();
    assert_eq!(answer.message.text(), "finally");
    assert_eq!(p.request_count(), 2);
}

async fn a_rate_limit_without_retries_left_carries_retry_after<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::rate_limited(20));
    let mut request = hi();
    request.options = ModelOptions::default().retries(0);
    let err = p.chat_model().generate(&request).await.unwrap_err();
    match &err {
        ModelError::RateLimited {
            retry_after,
            message,
            ..
        } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(20)));
            assert!(
                message.to_lowercase().contains(P::RATE_LIMITED_SAYS),
                "{message}"
            );
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(err.to_string().contains("retry after 20.0s"), "{err}");
}

async fn context_overflow_is_recognised_and_not_retried<P: Provider>() {
    let p = P::start().await;
    p.enqueue_all([P::context_overflow(), P::text("no")]);
    let request = ModelRequest::new(vec![Message::user("a very long prompt")]);
    let err = p.chat_model().generate(&request).await.unwrap_err();
    assert!(err.is_context_overflow(), "{err:?}");
    assert!(err.to_string().contains(P::OVERFLOW_SAYS), "{err}");
    assert!(err.to_string().contains("enable compaction"), "{err}");
    assert_eq!(p.request_count(), 1);
}

async fn server_errors_are_retried_then_reported<P: Provider>() {
    let p = P::start().await;
    p.enqueue_all([P::server_error(), P::server_error(), P::server_error()]);
    let err = p.chat_model().generate(&hi()).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status, .. } if status == P::SERVER_ERROR_STATUS),
        "{err:?}"
    );
    assert!(err.to_string().contains(P::SERVER_ERROR_SAYS), "{err}");
    assert_eq!(p.request_count(), 3, "one call and the two default retries");
    // A success within the retries hides the failures.
    p.enqueue_all([P::server_error(), P::text("ok")]);
    let answer = p.chat_model().generate(&hi()).await.unwrap();
    assert_eq!(answer.message.text(), "ok");
    assert_eq!(p.request_count(), 5);
}

async fn a_connection_dropped_mid_stream_is_a_connection_error<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::stream_then_drop());
    let (chunks, error) = collect(p.chat_model().as_ref(), hi()).await;
    assert_eq!(chunks.len(), 3, "{chunks:?}");
    let err = error.expect("the stream must end with an error");
    assert!(matches!(err, ModelError::Connection { .. }), "{err:?}");
    assert!(err.to_string().contains("broke off mid-stream"), "{err}");
    assert_eq!(p.request_count(), 1, "a started stream is not retried");
}

async fn a_stream_that_ends_early_is_malformed<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::stream_cut_short());
    let (_, error) = collect(p.chat_model().as_ref(), hi()).await;
    let err = error.unwrap();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(P::CUT_SHORT_SAYS), "{err}");
}

async fn an_error_inside_a_stream_is_typed<P: Provider>() {
    let p = P::start().await;
    p.enqueue(P::error_in_stream());
    let (chunks, error) = collect(p.chat_model().as_ref(), hi()).await;
    assert_eq!(
        chunks
            .iter()
            .rfind(|c| matches!(c, ModelChunk::Text { .. })),
        Some(&ModelChunk::Text {
            text: "Start".into()
        })
    );
    let err = error.unwrap();
    assert!(
        matches!(err, ModelError::Server { status, .. } if status == P::STREAM_ERROR_STATUS),
        "{err:?}"
    );
    assert!(err.is_transient());
}

#[path = "provider_conformance/replay.rs"]
mod replay;

/// Stamps every rule above as a test per provider.
macro_rules! conformance {
    ($($provider:ident => $ty:ty),* $(,)?) => {
        $(mod $provider {
            use super::*;
            #[tokio::test]
            async fn a_json_answer_is_the_message() {
                super::a_json_answer_is_the_message::<$ty>().await
            }
            #[tokio::test]
            async fn a_plain_text_stream_assembles() {
                super::a_plain_text_stream_assembles::<$ty>().await
            }
            #[tokio::test]
            async fn unauthorized_is_an_authentication_error_and_not_retried() {
                super::unauthorized_is_an_authentication_error_and_not_retried::<$ty>().await
            }
            #[tokio::test]
            async fn rate_limits_wait_for_retry_after_then_succeed() {
                super::rate_limits_wait_for_retry_after_then_succeed::<$ty>().await
            }
            #[tokio::test]
            async fn a_rate_limit_without_retries_left_carries_retry_after() {
                super::a_rate_limit_without_retries_left_carries_retry_after::<$ty>().await
            }
            #[tokio::test]
            async fn context_overflow_is_recognised_and_not_retried() {
                super::context_overflow_is_recognised_and_not_retried::<$ty>().await
            }
            #[tokio::test]
            async fn server_errors_are_retried_then_reported() {
                super::server_errors_are_retried_then_reported::<$ty>().await
            }
            #[tokio::test]
            async fn a_connection_dropped_mid_stream_is_a_connection_error() {
                super::a_connection_dropped_mid_stream_is_a_connection_error::<$ty>().await
            }
            #[tokio::test]
            async fn a_stream_that_ends_early_is_malformed() {
                super::a_stream_that_ends_early_is_malformed::<$ty>().await
            }
            #[tokio::test]
            async fn an_error_inside_a_stream_is_typed() {
                super::an_error_inside_a_stream_is_typed::<$ty>().await
            }
        })*
    };
}

conformance! {
    openai_chat_completions => MockOpenAi,
    anthropic_messages => MockAnthropic,
}
