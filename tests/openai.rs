//! The OpenAI-compatible provider against a mock server speaking the Chat Completions wire
//! format (what only this provider has; the behaviour both providers share is in
//! `provider_conformance.rs`): request bodies field by field, tool calls in JSON and SSE, usage,
//! `model::init`, Ollama and Azure, and an agent calling a tool through it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::StreamExt;
use kit::agent::Agent;
use kit::model::openai::OpenAiModel;
use kit::model::{
    self, ChatModel, FinishReason, ModelChunk, ModelError, ModelOptions, ModelRequest,
    ResponseFormat, StreamAssembler, ToolChoice, ToolSpec,
};
use kit::tool::{ToolContext, ToolError, ToolHandler};
use kit::{Config, ContentPart, Message, ToolCall};
use kit_testing::mock::MockResponse;
use kit_testing::mock::openai::{self, MockOpenAi, TEST_KEY};
use serde_json::{Value, json};

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

fn conversation() -> Vec<Message> {
    vec![
        Message::user(vec![
            ContentPart::text("Weather here and there?"),
            ContentPart::image_url("https://example.com/map.png"),
            ContentPart::image_base64("image/png", "iVBORw0KGgo="),
        ]),
        Message::assistant_with_tool_calls(
            "Checking both.",
            vec![
                ToolCall::with_id("call_a", "get_weather", json!({"city": "Paris"})),
                ToolCall::with_id("call_b", "get_weather", json!({"city": "Oslo"})),
            ],
        ),
        Message::tool("call_a", "18°C, sunny"),
        Message::tool_error("call_b", "Error: the weather service is down"),
    ]
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
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("ok")));
    let model = server.model("gpt-4o-mini");
    let request = ModelRequest::new(conversation())
        .system("You are a weather bot.")
        .tools(vec![weather_tool()])
        .tool_choice(ToolChoice::Required)
        .response_format(ResponseFormat {
            name: "report".into(),
            schema: json!({"type": "object"}),
            strict: true,
        });
    let mut request = request;
    request.options = ModelOptions::default().temperature(0.25).max_tokens(300);
    model.generate(&request).await.unwrap();

    let got = &server.requests()[0];
    assert_eq!(
        (got.method.as_str(), got.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {TEST_KEY}").as_str())
    );
    assert_eq!(got.header("content-type"), Some("application/json"));
    let body = &got.body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["max_completion_tokens"], 300);
    assert!(body.get("max_tokens").is_none());
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(
        m[0],
        json!({"role": "system", "content": "You are a weather bot."})
    );
    assert_eq!(m[1]["role"], "user");
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "text", "text": "Weather here and there?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/map.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ])
    );
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["content"], "Checking both.");
    assert_eq!(
        m[2]["tool_calls"],
        json!([
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
        ])
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "18°C, sunny"})
    );
    assert_eq!(m[4]["tool_call_id"], "call_b");
    assert_eq!(m[4]["content"], "Error: the weather service is down");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }}])
    );
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "report", "schema": {"type": "object"}, "strict": true}})
    );
}

#[tokio::test]
async fn tool_choice_forms() {
    let server = MockOpenAi::start().await.unwrap();
    let model = server.model("gpt-4o-mini");
    for choice in [
        ToolChoice::Auto,
        ToolChoice::None,
        ToolChoice::Tool("get_weather".into()),
    ] {
        server.enqueue(openai::json(openai::completion("ok")));
        let request = ModelRequest::new(vec![Message::user("hi")])
            .tools(vec![weather_tool()])
            .tool_choice(choice);
        model.generate(&request).await.unwrap();
    }
    server.enqueue(openai::json(openai::completion("ok")));
    model
        .generate(&ModelRequest::new(vec![Message::user("hi")]).tool_choice(ToolChoice::Required))
        .await
        .unwrap();
    let r = server.requests();
    assert_eq!(r[0].body["tool_choice"], "auto");
    assert_eq!(r[1].body["tool_choice"], "none");
    assert_eq!(
        r[2].body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert!(r[3].body.get("tools").is_none() && r[3].body.get("tool_choice").is_none());
}

#[tokio::test]
async fn a_json_answer_with_parallel_tool_calls_and_usage() {
    let server = MockOpenAi::start().await.unwrap();
    let mut body = openai::tool_calls_completion(&[
        ("call_1", "get_weather", json!({"city": "Paris"})),
        ("call_2", "get_weather", json!({"city": "Oslo"})),
    ]);
    body["usage"] = openai::usage(2000, 40, 1536);
    server.enqueue(openai::json(body));
    let answer = server
        .model("gpt-4o-mini")
        .generate(&ModelRequest::new(vec![Message::user("hi")]).tools(vec![weather_tool()]))
        .await
        .unwrap();
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    let calls = &answer.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_1", "get_weather")
    );
    assert_eq!(calls[0].args, json!({"city": "Paris"}));
    assert_eq!(calls[1].args, json!({"city": "Oslo"}));
    let usage = answer.message.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (2000, 40, 1536)
    );
    assert_eq!(answer.message.metadata["id"], "chatcmpl-mock123");
    // 464 uncached × 0.15 + 1536 cached × 0.075 + 40 × 0.60, per million
    let cost = answer.message.metadata["cost_usd"].as_f64().unwrap();
    assert!((cost - (464.0 * 0.15 + 1536.0 * 0.075 + 40.0 * 0.60) / 1e6).abs() < 1e-12);
}

