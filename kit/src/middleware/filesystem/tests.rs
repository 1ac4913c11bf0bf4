//! The middleware: tool selection, prompt, the same-path guard and eviction.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::agent::FileData;
use crate::message::{ToolCall, ToolStatus};

fn names(fs: &FilesystemMiddleware) -> Vec<String> {
    fs.tools().iter().map(|t| t.name().to_string()).collect()
}

#[test]
fn tools_in_order_and_read_file_always_on() {
    let fs = FilesystemMiddleware::new();
    assert_eq!(
        names(&fs),
        [
            "ls",
            "read_file",
            "write_file",
            "edit_file",
            "delete",
            "glob",
            "grep"
        ]
    );
    assert_eq!(fs.hooks(), [Hook::AfterModel]);

    let read_only = FilesystemMiddleware::new().expose([FsTool::Grep, FsTool::Ls]);
    assert_eq!(names(&read_only), ["ls", "read_file", "grep"]);
    assert!(read_only.hooks().is_empty(), "no mutation tool, no hook");

    let minimal = FilesystemMiddleware::new().expose([]);
    assert_eq!(names(&minimal), ["read_file"]);
}

#[test]
fn system_prompt_describes_the_enabled_tools() {
    let prompt = FilesystemMiddleware::new().system_prompt().unwrap();
    assert!(prompt.starts_with(
        "## Filesystem tools `ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`, \
         `grep`"
    ));
    assert!(prompt.contains("- grep: search files for literal text"));
    assert!(prompt.contains("/large_tool_results/<tool_call_id>"));

    let prompt = FilesystemMiddleware::new()
        .expose([FsTool::Ls])
        .eviction_threshold(None)
        .system_prompt()
        .unwrap();
    assert!(prompt.starts_with("## Filesystem tools `ls`, `read_file`\n"));
    assert!(!prompt.contains("write_file"));
    assert!(!prompt.contains("same path"));
    assert!(!prompt.contains("Large tool results"));

    let custom = FilesystemMiddleware::new().prompt("Use the files.");
    assert_eq!(custom.system_prompt().as_deref(), Some("Use the files."));

    let described = FilesystemMiddleware::new().tool_description(FsTool::Grep, "Find text.");
    let grep = described
        .tools()
        .into_iter()
        .find(|t| t.name() == "grep")
        .unwrap();
    assert_eq!(grep.description(), "Find text.");
}

fn turn(calls: Vec<ToolCall>) -> AgentState {
    AgentState {
        messages: vec![
            Message::user("go"),
            Message::assistant_with_tool_calls("", calls),
        ]
        .into(),
        ..AgentState::default()
    }
}

#[test]
fn second_mutation_of_a_path_in_one_turn_is_refused() {
    let fs = FilesystemMiddleware::new();
    let state = turn(vec![
        ToolCall::with_id(
            "w1",
            "write_file",
            json!({"file_path": "/a.txt", "content": "1"}),
        ),
        ToolCall::with_id("r1", "read_file", json!({"file_path": "/a.txt"})),
        ToolCall::with_id(
            "e1",
            "edit_file",
            json!({"file_path": "a.txt", "old_string": "1", "new_string": "2"}),
        ),
        ToolCall::with_id(
            "w2",
            "write_file",
            json!({"file_path": "/b.txt", "content": "b"}),
        ),
        ToolCall::with_id("d1", "delete", json!({"file_path": "//a.txt"})),
        ToolCall::with_id(
            "bad",
            "write_file",
            json!({"file_path": "../x", "content": "x"}),
        ),
        ToolCall::with_id(
            "bad2",
            "write_file",
            json!({"file_path": "../x", "content": "x"}),
        ),
    ]);
    let refused = fs.refuse_parallel_mutations(&state);
    let ids: Vec<&str> = refused
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(ids, ["e1", "d1"]);
    for m in &refused {
        assert_eq!(m.status, Some(ToolStatus::Error));
        assert_eq!(
            m.text(),
            "Error: parallel file mutations to the same path are not allowed."
        );
    }
    assert_eq!(refused[0].name.as_deref(), Some("edit_file"));

    // Calls already answered (e.g. rejected by another middleware) never run, so they do not
    // count: with `w1` answered, `e1` is the first mutation of /a.txt.
    let mut answered = state.clone();
    answered
        .messages
        .push(Message::tool_error("w1", "rejected by a reviewer"));
    let ids: Vec<String> = fs
        .refuse_parallel_mutations(&answered)
        .iter()
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(ids, ["d1"]);

    // Disabled tools are not guarded (they are unknown tools).
    let read_only = FilesystemMiddleware::new().expose([FsTool::Ls]);
    assert!(read_only.refuse_parallel_mutations(&state).is_empty());
    // No assistant message: nothing to do.
    assert!(
        fs.refuse_parallel_mutations(&AgentState::default())
            .is_empty()
    );
}

