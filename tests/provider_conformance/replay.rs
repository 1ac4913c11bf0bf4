//! Every fixture replayed through kit's providers, each with what kit must make of it.

use std::time::Duration;

use futures::StreamExt;
use kit::message::{Content, ContentPart, ReasoningFormat};
use kit::model::{
    FinishReason, ModelChunk, ModelError, ModelOptions, ModelRequest, ModelResponse,
    StreamAssembler,
};
use kit::{Message, Usage};
use kit_testing::mock::MockServer;
use kit_testing::mock::fixtures::{self, Fixture};
use serde_json::{Value, json};

/// What kit must make of a fixture. Unset fields are not checked; every fixture checks at
/// least its outcome (text or calls or reasoning, or its error).
#[derive(Default)]
struct Expect {
    text: Option<&'static str>,
    /// Reasoning parts: (format, text, signature prefix, encrypted prefix).
    reasoning: Vec<(
        ReasoningFormat,
        &'static str,
        Option<&'static str>,
        Option<&'static str>,
    )>,
    /// Tool calls: (id — `""` for a synthesized one —, name, arguments).
    calls: Vec<(&'static str, &'static str, Value)>,
    /// Provider blocks, by their `type`.
    blocks: Vec<&'static str>,
    finish: Option<FinishReason>,
    /// (input, output, cache read, cache write, one-hour writes, reasoning).
    usage: Option<(u64, u64, u64, u64, u64, u64)>,
    /// The response id kept in the metadata.
    id: Option<&'static str>,
    /// The metadata has a cost (priced model, or a cost the server reported).
    cost: Option<f64>,
    metadata: Vec<(&'static str, Value)>,
    error: Option<Error>,
}

/// An expected failure: the error kind, its status when it has one, words it keeps, and for
/// streams the text delivered before it.
struct Error {
    kind: &'static str,
    status: Option<u16>,
    says: &'static str,
    before: Option<&'static str>,
}

fn err(kind: &'static str, status: Option<u16>, says: &'static str) -> Option<Error> {
    Some(Error {
        kind,
        status,
        says,
        before: None,
    })
}

fn usage(i: u64, o: u64) -> Option<(u64, u64, u64, u64, u64, u64)> {
    Some((i, o, 0, 0, 0, 0))
}

const PRICED: Option<f64> = Some(-1.0);

fn paris() -> Value {
    json!({"city": "Paris"})
}

fn oslo() -> Value {
    json!({"city": "Oslo"})
}

/// The expectation of every fixture, by name.
fn expect(name: &str) -> Option<Expect> {
    use FinishReason as F;
    use ReasoningFormat as R;
    const REFUSAL: &str = "I'm sorry, but I can't help with that request.";
    let e = Expect::default;
    Some(match name {
        "chat/text.json" => Expect {
            text: Some("The capital of France is Paris."),
            finish: Some(F::Stop),
            usage: usage(24, 8),
            id: Some("chatcmpl-CQaZ3mXQwq0Ue2o1mJ6f7tGzA9bYx"),
            cost: PRICED,
            metadata: vec![("system_fingerprint", json!("fp_560af6e559"))],
            ..e()
        },
        "chat/text.stream" => Expect {
            text: Some("The capital of France is Paris."),
            finish: Some(F::Stop),
            usage: usage(24, 8),
            id: Some("chatcmpl-CQaZ8pE1nV3xkqL0dYtTQ2w5Rr7Ho"),
            cost: PRICED,
            metadata: vec![("model", json!("gpt-4o-mini-2024-07-18"))],
            ..e()
        },
        "chat/tool_call.json" => Expect {
            calls: vec![("call_Nk2xS3PqYwL8tRb1", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: usage(81, 15),
            ..e()
        },
        "chat/parallel_tool_calls.json" | "chat/parallel_tool_calls.stream" => Expect {
            calls: vec![
                ("call_Nk2xS3PqYwL8tRb1", "get_weather", paris()),
                ("call_Vb7mQ0zHs4Jd9Ke6", "get_weather", oslo()),
            ],
            finish: Some(F::ToolCalls),
            usage: usage(81, 46),
            cost: PRICED,
            ..e()
        },
        "chat/refusal.json" | "chat/refusal.stream" => Expect {
            text: Some(REFUSAL),
            finish: Some(F::Stop),
            metadata: vec![("refusal", json!(REFUSAL))],
            ..e()
        },
        "chat/length.json" => Expect {
            text: Some("Once upon a time, in a kingdom by the"),
            finish: Some(F::Length),
            ..e()
        },
        "chat/content_filter.stream" => Expect {
            text: Some("Here is how"),
            finish: Some(F::ContentFilter),
            ..e()
        },
        "chat/reasoning_usage.json" => Expect {
            text: Some("17 is prime."),
            usage: Some((2106, 388, 1920, 0, 0, 320)),
            cost: PRICED,
            ..e()
        },
        "chat/structured_output.json" => Expect {
            text: Some(r#"{"city":"Paris","country":"France"}"#),
            finish: Some(F::Stop),
            ..e()
        },
        "chat/error_400_context_length.json" => Expect {
            error: err(
                "context_length_exceeded",
                None,
                "maximum context length is 128000",
            ),
            ..e()
        },
        "chat/error_401.json" => Expect {
            error: err("authentication", None, "Incorrect API key provided"),
            ..e()
        },
        "chat/error_429.json" => Expect {
            error: err("rate_limited", None, "Rate limit reached for gpt-4o-mini"),
            ..e()
        },
        "chat/error_500.json" => Expect {
            error: err("server", Some(500), "The server had an error"),
            ..e()
        },
        "chat/error_in_stream.stream" => Expect {
            error: Some(Error {
                kind: "server",
                status: Some(500),
                says: "The server had an error",
                before: Some("The answer"),
            }),
            ..e()
        },
        "chat/error_400_in_stream.stream" => Expect {
            error: err("bad_request", Some(400), "empty string"),
            ..e()
        },
        "messages/text.json" => Expect {
            text: Some("Paris is the capital of France."),
            finish: Some(F::Stop),
            usage: usage(21, 10),
            id: Some("msg_01XFDUDYJgAACzvnptvVoYEL"),
            cost: PRICED,
            ..e()
        },
        "messages/text.stream" => Expect {
            text: Some("Paris is the capital of France."),
            finish: Some(F::Stop),
            usage: usage(21, 10),
            id: Some("msg_01HCDu5LRGeP2o7s4xGmNS9t"),
            cost: PRICED,
            metadata: vec![("model", json!("claude-sonnet-4-5-20250929"))],
            ..e()
        },
        "messages/tool_use.json" => Expect {
            text: Some("I'll check the weather in Paris."),
            calls: vec![("toolu_01A09q90qw90lq917835lq9", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: usage(384, 71),
            ..e()
        },
        "messages/parallel_tool_use.stream" => Expect {
            calls: vec![
                ("toolu_01A09q90qw90lq917835lq9", "get_weather", paris()),
                ("toolu_01B7zX3mWq2Lp9Rt4Yv6Nc8D", "get_weather", oslo()),
            ],
            finish: Some(F::ToolCalls),
            usage: usage(384, 89),
            ..e()
        },
        "messages/thinking_tool_use.json" => Expect {
            reasoning: vec![(
                R::AnthropicThinking,
                "The user asks for the weather in Paris. I should call get_weather with city Paris.",
                Some("EqQBCkgIBxAB"),
                None,
            )],
            calls: vec![("toolu_01A09q90qw90lq917835lq9", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: usage(470, 156),
            ..e()
        },
        "messages/thinking_tool_use.stream" => Expect {
            reasoning: vec![
                (
                    R::AnthropicThinking,
                    "The user asks for the weather in Paris. I should call get_weather with city Paris.",
                    Some("EqQBCkgIBxAB"),
                    None,
                ),
                (
                    R::AnthropicThinking,
                    "Celsius is fine.",
                    Some("ErUBCkYIBRgC"),
                    None,
                ),
            ],
            calls: vec![("toolu_01A09q90qw90lq917835lq9", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: Some((2 + 13993 + 22, 61, 13993, 22, 0, 0)),
            id: Some("msg_015SQewixvT9s4cABCVvUE6g"),
            cost: PRICED,
            ..e()
        },
        "messages/redacted_thinking.json" => Expect {
            text: Some("Here is the answer."),
            reasoning: vec![
                (
                    R::AnthropicThinking,
                    "Let me work through this.",
                    Some("ErUBCkYIBRgC"),
                    None,
                ),
                (R::AnthropicThinking, "", None, Some("EmwKAhgBEgy3")),
            ],
            finish: Some(F::Stop),
            ..e()
        },
        "messages/redacted_thinking.stream" => Expect {
            text: Some("Here is the answer."),
            reasoning: vec![(R::AnthropicThinking, "", None, Some("EmwKAhgBEgy3"))],
            finish: Some(F::Stop),
            ..e()
        },
        "messages/cache_usage.json" => Expect {
            text: Some("Summary ready."),
            usage: Some((12 + 2048 + 5120, 48, 2048, 5120, 4096, 0)),
            // Sonnet 4.5: 12 × $3 + 2048 × $0.30 + 1024 × $3.75 + 4096 × $6 + 48 × $15, per M.
            cost: Some(
                (12.0 * 3.0 + 2048.0 * 0.30 + 1024.0 * 3.75 + 4096.0 * 6.0 + 48.0 * 15.0) / 1e6,
            ),
            ..e()
        },
        "messages/stop_sequence.json" => Expect {
            text: Some("1, 2, 3, 4"),
            finish: Some(F::Stop),
            metadata: vec![
                ("stop_reason", json!("stop_sequence")),
                ("stop_sequence", json!("5")),
            ],
            ..e()
        },
        "messages/max_tokens.stream" => Expect {
            text: Some("Once upon a time, in a"),
            finish: Some(F::Length),
            metadata: vec![("stop_reason", json!("max_tokens"))],
            ..e()
        },
        "messages/refusal.stream" => Expect {
            text: Some("I can"),
            finish: Some(F::ContentFilter),
            ..e()
        },
        "messages/pause_turn.json" => Expect {
            text: Some("I'll search for that."),
            blocks: vec!["server_tool_use", "web_search_tool_result"],
            finish: Some(F::Other("pause_turn".into())),
            metadata: vec![("server_tool_use", json!({"web_search_requests": 1}))],
            ..e()
        },
        "messages/web_search.stream" => Expect {
            text: Some("I'll search for that.Claude Shannon was born on April 30, 1916."),
            blocks: vec!["server_tool_use", "web_search_tool_result"],
            finish: Some(F::Stop),
            usage: usage(10682, 510),
            metadata: vec![("server_tool_use", json!({"web_search_requests": 1}))],
            ..e()
        },
        "messages/error_400_prompt_too_long.json" => Expect {
            error: err("context_length_exceeded", None, "prompt is too long"),
            ..e()
        },
        "messages/error_401.json" => Expect {
            error: err("authentication", None, "invalid x-api-key"),
            ..e()
        },
        "messages/error_429.json" => Expect {
            error: err("rate_limited", None, "would exceed the rate limit"),
            ..e()
        },
        "messages/error_500.json" => Expect {
            error: err("server", Some(500), "Internal server error"),
            ..e()
        },
        "messages/error_529.json" => Expect {
            error: err("server", Some(529), "Overloaded"),
            ..e()
        },
        "messages/error_in_stream.stream" => Expect {
            error: err("server", Some(529), "Overloaded [overloaded_error]"),
            ..e()
        },
        "deepseek/reasoning_tool_call.json" => Expect {
            reasoning: vec![(
                R::ReasoningContent,
                "The user wants Paris weather. I'll call get_weather.",
                None,
                None,
            )],
            calls: vec![("call_00_aB3dE5fG7hJ9kL1mN3pQ5rS7", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: Some((120, 96, 64, 0, 0, 71)),
            ..e()
        },
        "deepseek/reasoning_answer.json" => Expect {
            text: Some("It is 18°C in Paris."),
            reasoning: vec![(
                R::ReasoningContent,
                "The tool says 18°C. Answer briefly.",
                None,
                None,
            )],
            finish: Some(F::Stop),
            usage: Some((260, 30, 192, 0, 0, 18)),
            ..e()
        },
        "deepseek/reasoning.stream" => Expect {
            text: Some("9.8 is greater."),
            reasoning: vec![(
                R::ReasoningContent,
                "9.11 < 9.8 since .8 > .11.",
                None,
                None,
            )],
            finish: Some(F::Stop),
            usage: Some((120, 96, 64, 0, 0, 71)),
            id: Some("9b2f7e1c-4d3a-4b8e-9f0a-1c2d3e4f5a6b"),
            ..e()
        },
        "mistral/magistral_parts.json" => Expect {
            text: Some("2 + 2 = 4."),
            reasoning: vec![(
                R::MistralThinking,
                "Two plus two. That is four.",
                None,
                None,
            )],
            usage: usage(18, 142),
            ..e()
        },
        "mistral/magistral.stream" => Expect {
            text: Some("2 + 2 = 4."),
            reasoning: vec![(R::MistralThinking, "Two plus two. Four.", None, None)],
            usage: usage(18, 142),
            ..e()
        },
        "groq/reasoning.json" | "groq/reasoning.stream" => Expect {
            text: Some("Paris."),
            reasoning: vec![(R::ReasoningField, "France's capital is Paris.", None, None)],
            finish: Some(F::Stop),
            usage: usage(16, 24),
            ..e()
        },
        "openrouter/reasoning_details.json" => Expect {
            reasoning: vec![(
                R::ReasoningDetails,
                "The user wants Paris weather; call the tool.",
                Some("EqQBCkgIBxAB"),
                None,
            )],
            calls: vec![("toolu_vrtx_01Hx2", "get_weather", paris())],
            usage: Some((605, 88, 0, 0, 0, 34)),
            cost: Some(0.003135),
            ..e()
        },
        "openrouter/reasoning.stream" => Expect {
            text: Some("Done."),
            reasoning: vec![(R::ReasoningDetails, "Thinking.", Some("ErUBCkYIBRgC"), None)],
            usage: Some((12, 20, 0, 0, 0, 8)),
            cost: Some(0.000336),
            ..e()
        },
        "openrouter/error_in_stream.stream" => Expect {
            error: Some(Error {
                kind: "server",
                status: Some(502),
                says: "Provider returned error",
                before: Some("The"),
            }),
            ..e()
        },
        "cerebras/reasoning.stream" => Expect {
            text: Some("4"),
            reasoning: vec![(R::ReasoningField, "Simple arithmetic.", None, None)],
            usage: Some((70, 12, 0, 0, 0, 6)),
            ..e()
        },
        "gemini/thought_signature.json" => Expect {
            reasoning: vec![(R::GeminiThoughtSignature, "", Some("CiQB0e2Kb7x9"), None)],
            calls: vec![("function-call-14627713541862580342", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: Some((64, 18, 0, 0, 0, 65)),
            ..e()
        },
        "gemini/parallel_calls.stream" => Expect {
            reasoning: vec![(R::GeminiThoughtSignature, "", Some("CiQB0e2Kb7x9"), None)],
            calls: vec![
                ("function-call-1", "get_weather", paris()),
                ("function-call-2", "get_weather", oslo()),
            ],
            finish: Some(F::ToolCalls),
            ..e()
        },
        "ollama/thinking_tool_call.stream" => Expect {
            reasoning: vec![(R::ReasoningField, "Need the weather tool.", None, None)],
            calls: vec![("call_k2x9f1qz", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: usage(142, 31),
            ..e()
        },
        "vllm/empty_ids.json" => Expect {
            calls: vec![("", "get_weather", paris()), ("", "get_weather", oslo())],
            finish: Some(F::ToolCalls),
            usage: usage(210, 52),
            ..e()
        },
        "compatible/no_index_calls.stream" => Expect {
            calls: vec![
                ("call_1", "get_weather", paris()),
                ("call_2", "get_weather", oslo()),
            ],
            finish: Some(F::ToolCalls),
            usage: usage(88, 40),
            ..e()
        },
        "responses/text.json" | "responses/text.stream" => Expect {
            text: Some("Paris is the capital of France."),
            finish: Some(F::Stop),
            usage: usage(11, 8),
            id: Some("resp_0f9c4b2f224d858000695fa062bf048197a680f357bbb09000"),
            cost: PRICED,
            ..e()
        },
        "responses/function_call.stream" => Expect {
            calls: vec![("call_7VaiUXZYuuuwWwviCrckxq6t", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: usage(58, 18),
            cost: PRICED,
            ..e()
        },
        "responses/reasoning_call.json" => Expect {
            reasoning: vec![(
                R::OpenAiResponses,
                "**Checking the weather tool**",
                None,
                Some("gAAAAABpZN9e"),
            )],
            calls: vec![("call_7VaiUXZYuuuwWwviCrckxq6t", "get_weather", paris())],
            finish: Some(F::ToolCalls),
            usage: Some((321, 143, 128, 0, 0, 128)),
            cost: PRICED,
            ..e()
        },
        "responses/reasoning.stream" => Expect {
            text: Some("Paris is the capital of France."),
            reasoning: vec![(
                R::OpenAiResponses,
                "**Checking the weather tool**",
                None,
                Some("gAAAAABpZN9e"),
            )],
            finish: Some(F::Stop),
            usage: Some((40, 90, 0, 0, 0, 64)),
            ..e()
        },
        "responses/incomplete.json" => Expect {
            text: Some("Once upon a"),
            finish: Some(F::Length),
            ..e()
        },
        "responses/failed.stream" => Expect {
            error: Some(Error {
                kind: "server",
                status: Some(500),
                says: "The model failed to generate a response",
                before: Some("Hello"),
            }),
            ..e()
        },
        "responses/error_event.stream" => Expect {
            error: err("rate_limited", None, "Rate limit reached"),
            ..e()
        },
        _ => return None,
    })
}

/// Replays `fixture` and returns the answer, or the error with the chunks before it.
async fn replay(fixture: &Fixture) -> (Result<ModelResponse, ModelError>, Vec<ModelChunk>) {
    let server = MockServer::start().await.expect("a mock server");
    server.enqueue(fixture.response());
    let model = fixture.model(&server);
    let mut request = ModelRequest::new(vec![Message::user("What's the weather in Paris?")]);
    request.options = ModelOptions::default().retries(0).timeout_ms(10_000);
    if !fixture.stream {
        return (model.generate(&request).await, Vec::new());
    }
    let mut stream = match model.stream(&request).await {
        Ok(s) => s,
        Err(e) => return (Err(e), Vec::new()),
    };
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(c) => chunks.push(c),
            Err(e) => return (Err(e), chunks),
        }
    }
    let mut a = StreamAssembler::new();
    chunks.iter().for_each(|c| a.push(c));
    (Ok(a.finish()), chunks)
}

fn check_answer(f: &Fixture, x: &Expect, r: &ModelResponse, problems: &mut Vec<String>) {
    let mut fail = |what: String| problems.push(format!("{}: {what}", f.name));
    let m = &r.message;
    if let Some(text) = x.text
        && m.text() != text
    {
        fail(format!("text {:?}, expected {text:?}", m.text()));
    }
    let parts: &[ContentPart] = match &m.content {
        Content::Parts(p) => p,
        Content::Text(_) => &[],
    };
    let reasoning: Vec<_> = m.content.reasoning().collect();
    if reasoning.len() != x.reasoning.len() {
        fail(format!(
            "{} reasoning parts, expected {}: {reasoning:?}",
            reasoning.len(),
            x.reasoning.len()
        ));
    }
    for (got, (format, text, sig, enc)) in reasoning.iter().zip(&x.reasoning) {
        if got.format != *format || got.text != *text || got.provider != f.provider {
            fail(format!(
                "reasoning {got:?}, expected {format:?} {text:?} from {}",
                f.provider
            ));
        }
        for (value, prefix, what) in [
            (&got.signature, sig, "signature"),
            (&got.encrypted, enc, "encrypted"),
        ] {
            match (value, prefix) {
                (Some(v), Some(p)) if v.starts_with(p) && f.body.contains(v.as_str()) => {}
                (None, None) => {}
                _ => fail(format!(
                    "{what} {value:?}, expected one starting {prefix:?} as sent"
                )),
            }
        }
    }
    let blocks: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::ProviderBlock { block, .. } => block["type"].as_str(),
            _ => None,
        })
        .collect();
    if blocks != x.blocks {
        fail(format!(
            "provider blocks {blocks:?}, expected {:?}",
            x.blocks
        ));
    }
    let calls = &m.tool_calls;
    if calls.len() != x.calls.len() {
        fail(format!(
            "{} calls, expected {}: {calls:?}",
            calls.len(),
            x.calls.len()
        ));
    }
    for (got, (id, name, args)) in calls.iter().zip(&x.calls) {
        let id_ok = if id.is_empty() {
            got.id.starts_with("call_") && got.id.len() > 6
        } else {
            got.id == *id
        };
        if !id_ok || got.name != *name || got.args != *args {
            fail(format!("call {got:?}, expected {id:?} {name} {args}"));
        }
    }
    let mut ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != calls.len() {
        fail(format!("call ids collide: {calls:?}"));
    }
    if let Some(finish) = &x.finish
        && &r.finish_reason != finish
    {
        fail(format!("finish {:?}, expected {finish:?}", r.finish_reason));
    }
    if let Some((i, o, read, write, w1h, reasoning)) = x.usage {
        let want = Usage {
            input_tokens: i,
            output_tokens: o,
            cache_read_tokens: read,
            cache_creation_tokens: write,
            cache_creation_1h_tokens: w1h,
            reasoning_tokens: reasoning,
        };
        if m.usage != Some(want) {
            fail(format!("usage {:?}, expected {want:?}", m.usage));
        }
    }
    let meta = &m.metadata;
    if let Some(id) = x.id
        && meta.get("id") != Some(&json!(id))
    {
        fail(format!("metadata id {:?}, expected {id}", meta.get("id")));
    }
    match (x.cost, meta.get("cost_usd").and_then(Value::as_f64)) {
        (Some(want), Some(got)) if want < 0.0 && got > 0.0 => {}
        (Some(want), Some(got)) if (want - got).abs() < 1e-12 => {}
        (Some(_), got) => fail(format!("cost {got:?}, expected {:?}", x.cost)),
        (None, _) => {}
    }
    for (key, value) in &x.metadata {
        if meta.get(*key) != Some(value) {
            fail(format!(
                "metadata {key} = {:?}, expected {value}",
                meta.get(*key)
            ));
        }
    }
    if x.text.is_none() && x.reasoning.is_empty() && x.calls.is_empty() && x.blocks.is_empty() {
        fail("the expectation checks no outcome".into());
    }
}

fn check_error(
    f: &Fixture,
    want: &Error,
    e: &ModelError,
    chunks: &[ModelChunk],
    problems: &mut Vec<String>,
) {
    let mut fail = |what: String| problems.push(format!("{}: {what}", f.name));
    if e.kind() != want.kind {
        fail(format!(
            "error kind {} ({e}), expected {}",
            e.kind(),
            want.kind
        ));
    }
    let status = match e {
        ModelError::Server { status, .. } | ModelError::BadRequest { status, .. } => Some(*status),
        _ => None,
    };
    if want.status.is_some() && status != want.status {
        fail(format!("status {status:?}, expected {:?}", want.status));
    }
    if !e.to_string().contains(want.says) {
        fail(format!("error {e:?} does not say {:?}", want.says));
    }
    let transient = matches!(want.kind, "server" | "rate_limited");
    if e.is_transient() != transient {
        fail(format!(
            "transient {}, expected {transient}",
            e.is_transient()
        ));
    }
    if let ModelError::RateLimited { retry_after, .. } = e
        && f.headers.iter().any(|(h, _)| *h == "retry-after")
        && *retry_after != Some(Duration::from_secs(1))
    {
        fail(format!("retry-after {retry_after:?}, expected 1s"));
    }
    if let Some(before) = want.before {
        let text: String = chunks
            .iter()
            .filter_map(|c| match c {
                ModelChunk::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if text != before {
            fail(format!(
                "text before the error {text:?}, expected {before:?}"
            ));
        }
    }
}

#[tokio::test]
async fn every_fixture_replays_as_kit_expects() {
    let mut problems = Vec::new();
    let mut count = 0;
    for fixture in fixtures::all() {
        count += 1;
        assert!(
            !fixture.source.is_empty(),
            "{} says where it comes from",
            fixture.name
        );
        let Some(x) = expect(fixture.name) else {
            problems.push(format!("{}: no expectation", fixture.name));
            continue;
        };
        let (result, chunks) = replay(fixture).await;
        match (&result, &x.error) {
            (Ok(r), None) => check_answer(fixture, &x, r, &mut problems),
            (Err(e), Some(want)) => check_error(fixture, want, e, &chunks, &mut problems),
            (Ok(r), Some(_)) => problems.push(format!(
                "{}: answered {r:?}, expected an error",
                fixture.name
            )),
            (Err(e), None) => problems.push(format!("{}: failed: {e}", fixture.name)),
        }
    }
    assert!(count >= 40, "at least 40 fixtures, found {count}");
    assert!(
        problems.is_empty(),
        "{} of {count} fixtures:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[tokio::test]
async fn the_openrouter_error_chunk_delivers_its_usage_before_the_error() {
    let fixture = fixtures::get("openrouter/error_in_stream.stream").unwrap();
    let (result, chunks) = replay(fixture).await;
    assert!(
        matches!(result, Err(ModelError::Server { status: 502, .. })),
        "{result:?}"
    );
    let usage = chunks.iter().find_map(|c| match c {
        ModelChunk::Usage { usage } => Some(*usage),
        _ => None,
    });
    assert_eq!(
        usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((9, 1))
    );
}

#[tokio::test]
async fn overloaded_and_rate_limited_fixtures_are_retried_then_answered() {
    for (failure, success) in [
        ("messages/error_529.json", "messages/text.json"),
        ("messages/error_429.json", "messages/text.json"),
        ("chat/error_429.json", "chat/text.json"),
        ("chat/error_500.json", "chat/text.json"),
    ] {
        let (failure, success) = (
            fixtures::get(failure).unwrap(),
            fixtures::get(success).unwrap(),
        );
        let server = MockServer::start().await.unwrap();
        server.enqueue_all([failure.response(), success.response()]);
        let answer = failure
            .model(&server)
            .generate(&ModelRequest::new(vec![Message::user("hi")]))
            .await;
        assert_eq!(
            answer.map(|a| a.message.text()).ok().as_deref(),
            Some(success_text(success))
        );
        assert_eq!(
            server.request_count(),
            2,
            "{} was retried once",
            failure.name
        );
    }
    // A deterministic 400 in a stream is not retried.
    let fixture = fixtures::get("chat/error_400_in_stream.stream").unwrap();
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        fixture.response(),
        fixtures::get("chat/text.stream").unwrap().response(),
    ]);
    let mut stream = fixture
        .model(&server)
        .stream(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    let last = stream.next().await;
    assert!(
        matches!(last, Some(Err(ModelError::BadRequest { status: 400, .. }))),
        "{last:?}"
    );
    assert_eq!(server.request_count(), 1);
}

fn success_text(f: &Fixture) -> &'static str {
    match f.name {
        "messages/text.json" | "chat/text.json" if f.api == fixtures::Api::Messages => {
            "Paris is the capital of France."
        }
        _ => "The capital of France is Paris.",
    }
}
