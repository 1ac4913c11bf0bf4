use serde_json::{Value, json};

use super::wire::{image_block, turns};
use super::*;
use crate::message::{ContentPart, ImageSource, Message, Reasoning, ReasoningFormat, ToolCall};
use crate::model::{ModelOptions, ToolSpec};

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

/// Tool results and user texts interleaved into one turn keep their order within each kind,
/// results first, at any length: merging once scanned the turn for every result.
#[test]
fn a_turn_merged_from_many_results_and_texts_is_built_in_one_pass() {
    for n in [64, 50_000] {
        let mut conversation = vec![Message::user("go")];
        conversation.push(Message::assistant_with_tool_calls(
            "",
            (0..n)
                .map(|i| ToolCall::with_id(format!("c{i}"), "t", json!({})))
                .collect(),
        ));
        for i in 0..n {
            conversation.push(Message::tool(format!("c{i}"), "r"));
            conversation.push(Message::user(format!("note {i}")));
        }
        let (_, turns) = turns(&conversation);
        assert_eq!(turns.len(), 3);
        let content = turns[2]["content"].as_array().unwrap();
        assert_eq!(content.len(), 2 * n);
        for i in 0..n {
            assert_eq!(content[i]["tool_use_id"], format!("c{i}"), "{n}");
            assert_eq!(content[n + i]["text"], format!("note {i}"), "{n}");
        }
    }
}

#[test]
fn thinking_and_server_blocks_go_back_unchanged_and_in_order() {
    let mut answer = Message::assistant(vec![
        ContentPart::Reasoning(
            Reasoning::new("anthropic", ReasoningFormat::AnthropicThinking, "Think.")
                .with_signature("EqQBsig=="),
        ),
        ContentPart::Reasoning(
            Reasoning::new("anthropic", ReasoningFormat::AnthropicThinking, "")
                .with_encrypted("EmwKAhgBredacted"),
        ),
        ContentPart::ProviderBlock {
            provider: "anthropic".into(),
            block: json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}),
        },
        ContentPart::Reasoning(Reasoning::new(
            "deepseek",
            ReasoningFormat::ReasoningContent,
            "not ours",
        )),
        ContentPart::text("Looking."),
    ]);
    answer.tool_calls = vec![ToolCall::with_id("toolu_1", "look", json!({"q": 1}))];
    let (_, turns) = turns(&[Message::user("go"), answer]);
    let blocks = turns[1]["content"].as_array().unwrap();
    let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "thinking",
            "redacted_thinking",
            "server_tool_use",
            "text",
            "tool_use"
        ]
    );
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": "Think.", "signature": "EqQBsig=="})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBredacted"})
    );
}

#[test]
fn thinking_caching_server_tools_and_parallel_calls_in_the_body() {
    let model = AnthropicModel::new("claude-sonnet-4-5", "k")
        .thinking(2048)
        .prompt_cache(PromptCache::all().ttl(CacheTtl::OneHour))
        .server_tool(json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2}));
    let mut request = ModelRequest::new(vec![Message::user("q")])
        .system("sys")
        .tools(vec![ToolSpec::new(
            "look",
            "Look.",
            json!({"type": "object"}),
        )]);
    request.options = ModelOptions::default().parallel_tool_calls(false);
    let body = model.request_body(&request, false);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], 2048 + 8192);
    let control = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(body["system"][0]["cache_control"], control);
    assert_eq!(body["tools"][1]["name"], "web_search");
    assert_eq!(body["tools"][1]["cache_control"], control);
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], control);
    assert_eq!(body["tool_choice"]["disable_parallel_tool_use"], true);
    // Without caching, nothing is marked and the system prompt stays a string.
    let plain = AnthropicModel::new("claude-haiku-4-5", "k").request_body(&request, false);
    assert_eq!(plain["system"], "sys");
    assert!(!plain.to_string().contains("cache_control"));
}

#[test]
fn every_stop_reason_is_mapped() {
    use crate::model::FinishReason as F;
    for (wire, kit) in [
        ("end_turn", F::Stop),
        ("stop_sequence", F::Stop),
        ("tool_use", F::ToolCalls),
        ("max_tokens", F::Length),
        ("model_context_window_exceeded", F::Length),
        ("refusal", F::ContentFilter),
        ("pause_turn", F::Other("pause_turn".into())),
    ] {
        assert_eq!(super::wire::stop_reason(wire), Some(kit), "{wire}");
    }
    assert_eq!(super::wire::stop_reason(""), None);
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

#[test]
fn a_stream_event_without_data_is_skipped() {
    // A keep-alive with an empty `data:` line, between Anthropic's real events.
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n\
                event: ping\ndata:\n\n\
                event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
                data: \n\n\
                event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
                event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n\
                event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let model = AnthropicModel::new("claude-sonnet-4-5", "k");
    let answer = model
        .replay_stream(body.as_bytes(), &crate::http::HttpLimits::default())
        .unwrap();
    assert_eq!(answer.message.text(), "Hi");
    // Bad data is still an error: only an empty event is skipped.
    let bad = body.replace("data:\n\n", "data: {oops\n\n");
    assert!(
        model
            .replay_stream(bad.as_bytes(), &crate::http::HttpLimits::default())
            .is_err()
    );
}