fn execution(content: Content) -> ToolExecution {
    ToolExecution {
        message: Message {
            content,
            ..Message::tool("call/1", "")
        },
        update: None,
    }
}

#[tokio::test]
async fn large_results_are_evicted_to_the_state() {
    let fs = FilesystemMiddleware::new().eviction_threshold(Some(100));
    let call = ToolCall::with_id("call/1", "search", json!({}));
    let ctx = ToolContext::detached();
    let big: String = (1..=40).map(|i| format!("result line {i}\n")).collect();

    let mut small = execution(Content::Text("short".into()));
    fs.evict(&call, &ctx, &mut small).await;
    assert_eq!(small.message.text(), "short");
    assert!(small.update.is_none());

    let mut exec = execution(Content::Text(big.clone()));
    fs.evict(&call, &ctx, &mut exec).await;
    let text = exec.message.text();
    let path = eviction_path("call/1");
    assert!(path.starts_with("/large_tool_results/call_1-"), "{path}");
    assert!(
        text.starts_with(&format!(
            "Tool result too large, the result of this tool call call/1 was saved in the \
             filesystem at this path: {path}\n"
        )),
        "{text}"
    );
    assert!(text.contains("     1\tresult line 1\n"), "{text}");
    assert!(text.contains("... [30 lines truncated] ..."), "{text}");
    assert!(text.contains("    40\tresult line 40"), "{text}");
    let mut state = AgentState::default();
    crate::state::apply_one(&mut state, exec.update.unwrap()).unwrap();
    assert_eq!(state.files[&path].content, big);

    // Image parts survive; a tool's own update is kept.
    let mut exec = execution(Content::Parts(vec![
        ContentPart::text(big.clone()),
        ContentPart::image_url("https://example.com/x.png"),
    ]));
    exec.update = Some(AgentStateUpdate::new().files(BTreeMap::from([(
        "/own.txt".to_string(),
        Some(FileData::text("own")),
    )])));
    fs.evict(&call, &ctx, &mut exec).await;
    let Content::Parts(parts) = &exec.message.content else {
        panic!("parts expected");
    };
    assert_eq!(parts.len(), 2);
    assert!(matches!(parts[1], ContentPart::Image { .. }));
    let mut state = AgentState::default();
    crate::state::apply_one(&mut state, exec.update.unwrap()).unwrap();
    assert_eq!(state.files.keys().collect::<Vec<_>>(), [&path, "/own.txt"]);

    // Off: nothing happens.
    let off = FilesystemMiddleware::new().eviction_threshold(None);
    let mut exec = execution(Content::Text(big));
    off.evict(&call, &ctx, &mut exec).await;
    assert!(exec.update.is_none());
}

#[tokio::test]
async fn eviction_to_a_directory_writes_the_file_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FilesystemMiddleware::new()
        .backend(DirectoryBackend::new(dir.path()).unwrap())
        .eviction_threshold(Some(10));
    let call = ToolCall::with_id("c1", "search", json!({}));
    let mut exec = execution(Content::Text("x".repeat(50)));
    fs.evict(&call, &ToolContext::detached(), &mut exec).await;
    assert!(exec.update.is_none(), "no state change for a directory");
    assert!(exec.message.text().contains("/large_tool_results/c1"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("large_tool_results/c1")).unwrap(),
        "x".repeat(50)
    );
}

#[test]
fn tool_names_round_trip() {
    for t in FsTool::ALL {
        assert_eq!(FsTool::from_name(t.name()), Some(t));
    }
    assert_eq!(FsTool::from_name("execute"), None);
    let _ = Arc::new(FilesystemMiddleware::default());
}

/// Call ids as providers send them keep their names (deepagents' paths); ids that differ only
/// in characters a name cannot hold get different files; a kibibyte or a megabyte id makes a
/// name of at most 81 bytes, and the same id always the same name.
#[test]
fn eviction_paths_are_short_stable_and_do_not_collide() {
    for id in ["call_abc123", "toolu_01A09q90qw90lq917835lq9", "c-1"] {
        assert_eq!(sanitize_call_id(id), id);
    }
    let similar = ["call.1", "call:1", "call/1", "call_1", "call\\1", "callé1"];
    let names: std::collections::BTreeSet<String> =
        similar.iter().map(|id| sanitize_call_id(id)).collect();
    assert_eq!(names.len(), similar.len(), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("call_1") || n == "call_1")
    );
    assert_eq!(sanitize_call_id("../../etc"), sanitize_call_id("../../etc"));
    assert!(!sanitize_call_id("../../etc").contains('.'));
    for size in [1 << 10, 1 << 20] {
        let long = "a".repeat(size);
        let name = sanitize_call_id(&long);
        assert_eq!(name.len(), 64 + 17, "{size}");
        assert_ne!(name, sanitize_call_id(&"a".repeat(size + 1)));
        assert!(eviction_path(&long).len() < 120);
    }
    assert_eq!(sanitize_call_id(""), "unknown");
}
