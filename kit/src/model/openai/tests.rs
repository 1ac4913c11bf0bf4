use std::collections::VecDeque;

use serde_json::{Value, json};

use super::*;
use crate::http::SseEvent;
use crate::message::{ContentPart, Message, Reasoning, ReasoningFormat, ToolCall};
use crate::model::common::SseParser;
use crate::model::{FinishReason, ModelChunk, ToolChoice, ToolSpec};

#[test]
fn bodies_follow_the_wire_format() {
    let model = OpenAiModel::new("gpt-4o-mini", "k");
    let request = ModelRequest::new(vec![
        Message::user(vec![
            ContentPart::text("what is this?"),
            ContentPart::image_base64("image/png", "AAAA"),
        ]),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id("c1", "look", json!({"x": 1}))],
        ),
        Message::tool_error("c1", "no such thing"),
    ])
    .system("be brief")
    .tool_choice(ToolChoice::Tool("look".into()));
    let body = model.request_body(&request, false);
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        body["messages"][1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(body["messages"][2]["content"], Value::Null);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"x\":1}"
    );
    assert_eq!(body["messages"][3]["tool_call_id"], "c1");
    assert!(
        body.get("tool_choice").is_none(),
        "no tools, no tool_choice"
    );
    assert_eq!(body["stream"], false);
}