#[tokio::test]
async fn a_stream_with_tool_call_deltas_split_across_chunks() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(
        MockResponse::sse([
            openai::role_chunk(),
            openai::text_chunk("Let me "),
            openai::text_chunk("check."),
            openai::tool_start_chunk(0, "call_p", "get_weather"),
            openai::tool_args_chunk(0, "{\"ci"),
            openai::tool_start_chunk(1, "call_o", "get_weather"),
            openai::tool_args_chunk(1, "{\"city\": \"Os"),
            openai::tool_args_chunk(0, "ty\": \"Par"),
            openai::tool_args_chunk(1, "lo\"}"),
            openai::tool_args_chunk(0, "is\"}"),
            openai::finish_chunk("tool_calls"),
            openai::usage_chunk(900, 33, 128),
            openai::done(),
        ])
        .fragmented(),
    );
    let model = server.model("gpt-4o-mini");
    let (chunks, error) = collect(
        &model,
        ModelRequest::new(vec![Message::user("weather?")]).tools(vec![weather_tool()]),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    let got = &server.requests()[0];
    assert_eq!(got.body["stream"], true);
    assert_eq!(got.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(got.header("accept"), Some("text/event-stream"));
    assert_eq!(
        chunks[0],
        ModelChunk::Text {
            text: "Let me ".into()
        }
    );
    let mut assembler = StreamAssembler::new();
    for c in &chunks {
        assembler.push(c);
    }
    let answer = assembler.finish();
    assert_eq!(answer.message.text(), "Let me check.");
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    let calls = &answer.message.tool_calls;
    assert_eq!(
        calls[0],
        ToolCall::with_id("call_p", "get_weather", json!({"city": "Paris"}))
    );
    assert_eq!(
        calls[1],
        ToolCall::with_id("call_o", "get_weather", json!({"city": "Oslo"}))
    );
    let usage = answer.message.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (900, 33, 128)
    );
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue_all([
        openai::bad_request(),
        openai::json(openai::completion("no")),
    ]);
    let err = server
        .model("gpt-4o-mini")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::BadRequest { status: 400, ref message, .. } if message.contains("bogus")),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn malformed_json_is_reported() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(MockResponse::raw(
        200,
        "application/json",
        "{\"choices\": [oops",
    ));
    let err = server
        .model("gpt-4o-mini")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::MalformedResponse { .. }),
        "{err:?}"
    );
    server.enqueue(openai::json(
        json!({"id": "x", "object": "chat.completion"}),
    ));
    let err = server
        .model("gpt-4o-mini")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no `choices`"), "{err}");
}

#[tokio::test]
async fn timeouts_are_typed() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(MockResponse::hang());
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.options = ModelOptions::default().timeout_ms(200).retries(0);
    let err = server
        .model("gpt-4o-mini")
        .generate(&request)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Timeout { after, .. } if after == Duration::from_millis(200)),
        "{err:?}"
    );
}

