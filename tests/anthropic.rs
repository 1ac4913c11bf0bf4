//! The Anthropic provider against a mock server (what only Anthropic has; the behaviour both
//! providers share is in `provider_conformance.rs`) speaking the Messages API wire format: request
//! bodies field by field, JSON and SSE answers, usage with cache tokens, the API's error bodies
//! and error events, broken streams, and `model::init`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use kit::model::{
    self, ChatModel, FinishReason, ModelChunk, ModelError, ModelOptions, ModelRequest,
    ResponseFormat, StreamAssembler, ToolChoice, ToolSpec,
};
use kit::{Config, ContentPart, Message, ToolCall};
use kit_testing::mock::MockResponse;
use kit_testing::mock::anthropic::{self, MockAnthropic, TEST_KEY};
use serde_json::json;

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
        strict: None,
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

#[tokio::test]
async fn the_request_body_follows_the_wire_format() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::json(anthropic::text_message("ok")));
    let conversation = vec![
        Message::user(vec![
            ContentPart::text("Weather on these maps?"),
            ContentPart::image_base64("image/png", "iVBORw0KGgo="),
            ContentPart::image_url("https://example.com/map.jpg"),
            ContentPart::image_url("data:image/gif;base64,R0lGOD=="),
        ]),
        Message::assistant_with_tool_calls(
            "Checking both.",
            vec![
                ToolCall::with_id("toolu_a", "get_weather", json!({"city": "Paris"})),
                ToolCall::with_id("toolu_b", "get_weather", json!({"city": "Oslo"})),
            ],
        ),
        Message::tool("toolu_a", "18°C, sunny"),
        Message::tool_error("toolu_b", "Error: the weather service is down"),
        Message::user("And tomorrow?"),
    ];
    let mut request = ModelRequest::new(conversation)
        .system("You are a weather bot.")
        .tools(vec![weather_tool()])
        .tool_choice(ToolChoice::Required);
    request.options = ModelOptions::default().temperature(0.5).max_tokens(1000);
    server
        .model("claude-sonnet-4-5")
        .generate(&request)
        .await
        .unwrap();

    let got = &server.requests()[0];
    assert_eq!(
        (got.method.as_str(), got.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(got.header("x-api-key"), Some(TEST_KEY));
    assert_eq!(got.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(got.header("authorization"), None);
    let body = &got.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["system"], "You are a weather bot.");
    assert!(body.get("stream").is_none());
    let turns = body["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{turns:#?}");
    assert_eq!(turns[0]["role"], "user");
    assert_eq!(
        turns[0]["content"],
        json!([
            {"type": "text", "text": "Weather on these maps?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/map.jpg"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGOD=="}},
        ])
    );
    assert_eq!(
        turns[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Oslo"}},
        ]})
    );
    // Both results and the follow-up question travel in one user turn, results first.
    assert_eq!(
        turns[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18°C, sunny", "is_error": false},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "Error: the weather service is down", "is_error": true},
            {"type": "text", "text": "And tomorrow?"},
        ]})
    );
    assert_eq!(
        body["tools"],
        json!([{
            "name": "get_weather",
            "description": "Current weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }])
    );
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

#[tokio::test]
async fn defaults_tool_choice_forms_and_structured_output() {
    let server = MockAnthropic::start().await.unwrap();
    let model = server.model("claude-haiku-4-5");
    let choices = [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (
            ToolChoice::Tool("get_weather".into()),
            json!({"type": "tool", "name": "get_weather"}),
        ),
    ];
    for (choice, _) in &choices {
        server.enqueue(anthropic::json(anthropic::text_message("ok")));
        model
            .generate(
                &ModelRequest::new(vec![Message::user("hi")])
                    .tools(vec![weather_tool()])
                    .tool_choice(choice.clone()),
            )
            .await
            .unwrap();
    }
    server.enqueue(anthropic::json(anthropic::text_message("{}")));
    model
        .generate(
            &ModelRequest::new(vec![Message::system("Be terse."), Message::user("hi")])
                .system("You report.")
                .response_format(ResponseFormat {
                    name: "r".into(),
                    schema: json!({"type": "object"}),
                    strict: true,
                }),
        )
        .await
        .unwrap();
    let r = server.requests();
    for (i, (_, wire)) in choices.iter().enumerate() {
        assert_eq!(&r[i].body["tool_choice"], wire);
    }
    let last = &r[3].body;
    assert_eq!(last["max_tokens"], 8192, "the default cap");
    assert!(last.get("tools").is_none() && last.get("tool_choice").is_none());
    let system = last["system"].as_str().unwrap();
    assert!(
        system.starts_with("You report.\n\nBe terse.\n\n"),
        "{system}"
    );
    assert!(system.contains("JSON Schema"), "{system}");
    assert_eq!(last["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_json_answer_with_text_tool_use_and_cache_usage() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::json(anthropic::message(
        vec![
            anthropic::text_block("Let me check."),
            anthropic::tool_use_block("toolu_1", "get_weather", json!({"city": "Paris"})),
            anthropic::tool_use_block("toolu_2", "get_weather", json!({"city": "Oslo"})),
        ],
        "tool_use",
        anthropic::usage(100, 50, 2000, 300),
    )));
    let answer = server
        .model("claude-sonnet-4-5")
        .generate(&ModelRequest::new(vec![Message::user("hi")]).tools(vec![weather_tool()]))
        .await
        .unwrap();
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.message.text(), "Let me check.");
    assert_eq!(
        answer.message.tool_calls,
        vec![
            ToolCall::with_id("toolu_1", "get_weather", json!({"city": "Paris"})),
            ToolCall::with_id("toolu_2", "get_weather", json!({"city": "Oslo"})),
        ]
    );
    let usage = answer.message.usage.unwrap();
    assert_eq!(
        usage.input_tokens, 2400,
        "input includes cache reads and writes"
    );
    assert_eq!(
        (
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_creation_tokens
        ),
        (50, 2000, 300)
    );
    assert_eq!(answer.message.metadata["stop_reason"], "tool_use");
    let cost = answer.message.metadata["cost_usd"].as_f64().unwrap();
    let expected = (100.0 * 3.0 + 2000.0 * 0.30 + 300.0 * 3.75 + 50.0 * 15.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
}

/// A JSON value nested `levels` arrays deep.
fn nested(levels: usize) -> serde_json::Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!([v]);
    }
    v
}

