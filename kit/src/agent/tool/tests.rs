use super::*;
use serde_json::json;

fn add() -> Tool {
    Tool::from_fn(
        "add",
        "Adds.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        |args, _| async move {
            if args["a"] == 13 {
                return Err(ToolError::new("unlucky"));
            }
            if args["a"] == 99 {
                panic!("oops");
            }
            Ok(ToolOutput::text(
                (args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string(),
            ))
        },
    )
}

async fn run(tool: &Tool, args: Value) -> Message {
    tool.execute(
        &ToolCall::with_id("c1", "add", args),
        ToolContext::detached(),
    )
    .await
    .expect("the tool does not pause")
    .message
}

#[tokio::test]
async fn every_failure_becomes_an_error_result() {
    let t = add();
    let ok = run(&t, json!({"a": 1, "b": 2})).await;
    assert_eq!(ok.text(), "3");
    assert!(!ok.is_error());
    assert_eq!(ok.tool_call_id.as_deref(), Some("c1"));
    let missing = run(&t, json!({"a": 1})).await;
    assert!(missing.is_error());
    assert!(
        missing.text().contains("`b` is required"),
        "{}",
        missing.text()
    );
    let typed = run(&t, json!({"a": "x", "b": 2})).await;
    assert!(
        typed.text().contains("`a`: expected integer"),
        "{}",
        typed.text()
    );
    let raw = run(&t, Value::String("{a: 1".into())).await;
    assert!(raw.text().contains("not valid JSON"), "{}", raw.text());
    // Arguments too deep to keep arrive as their text (see `parse_args`): said so.
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let deep = run(&t, crate::model::parse_args(&deep)).await;
    assert!(
        deep.text().contains("nest more than 64 levels deep"),
        "{}",
        deep.text()
    );
    let failed = run(&t, json!({"a": 13, "b": 0})).await;
    assert_eq!(failed.text(), "Error: unlucky");
    let panicked = run(&t, json!({"a": 99, "b": 0})).await;
    assert!(panicked.is_error());
    assert!(panicked.text().contains("oops"));
}

#[tokio::test]
async fn long_results_are_truncated_with_a_marker() {
    let t = Tool::from_fn("long", "Long.", json!({"type": "object"}), |_, _| async {
        Ok::<_, ToolError>("é".repeat(50))
    })
    .with_max_result_chars(10);
    let m = t
        .execute(
            &ToolCall::with_id("c", "long", json!({})),
            ToolContext::detached(),
        )
        .await
        .expect("the tool does not pause")
        .message;
    assert!(m.text().starts_with("éééééééééé\n"), "{}", m.text());
    assert!(m.text().contains("showing 10 of 50 characters"));
}
