use super::wire::image_block;
use super::*;
use crate::message::ImageSource;

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