/// What kit keeps of an answer must save and read back: a server block kept verbatim as deep
/// as an answer may nest is accepted and its conversation survives a round trip through JSON
/// with more wrapping than any saved form adds; a deeper answer, JSON or streamed, is refused
/// as malformed; `tool_use` input deeper than tool arguments may nest is kept as text.
#[tokio::test]
async fn answers_nested_deeper_than_kit_can_save_are_refused() {
    let server = MockAnthropic::start().await.unwrap();
    let model = server.model("claude-sonnet-4-5");
    let request = ModelRequest::new(vec![Message::user("hi")]);
    // The answer is the message object: a block in `content` is 2 levels down, so the block
    // (an object around `nested(77)`) reaches exactly 80 levels; one more is refused.
    let block =
        |levels: usize| json!({"type": "web_search_tool_result", "content": nested(levels)});
    server.enqueue(anthropic::json(anthropic::message(
        vec![block(77)],
        "end_turn",
        anthropic::usage(1, 1, 0, 0),
    )));
    let answer = model.generate(&request).await.unwrap();
    let state = kit::AgentState {
        messages: vec![Message::user("hi"), answer.message].into(),
        ..Default::default()
    };
    let wrapped = json!([[[[[["values", {"state": state}]]]]]]);
    let back: serde_json::Value = serde_json::from_str(&wrapped.to_string()).unwrap();
    assert_eq!(back, wrapped);

    let deep_json = anthropic::json(anthropic::message(
        vec![block(78)],
        "end_turn",
        anthropic::usage(1, 1, 0, 0),
    ));
    let deep_stream = MockResponse::sse([
        anthropic::message_start(1, 0, 0),
        kit_testing::mock::SseFrame::event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block(100)})
                .to_string(),
        ),
    ]);
    for (deep, streamed) in [(deep_json, false), (deep_stream, true)] {
        server.enqueue(deep);
        let err = if streamed {
            collect(&model, request.clone()).await.1.unwrap()
        } else {
            model.generate(&request).await.unwrap_err()
        };
        assert!(
            matches!(&err, ModelError::MalformedResponse { message, .. }
                if message.contains("nests more than 80 levels")),
            "{err:?}"
        );
    }

    server.enqueue(anthropic::json(anthropic::message(
        vec![
            anthropic::tool_use_block("toolu_1", "t", json!({"a": nested(64)})),
            anthropic::tool_use_block("toolu_2", "t", json!({"a": nested(63)})),
        ],
        "tool_use",
        anthropic::usage(1, 1, 0, 0),
    )));
    let answer = model.generate(&request).await.unwrap();
    assert!(answer.message.tool_calls[0].args.is_string());
    assert_eq!(answer.message.tool_calls[1].args, json!({"a": nested(63)}));
}