#[test]
fn reasoning_goes_back_only_in_the_form_and_to_the_server_it_came_from() {
    let own = |format, text: &str| ContentPart::Reasoning(Reasoning::new("deepseek", format, text));
    let mut details =
        Reasoning::new("deepseek", ReasoningFormat::ReasoningDetails, "t").with_signature("sig");
    details.raw =
        Some(json!({"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}));
    let gemini = Reasoning::new("deepseek", ReasoningFormat::GeminiThoughtSignature, "")
        .with_signature("gsig")
        .with_raw(json!({"tool_call_id": "c1"}));
    let mut answer = Message::assistant(vec![
        own(ReasoningFormat::ReasoningContent, "I should look."),
        own(ReasoningFormat::ReasoningField, "not for groq"),
        own(ReasoningFormat::MistralThinking, "not sent"),
        ContentPart::Reasoning(details),
        ContentPart::Reasoning(gemini),
        ContentPart::Reasoning(Reasoning::new(
            "anthropic",
            ReasoningFormat::AnthropicThinking,
            "another provider's",
        )),
        ContentPart::Reasoning(Reasoning::new(
            "other",
            ReasoningFormat::ReasoningContent,
            "another server's",
        )),
    ]);
    answer.tool_calls = vec![ToolCall::with_id("c1", "look", json!({}))];
    let request = ModelRequest::new(vec![Message::user("hi"), answer]);
    let model = OpenAiModel::compatible("deepseek", "deepseek-chat", "http://x");
    let body = model.request_body(&request, false);
    let m = &body["messages"][1];
    assert_eq!(m["reasoning_content"], "I should look.");
    assert!(m.get("reasoning").is_none(), "{m}");
    assert_eq!(
        m["reasoning_details"],
        json!([{"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0,
                "text": "t", "signature": "sig"}])
    );
    assert_eq!(
        m["tool_calls"][0]["extra_content"]["google"]["thought_signature"],
        "gsig"
    );
    assert!(!m.to_string().contains("another"), "{m}");
    // Switched off: nothing goes back.
    let quiet = model.send_reasoning(false).request_body(&request, false);
    let m = &quiet["messages"][1];
    assert!(m.get("reasoning_content").is_none() && m.get("reasoning_details").is_none());
    assert!(m["tool_calls"][0].get("extra_content").is_none());
}

/// Every call of an answer with many signed calls goes back with its own signature; a call
/// without one gets none. Each call once searched every signature, allocating per comparison.
#[test]
fn many_signed_calls_each_carry_their_own_signature() {
    for n in [16, 30_000] {
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for i in 0..n {
            calls.push(ToolCall::with_id(format!("c{i}"), "look", json!({})));
            if i % 3 != 0 {
                parts.push(ContentPart::Reasoning(
                    Reasoning::new("gemini", ReasoningFormat::GeminiThoughtSignature, "")
                        .with_signature(format!("sig{i}"))
                        .with_raw(json!({"tool_call_id": format!("c{i}")})),
                ));
            }
        }
        let mut answer = Message::assistant(parts);
        answer.tool_calls = calls;
        let request = ModelRequest::new(vec![Message::user("hi"), answer]);
        let model = OpenAiModel::compatible("gemini", "gemini-2.5-pro", "http://x");
        let body = model.request_body(&request, false);
        let sent = body["messages"][1]["tool_calls"].as_array().unwrap();
        assert_eq!(sent.len(), n);
        for (i, call) in sent.iter().enumerate() {
            let signature = &call["extra_content"]["google"]["thought_signature"];
            if i % 3 == 0 {
                assert!(call.get("extra_content").is_none(), "{call}");
            } else {
                assert_eq!(signature, &json!(format!("sig{i}")));
            }
        }
    }
}

#[test]
fn reasoning_models_options_and_tools() {
    let mut request = ModelRequest::new(vec![Message::system("rule"), Message::user("hi")])
        .system("sys")
        .tools(vec![
            ToolSpec::new("a", "A.", json!({"type": "object"})).strict(true),
            ToolSpec::new("b", "B.", json!({"type": "object"})),
        ]);
    request.options = crate::model::ModelOptions::default()
        .reasoning_effort("high")
        .parallel_tool_calls(false)
        .max_tokens(50);
    let model = OpenAiModel::new("o3-mini", "k").builtin_tool(json!({"type": "web_search"}));
    let body = model.request_body(&request, true);
    assert_eq!(body["messages"][0]["role"], "developer");
    assert_eq!(body["messages"][1]["role"], "developer");
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["max_completion_tokens"], 50);
    assert_eq!(body["tools"][0]["function"]["strict"], true);
    assert!(body["tools"][1]["function"].get("strict").is_none());
    assert_eq!(body["tools"][2], json!({"type": "web_search"}));
    assert_eq!(body["stream_options"]["include_usage"], true);
    let quiet = OpenAiModel::compatible("x", "m", "http://x").stream_usage(false);
    let body = quiet.request_body(&request, true);
    assert!(body.get("stream_options").is_none());
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["max_tokens"], 50);
    // Built-in tools alone: no tool_choice (it names kit's tools).
    let only_builtin = model.request_body(&ModelRequest::new(vec![Message::user("x")]), false);
    assert_eq!(only_builtin["tools"], json!([{"type": "web_search"}]));
    assert!(only_builtin.get("tool_choice").is_none());
}

fn parse(body: Value) -> crate::model::ModelResponse {
    OpenAiModel::compatible("srv", "m", "http://x")
        .parse_response(&body)
        .unwrap()
}

/// Arguments sent as a JSON object (not a string) are kept as deep as arguments may nest, and
/// as their text beyond, as streamed ones are.
#[test]
fn object_arguments_deeper_than_arguments_may_nest_are_kept_as_text() {
    let nested = |levels: usize| (0..levels).fold(json!(1), |v, _| json!([v]));
    let call = |id: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": "t", "arguments": args}});
    let r = parse(
        json!({"choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [call("a", json!({"x": nested(63)})), call("b", json!({"x": nested(64)}))]},
        "finish_reason": "tool_calls"}]}),
    );
    assert_eq!(r.message.tool_calls[0].args, json!({"x": nested(63)}));
    assert!(r.message.tool_calls[1].args.is_string());
}

