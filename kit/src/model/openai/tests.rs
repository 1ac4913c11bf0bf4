use std::collections::VecDeque;

use super::*;
use crate::http::SseEvent;
use crate::message::ContentPart;
use crate::model::common::SseParser;

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
fn stream_without_end_is_malformed() {
    let mut p = ChunkParser {
        provider: "openai".into(),
        done: false,
        finished: false,
    };
    assert!(p.at_end().is_err());
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