#[tokio::test]
async fn a_stream_with_input_json_deltas_split_across_chunks() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(
        MockResponse::sse([
            anthropic::message_start(25, 1000, 0),
            anthropic::text_start(0),
            anthropic::ping(),
            anthropic::text_delta(0, "Checking "),
            anthropic::text_delta(0, "both."),
            anthropic::block_stop(0),
            anthropic::tool_use_start(1, "toolu_p", "get_weather"),
            anthropic::input_json_delta(1, ""),
            anthropic::input_json_delta(1, "{\"city\""),
            anthropic::input_json_delta(1, ": \"Paris\"}"),
            anthropic::block_stop(1),
            anthropic::tool_use_start(2, "toolu_o", "get_weather"),
            anthropic::input_json_delta(2, "{\"ci"),
            anthropic::input_json_delta(2, "ty\": \"Oslo\"}"),
            anthropic::block_stop(2),
            anthropic::message_delta("tool_use", 61),
            anthropic::message_stop(),
        ])
        .fragmented(),
    );
    let (chunks, error) = collect(
        &server.model("claude-sonnet-4-5"),
        ModelRequest::new(vec![Message::user("weather?")]).tools(vec![weather_tool()]),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    let got = &server.requests()[0];
    assert_eq!(got.body["stream"], true);
    assert_eq!(got.header("accept"), Some("text/event-stream"));
    let mut assembler = StreamAssembler::new();
    for c in &chunks {
        assembler.push(c);
    }
    let answer = assembler.finish();
    assert_eq!(answer.message.text(), "Checking both.");
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        answer.message.tool_calls,
        vec![
            ToolCall::with_id("toolu_p", "get_weather", json!({"city": "Paris"})),
            ToolCall::with_id("toolu_o", "get_weather", json!({"city": "Oslo"})),
        ]
    );
    let usage = answer.message.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (1025, 61, 1000)
    );
    // Tool-call indexes count tool calls, not content blocks.
    assert!(chunks.iter().any(
        |c| matches!(c, ModelChunk::ToolCall { index: 0, id: Some(id), .. } if id == "toolu_p")
    ));
    assert!(chunks.iter().any(
        |c| matches!(c, ModelChunk::ToolCall { index: 1, id: Some(id), .. } if id == "toolu_o")
    ));
}

#[tokio::test]
async fn overloaded_and_api_errors_are_retried_then_server_errors() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue_all([
        anthropic::overloaded(),
        anthropic::api_error(),
        anthropic::json(anthropic::text_message("recovered")),
    ]);
    let answer = server
        .model("claude-haiku-4-5")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(answer.message.text(), "recovered");
    assert_eq!(server.request_count(), 3);

    server.enqueue_all([
        anthropic::overloaded(),
        anthropic::overloaded(),
        anthropic::overloaded(),
    ]);
    let err = server
        .model("claude-haiku-4-5")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 529, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("Overloaded [overloaded_error]"),
        "{err}"
    );
    assert_eq!(server.request_count(), 6);
}

#[tokio::test]
async fn init_resolves_anthropic_and_checks_the_key_first() {
    let server = MockAnthropic::start().await.unwrap();
    let no_key = Config {
        anthropic_base_url: Some(server.base_url()),
        ..Config::default()
    };
    let err = model::init(
        "anthropic:claude-haiku-4-5",
        &no_key,
        ModelOptions::default(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, ModelError::MissingCredentials { ref variable, .. } if variable == "ANTHROPIC_API_KEY"),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 0);

    let model = model::init(
        "anthropic:claude-3-haiku-20240307",
        &server.config(),
        ModelOptions::default().temperature(0.2),
    )
    .unwrap();
    assert_eq!(model.provider(), "anthropic");
    server.enqueue(anthropic::json(anthropic::text_message("hi")));
    model
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["temperature"], 0.2, "sent as written");
    assert_eq!(body["max_tokens"], 4096, "Claude 3 Haiku's output limit");
}

/// A streamed request answered with `application/json` (a gateway's whole answer, or an error
/// object with a 200) gives that answer or that error.
#[tokio::test]
async fn a_streamed_request_answered_with_json_gives_the_answer_or_the_error() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::json(anthropic::text_message("whole at once")));
    server.enqueue(MockResponse::json(
        200,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let model = server.model("claude-sonnet-4-5");
    let request = || ModelRequest::new(vec![Message::user("hi")]);
    let (chunks, error) = collect(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    let mut answer = kit::model::StreamAssembler::new();
    chunks.iter().for_each(|c| answer.push(c));
    assert_eq!(answer.finish().message.text(), "whole at once");
    // Known before any chunk: the stream call itself fails.
    let Err(error) = model.stream(&request()).await else {
        panic!("the error in the body was lost");
    };
    assert!(error.to_string().contains("Overloaded"), "{error}");
    assert!(
        error.is_transient(),
        "overloaded is worth retrying: {error:?}"
    );
}