#[tokio::test]
async fn init_resolves_openai_with_options_and_config() {
    let server = MockOpenAi::start().await.unwrap();
    let opts = ModelOptions::default()
        .temperature(0.0)
        .max_tokens(64)
        .retries(0);
    let model = model::init("openai:gpt-4.1-mini", &server.config(), opts).unwrap();
    assert_eq!(
        (model.provider(), model.model_name()),
        ("openai", "gpt-4.1-mini")
    );
    server.enqueue(openai::server_error());
    let err = model
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Server { .. }));
    assert_eq!(
        server.request_count(),
        1,
        "retries(0) from model_opts is honoured"
    );
    let body = &server.requests()[0].body;
    assert_eq!(body["temperature"], 0.0);
    // OPENAI_BASE_URL points at another server: it gets the widely known `max_tokens`.
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn a_missing_key_fails_before_any_request() {
    let server = MockOpenAi::start().await.unwrap();
    let config = Config {
        openai_base_url: Some(server.base_url()),
        ..Config::default()
    };
    let err = model::init("openai:gpt-4o-mini", &config, ModelOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(err, ModelError::MissingCredentials { ref variable, .. } if variable == "OPENAI_API_KEY"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("set the environment variable OPENAI_API_KEY"),
        "{err}"
    );
    // The agent builder resolves model strings the same way, also before any request.
    let build = Agent::builder()
        .model("openai:gpt-4o-mini")
        .config(config)
        .build()
        .err()
        .unwrap();
    assert!(build.to_string().contains("OPENAI_API_KEY"), "{build}");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn unknown_providers_and_bad_specs_say_what_is_known() {
    let config = Config::default();
    let err = model::init("mistral:large", &config, ModelOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, ModelError::UnknownProvider { .. }));
    assert_eq!(
        err.to_string(),
        "unknown model provider `mistral`; known providers: openai, openai-responses, anthropic, ollama"
    );
    let err = model::init("gpt-4o", &config, ModelOptions::default())
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("must be written `provider:model`"),
        "{err}"
    );
    let err = model::init("openai:", &config, ModelOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("names no model"), "{err}");
}

#[tokio::test]
async fn ollama_needs_no_key_and_uses_max_tokens() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("hi from llama")));
    let config = Config {
        ollama_base_url: Some(server.base_url()),
        ..Config::default()
    };
    let model = model::init(
        "ollama:llama3.1",
        &config,
        ModelOptions::default().max_tokens(50),
    )
    .unwrap();
    assert_eq!(model.provider(), "ollama");
    let answer = model
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(answer.message.text(), "hi from llama");
    let got = &server.requests()[0];
    assert_eq!(got.header("authorization"), None);
    assert_eq!(got.body["max_tokens"], 50);
    assert_eq!(got.body["model"], "llama3.1");
}

#[tokio::test]
async fn azure_uses_its_header_path_and_api_version() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("hi from azure")));
    let model = OpenAiModel::azure(&server.url(), "my-gpt4o", "2024-10-21", "azure-key-123456");
    model
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    let got = &server.requests()[0];
    assert_eq!(got.path, "/openai/deployments/my-gpt4o/chat/completions");
    assert_eq!(got.query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(got.header("api-key"), Some("azure-key-123456"));
    assert_eq!(got.header("authorization"), None);
}

#[tokio::test]
async fn compatible_servers_get_extra_headers() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("ok")));
    let model = OpenAiModel::compatible("openrouter", "openai/gpt-4o-mini", server.base_url())
        .api_key("sk-or-test")
        .header("HTTP-Referer", "https://example.com")
        .header("X-Title", "kit tests");
    model
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    let got = &server.requests()[0];
    assert_eq!(got.header("authorization"), Some("Bearer sk-or-test"));
    assert_eq!(got.header("http-referer"), Some("https://example.com"));
    assert_eq!(got.header("x-title"), Some("kit tests"));
}

/// Looks up the weather of a city.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct GetWeather {
    /// The city.
    city: String,
}

impl ToolHandler for GetWeather {
    type Output = Value;
    async fn run(self, _ctx: ToolContext) -> Result<Value, ToolError> {
        if self.city == "Atlantis" {
            return Err(ToolError::new("no weather station in Atlantis"));
        }
        Ok(json!({"city": self.city, "celsius": 18}))
    }
}