#[test]
fn answers_with_parts_reasoning_and_id_less_calls() {
    // Mistral's reasoning models: `content` is an array of thinking and text chunks.
    let r = parse(
        json!({"id": "a", "choices": [{"message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see."}]},
        {"type": "text", "text": "Paris."}]}, "finish_reason": "stop"}]}),
    );
    assert_eq!(r.message.text(), "Paris.");
    let reasoning: Vec<_> = r.message.content.reasoning().collect();
    assert_eq!(reasoning[0].text, "Let me see.");
    assert_eq!(reasoning[0].format, ReasoningFormat::MistralThinking);
    // Two calls with `id: ""`: distinct ids, stable for the response.
    let calls = json!({"id": "resp-9", "choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [
            {"id": "", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
        "finish_reason": ""}]});
    let r = parse(calls.clone());
    assert_ne!(r.message.tool_calls[0].id, r.message.tool_calls[1].id);
    assert_eq!(r.message.tool_calls, parse(calls).message.tool_calls);
    assert_eq!(
        r.finish_reason,
        FinishReason::ToolCalls,
        "a blank reason is no reason"
    );
    // Usage in the servers' own fields.
    let r = parse(
        json!({"choices": [{"message": {"content": "x"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 30, "prompt_cache_hit_tokens": 60,
                  "completion_tokens_details": {"reasoning_tokens": 20}, "cost": 0.0012}}),
    );
    let u = r.message.usage.unwrap();
    assert_eq!((u.cache_read_tokens, u.reasoning_tokens), (60, 20));
    assert_eq!(r.finish_reason, FinishReason::Length);
    assert_eq!(r.message.metadata["cost_usd"], 0.0012);
}

#[test]
fn stream_pieces_without_index_start_a_call_by_id() {
    let mut p = ChunkParser::new("srv", "m");
    let mut out = VecDeque::new();
    for data in [
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"a","arguments":"{\"q\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"y","function":{"name":"b","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":""}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ] {
        let event = SseEvent {
            data: data.into(),
            ..Default::default()
        };
        p.on_event(event, &mut out).unwrap();
    }
    p.at_end(&mut out).unwrap();
    let mut a = crate::model::StreamAssembler::new();
    out.iter().for_each(|c| a.push(c));
    let r = a.finish();
    let calls = &r.message.tool_calls;
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].args["q"].clone()),
        ("x", json!(1))
    );
    assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("y", "b"));
    assert!(matches!(out.back(), Some(ModelChunk::Metadata { .. })));
}

/// The answer a stream of Chat Completions chunks assembles to.
fn assemble_chunks(chunks: &[&str]) -> crate::model::ModelResponse {
    let mut p = ChunkParser::new("srv", "m");
    let mut out = VecDeque::new();
    for data in chunks {
        let event = SseEvent {
            data: (*data).into(),
            ..Default::default()
        };
        p.on_event(event, &mut out).unwrap();
    }
    p.at_end(&mut out).unwrap();
    let mut a = crate::model::StreamAssembler::new();
    out.iter().for_each(|c| a.push(c));
    a.finish()
}

#[test]
fn parallel_calls_all_numbered_zero_stay_apart() {
    // Ollama's OpenAI-compatible stream: each parallel call whole, every one at index 0.
    let r = assemble_chunks(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"w","arguments":"{\"p\":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","type":"function","function":{"name":"w","arguments":"{\"p\":2}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"v","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let calls: Vec<_> = r
        .message
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.args.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("a", "w", json!({"p": 1})),
            ("b", "w", json!({"p": 2})),
            ("c", "v", json!({}))
        ]
    );
}

#[test]
fn interleaved_pieces_by_index_continue_their_own_call() {
    // OpenAI's shape: the id on the first piece only, later pieces by index, interleaved; a
    // server repeating the id on every piece continues the call too.
    let r = assemble_chunks(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"w","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"v","arguments":"{\"q\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"p\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"arguments":":2}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let calls: Vec<_> = r
        .message
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.args.clone()))
        .collect();
    assert_eq!(
        calls,
        [("a", "w", json!({"p": 1})), ("b", "v", json!({"q": 2}))]
    );
}

#[test]
fn a_fresh_id_per_piece_continues_the_call_its_index_names() {
    // Servers that send a new id with every piece of one call (no name after the first).
    let r = assemble_chunks(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"p1","function":{"name":"w","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"p2","function":{"arguments":"{\"p\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"p3","function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let calls = &r.message.tool_calls;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].args.clone()),
        ("w", json!({"p": 1}))
    );
    // One id at two indexes: two calls, as the indexes say.
    let r = assemble_chunks(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"a","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"x","function":{"name":"b","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let names: Vec<&str> = r
        .message
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn stream_without_end_is_malformed() {
    let mut p = ChunkParser::new("openai", "gpt-4o-mini");
    assert!(p.at_end(&mut VecDeque::new()).is_err());
    let mut out = VecDeque::new();
    let bad = SseEvent {
        data: "{not json".into(),
        ..Default::default()
    };
    assert!(matches!(
        p.on_event(bad, &mut out),
        Err(ModelError::MalformedResponse { .. })
    ));
}