#[tokio::test]
async fn an_agent_calls_tools_through_the_provider() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue_all([
        openai::json(openai::tool_calls_completion(&[
            ("call_1", "get_weather", json!({"city": "Paris"})),
            ("call_2", "get_weather", json!({"town": "Oslo"})),
            ("call_3", "get_weather", json!({"city": "Atlantis"})),
        ])),
        openai::json(openai::completion("Paris is 18°C.")),
    ]);
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .system_prompt("Answer briefly.")
        .tools([GetWeather::tool()])
        .build()
        .unwrap();
    let out = agent.invoke("Weather in Paris?").await.unwrap();
    assert_eq!(out.state().final_text(), "Paris is 18°C.");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    assert_eq!(first["messages"][0]["content"], "Answer briefly.");
    assert_eq!(first["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["properties"]["city"]["description"],
        "The city."
    );
    let second = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 3, "every call gets a result: {second:#?}");
    assert_eq!(results[0]["tool_call_id"], "call_1");
    assert_eq!(results[0]["content"], "{\"celsius\":18,\"city\":\"Paris\"}");
    let invalid = results[1]["content"].as_str().unwrap();
    assert!(
        invalid.contains("invalid arguments for tool `get_weather`"),
        "{invalid}"
    );
    assert!(invalid.contains("`city` is required"), "{invalid}");
    assert_eq!(
        results[2]["content"],
        "Error: no weather station in Atlantis"
    );
}

#[tokio::test]
async fn a_key_echoed_by_a_proxy_is_scrubbed_from_errors() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::error(
        401,
        &format!("proxy: key {TEST_KEY} is not allowed"),
        "auth_error",
        None,
        None,
    ));
    let err = server
        .model("gpt-4o-mini")
        .generate(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(TEST_KEY), "{shown}");
    assert!(
        shown.contains("proxy: key [REDACTED] is not allowed"),
        "{shown}"
    );
}

#[tokio::test]
async fn init_resolves_openai_responses_to_the_responses_api() {
    let server = MockOpenAi::start().await.unwrap();
    let fixture = kit_testing::mock::fixtures::get("responses/text.json").unwrap();
    server.enqueue(fixture.response());
    let m = model::init(
        "openai-responses:gpt-4o-mini",
        &server.config(),
        ModelOptions::default().max_tokens(64),
    )
    .unwrap();
    assert_eq!((m.provider(), m.model_name()), ("openai", "gpt-4o-mini"));
    let answer = m
        .generate(&ModelRequest::new(vec![Message::user("Capital of France?")]).system("Be brief."))
        .await
        .unwrap();
    assert_eq!(answer.message.text(), "Paris is the capital of France.");
    let got = &server.requests()[0];
    assert_eq!(got.path, "/v1/responses");
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {TEST_KEY}").as_str())
    );
    assert_eq!(got.body["instructions"], "Be brief.");
    assert_eq!(got.body["max_output_tokens"], 64);
    assert_eq!(got.body["store"], false);
    assert!(
        got.body.get("include").is_none(),
        "no reasoning asked of a non-reasoning model"
    );
    // A misspelt provider still lists the Responses API among the known ones.
    let err = model::init(
        "openai-response:gpt-5",
        &server.config(),
        ModelOptions::default(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("openai-responses"), "{err}");
}

/// A proxy may answer a streamed request with `application/json`: the whole answer, or an
/// error with a 200. Either reaches the caller, instead of an empty stream that ended early;
/// an event stream is still read as one, and a JSON body that does not read is a clear error.
#[tokio::test]
async fn a_streamed_request_answered_with_json_gives_the_answer_or_the_error() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("whole at once")));
    server.enqueue(MockResponse::json(
        200,
        &json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}),
    ));
    server.enqueue(MockResponse::raw(
        200,
        "application/json; charset=utf-8",
        "<html>gateway</html>",
    ));
    let model = server.model("gpt-4o-mini");
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
    assert!(
        error.to_string().contains("exceeded your current quota"),
        "{error}"
    );

    let Err(error) = model.stream(&request()).await else {
        panic!("a body that does not read was taken");
    };
    assert!(
        matches!(error, ModelError::MalformedResponse { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("<html>gateway"), "{error}");

    // Events after all, under the wrong content type: read as events.
    server.enqueue(MockResponse::raw(
        200,
        "application/json",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"evented\"}}]}\n\n\
         data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
         data: [DONE]\n\n",
    ));
    let (chunks, error) = collect(&model, request()).await;
    assert!(error.is_none(), "{error:?}");
    let mut answer = kit::model::StreamAssembler::new();
    chunks.iter().for_each(|c| answer.push(c));
    assert_eq!(answer.finish().message.text(), "evented");
}
