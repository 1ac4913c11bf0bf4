//! The filesystem middleware in real agents driven by a scripted model: parallel writes and
//! the files reducer, the same-path guard, path escapes (state and a real directory), files
//! restored from a checkpointer, and large-result eviction.

use std::sync::Arc;

use kit::agent::{Agent, AgentState};
use kit::middleware::filesystem::{DirectoryBackend, FilesystemMiddleware, FsTool};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{MemoryCheckpointer, Message, Role, RunOptions, ToolCall, ToolStatus};
use serde_json::{Value, json};

fn calls(list: &[(&str, &str, Value)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.iter()
            .map(|(id, name, args)| ToolCall::with_id(*id, *name, args.clone()))
            .collect(),
    )
}

/// The tool result answering `id`.
fn result<'a>(state: &'a AgentState, id: &str) -> &'a Message {
    state
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no result for {id}"))
}

fn agent(model: &ScriptedModel, fs: FilesystemMiddleware) -> Agent {
    Agent::builder()
        .model(model.clone())
        .filesystem(fs)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_model_sees_the_tools_and_the_prompt_section() {
    let model = ScriptedModel::new([Message::assistant("ok")]);
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("You are helpful.")
        .filesystem(FilesystemMiddleware::new())
        .build()
        .unwrap();
    assert_eq!(
        agent.tool_names(),
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
    agent.invoke("hi").await.unwrap();
    let system = model.requests()[0].system.clone().unwrap();
    assert!(
        system.starts_with("You are helpful.\n\n## Filesystem tools `ls`"),
        "{system}"
    );

    let read_only = Agent::builder()
        .model(ScriptedModel::new(Vec::<Message>::new()))
        .filesystem(FilesystemMiddleware::new().expose([FsTool::Ls, FsTool::Grep]))
        .build()
        .unwrap();
    assert_eq!(read_only.tool_names(), ["ls", "read_file", "grep"]);
}

#[tokio::test]
async fn parallel_writes_to_different_paths_all_land_and_later_turns_see_them() {
    let model = ScriptedModel::new([
        calls(&[
            (
                "w1",
                "write_file",
                json!({"file_path": "/a.txt", "content": "alpha\n"}),
            ),
            (
                "w2",
                "write_file",
                json!({"file_path": "docs/b.md", "content": "# beta\n"}),
            ),
            (
                "w3",
                "write_file",
                json!({"file_path": "/docs/c.md", "content": "gamma\n"}),
            ),
        ]),
        calls(&[
            ("l1", "ls", json!({"path": "/"})),
            ("g1", "glob", json!({"pattern": "*.md"})),
            (
                "e1",
                "edit_file",
                json!({"file_path": "/a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
            ),
            ("d1", "delete", json!({"file_path": "/docs/c.md"})),
        ]),
        calls(&[
            ("r1", "read_file", json!({"file_path": "/a.txt"})),
            (
                "s1",
                "grep",
                json!({"pattern": "beta", "output_mode": "content"}),
            ),
        ]),
        Message::assistant("done"),
    ]);
    let state = agent(&model, FilesystemMiddleware::new())
        .invoke("write three files")
        .await
        .unwrap()
        .into_state();

    assert_eq!(
        state.files.keys().collect::<Vec<_>>(),
        ["/a.txt", "/docs/b.md"],
        "three parallel writes merged, then one delete removed its key"
    );
    assert_eq!(state.files["/a.txt"].content, "ALPHA\n");
    for id in ["w1", "w2", "w3"] {
        assert!(!result(&state, id).is_error());
    }
    assert_eq!(result(&state, "w2").text(), "Updated file /docs/b.md");
    // The second turn saw all three files (the writes applied at the barrier).
    assert_eq!(result(&state, "l1").text(), "['/a.txt', '/docs/']");
    assert_eq!(result(&state, "g1").text(), "['/docs/b.md', '/docs/c.md']");
    assert_eq!(
        result(&state, "e1").text(),
        "Successfully replaced 1 instance(s) of the string in '/a.txt'"
    );
    assert_eq!(result(&state, "d1").text(), "Deleted /docs/c.md");
    assert_eq!(result(&state, "r1").text(), "@@ lines 1-1 of 1 @@\nALPHA");
    assert_eq!(result(&state, "s1").text(), "/docs/b.md:\n  1: # beta");
    assert_eq!(state.final_text(), "done");
}

#[tokio::test]
async fn a_second_mutation_of_the_same_path_in_one_turn_is_refused_and_never_runs() {
    let model = ScriptedModel::new([
        calls(&[
            (
                "c1",
                "write_file",
                json!({"file_path": "/a.txt", "content": "first"}),
            ),
            (
                "c2",
                "write_file",
                json!({"file_path": "a.txt", "content": "second"}),
            ),
            (
                "c3",
                "write_file",
                json!({"file_path": "/b.txt", "content": "b"}),
            ),
            ("c4", "read_file", json!({"file_path": "/a.txt"})),
        ]),
        calls(&[
            (
                "c5",
                "edit_file",
                json!({"file_path": "/a.txt", "old_string": "first", "new_string": "1st"}),
            ),
            ("c6", "delete", json!({"file_path": "/./a.txt"})),
        ]),
        Message::assistant("done"),
    ]);
    let state = agent(&model, FilesystemMiddleware::new())
        .invoke("go")
        .await
        .unwrap()
        .into_state();
    let refused = "Error: parallel file mutations to the same path are not allowed.";
    assert_eq!(result(&state, "c1").text(), "Updated file /a.txt");
    assert_eq!(result(&state, "c2").text(), refused);
    assert_eq!(result(&state, "c2").status, Some(ToolStatus::Error));
    assert_eq!(result(&state, "c3").text(), "Updated file /b.txt");
    // A read in the same turn is no mutation; it sees the files as the turn began.
    assert_eq!(
        result(&state, "c4").text(),
        "Error: File '/a.txt' not found"
    );
    assert_eq!(
        result(&state, "c5").text(),
        "Successfully replaced 1 instance(s) of the string in '/a.txt'"
    );
    assert_eq!(result(&state, "c6").text(), refused);
    // The first call of each turn won; the refused ones never ran.
    assert_eq!(state.files["/a.txt"].content, "1st");
    assert_eq!(state.files["/b.txt"].content, "b");
    // Every call has exactly one result, and the model saw them all.
    let tool_results = state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .count();
    assert_eq!(tool_results, 6);
    let second = &model.requests()[1];
    assert_eq!(
        second
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        4
    );
}

#[tokio::test]
async fn path_escapes_are_refused_in_the_state_backend() {
    let model = ScriptedModel::new([
        calls(&[
            (
                "e1",
                "write_file",
                json!({"file_path": "../escape.txt", "content": "x"}),
            ),
            (
                "e2",
                "write_file",
                json!({"file_path": "/a/../../escape.txt", "content": "x"}),
            ),
            ("e3", "read_file", json!({"file_path": "/../../etc/passwd"})),
            ("e4", "ls", json!({"path": ".."})),
            ("e5", "delete", json!({"file_path": "~/x"})),
            ("e6", "grep", json!({"pattern": "x", "path": "/.."})),
            (
                "e7",
                "write_file",
                json!({"file_path": "/a/../inside.txt", "content": "ok"}),
            ),
        ]),
        Message::assistant("done"),
    ]);
    let state = agent(&model, FilesystemMiddleware::new())
        .invoke("escape")
        .await
        .unwrap()
        .into_state();
    for id in ["e1", "e2", "e3", "e4", "e6"] {
        let m = result(&state, id);
        assert!(m.is_error(), "{id}");
        assert!(
            m.text().contains("goes above the root '/'"),
            "{id}: {}",
            m.text()
        );
    }
    assert!(result(&state, "e5").text().contains("starts with '~'"));
    // `..` that stays inside the root is normalised, not refused.
    assert_eq!(result(&state, "e7").text(), "Updated file /inside.txt");
    assert_eq!(state.files.keys().collect::<Vec<_>>(), ["/inside.txt"]);
}

/// A model's path of a megabyte is refused by its length, on every tool, and the error does not
/// repeat it; a path of a kibibyte works.
#[tokio::test]
async fn paths_longer_than_linux_allows_are_refused_without_being_echoed() {
    let long = format!("/{}", "x/".repeat(1 << 19));
    let kib = format!("/{}f.txt", "d/".repeat(509));
    let model = ScriptedModel::new([
        calls(&[
            (
                "w",
                "write_file",
                json!({"file_path": long, "content": "x"}),
            ),
            ("r", "read_file", json!({"file_path": long})),
            ("l", "ls", json!({"path": long})),
            ("g", "grep", json!({"pattern": "x", "path": long})),
            (
                "k",
                "write_file",
                json!({"file_path": kib, "content": "ok"}),
            ),
        ]),
        Message::assistant("done"),
    ]);
    let state = agent(&model, FilesystemMiddleware::new())
        .invoke("long paths")
        .await
        .unwrap()
        .into_state();
    for id in ["w", "r", "l", "g"] {
        let m = result(&state, id);
        assert!(m.is_error(), "{id}");
        assert!(m.text().contains("at most 4096"), "{id}: {}", m.text());
        assert!(m.text().len() < 300, "{id}: {} bytes", m.text().len());
    }
    assert_eq!(result(&state, "k").text(), format!("Updated file {kib}"));
    assert_eq!(state.files.keys().collect::<Vec<_>>(), [&kib]);
}

#[cfg(unix)]
#[tokio::test]
async fn the_directory_backend_stays_inside_its_root() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        root.path().join("secret-alias.txt"),
    )
    .unwrap();

    let model = ScriptedModel::new([
        calls(&[
            ("s1", "read_file", json!({"file_path": "/link/secret.txt"})),
            (
                "s2",
                "write_file",
                json!({"file_path": "/link/pwned.txt", "content": "x"}),
            ),
            ("s3", "read_file", json!({"file_path": "/secret-alias.txt"})),
            (
                "s4",
                "edit_file",
                json!({"file_path": "/secret-alias.txt", "old_string": "top", "new_string": "no"}),
            ),
            (
                "s5",
                "read_file",
                json!({"file_path": "../../../etc/passwd"}),
            ),
            (
                "s6",
                "write_file",
                json!({"file_path": "/../escape.txt", "content": "x"}),
            ),
            ("s7", "delete", json!({"file_path": "/link/secret.txt"})),
            (
                "s8",
                "write_file",
                json!({"file_path": "/notes/ok.txt", "content": "inside\n"}),
            ),
        ]),
        calls(&[
            ("t1", "ls", json!({"path": "/"})),
            ("t2", "grep", json!({"pattern": "secret"})),
            ("t3", "glob", json!({"pattern": "**/*.txt"})),
            ("t4", "read_file", json!({"file_path": "/notes/ok.txt"})),
        ]),
        Message::assistant("done"),
    ]);
    let fs = FilesystemMiddleware::new().backend(DirectoryBackend::new(root.path()).unwrap());
    let state = agent(&model, fs)
        .invoke("try to get out")
        .await
        .unwrap()
        .into_state();

    for id in ["s1", "s2", "s3", "s4", "s7"] {
        let m = result(&state, id);
        assert!(m.is_error(), "{id}: {}", m.text());
        assert!(
            m.text()
                .contains("leads outside the root directory through a symbolic link"),
            "{id}: {}",
            m.text()
        );
    }
    for id in ["s5", "s6"] {
        assert!(
            result(&state, id).text().contains("goes above the root"),
            "{id}"
        );
    }
    assert_eq!(result(&state, "s8").text(), "Updated file /notes/ok.txt");
    // Nothing outside changed; the legitimate write is on disk, not in the state.
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "top secret\n"
    );
    assert!(!outside.path().join("pwned.txt").exists());
    assert!(!root.path().parent().unwrap().join("escape.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes/ok.txt")).unwrap(),
        "inside\n"
    );
    assert!(
        state.files.is_empty(),
        "a directory backend writes no state"
    );
    // Links leading outside are hidden from listings and searches.
    assert_eq!(result(&state, "t1").text(), "['/notes/']");
    assert_eq!(result(&state, "t2").text(), "No matches found");
    assert_eq!(result(&state, "t3").text(), "['/notes/ok.txt']");
    assert_eq!(result(&state, "t4").text(), "@@ lines 1-1 of 1 @@\ninside");
}

#[tokio::test]
async fn files_are_restored_from_the_checkpointer_in_a_new_invocation() {
    let model = ScriptedModel::new([
        calls(&[(
            "w",
            "write_file",
            json!({"file_path": "/memory.md", "content": "The user is Ada.\n"}),
        )]),
        Message::assistant("Saved."),
        calls(&[("r", "read_file", json!({"file_path": "/memory.md"}))]),
        Message::assistant("You are Ada."),
        calls(&[("r2", "read_file", json!({"file_path": "/memory.md"}))]),
        Message::assistant("I do not know."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .filesystem(FilesystemMiddleware::new())
        .build()
        .unwrap();
    let thread = RunOptions::new().thread_id("thread-1");
    agent
        .invoke("I am Ada; remember it.")
        .options(&thread)
        .await
        .unwrap();
    let state = agent
        .invoke("Who am I?")
        .options(&thread)
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.files["/memory.md"].content, "The user is Ada.\n");
    assert_eq!(
        result(&state, "r").text(),
        "@@ lines 1-1 of 1 @@\nThe user is Ada."
    );
    // The model's request in the second invocation carried the file's content.
    let request = &model.requests()[3];
    assert_eq!(
        request.messages.last().unwrap().text(),
        "@@ lines 1-1 of 1 @@\nThe user is Ada."
    );

    // Another thread has its own (empty) filesystem.
    let other = agent
        .invoke("Who am I?")
        .thread_id("thread-2")
        .await
        .unwrap()
        .into_state();
    assert!(other.files.is_empty());
    assert_eq!(
        result(&other, "r2").text(),
        "Error: File '/memory.md' not found"
    );
}

#[tokio::test]
async fn large_results_are_evicted_and_paged_back_with_read_file() {
    let big: String = (1..=2000)
        .map(|i| format!("row {i:04} {}\n", "x".repeat(45)))
        .collect();
    assert!(big.len() > 100_000);
    let dump_content = big.clone();
    let dump = Tool::from_fn(
        "dump",
        "Dumps a large table.",
        json!({"type": "object", "properties": {}}),
        move |_args, _ctx| {
            let content = dump_content.clone();
            async move { Ok::<_, ToolError>(content) }
        },
    );
    // The id has characters a file name cannot hold: the name carries a hash of the id.
    let path = kit::middleware::filesystem::eviction_path("call.big/1");
    let path = path.as_str();
    assert!(
        path.starts_with("/large_tool_results/call_big_1-"),
        "{path}"
    );
    let model = ScriptedModel::new([
        calls(&[("call.big/1", "dump", json!({}))]),
        calls(&[(
            "p1",
            "read_file",
            json!({"file_path": path, "offset": 0, "limit": 100}),
        )]),
        calls(&[(
            "p2",
            "read_file",
            json!({"file_path": path, "offset": 1950, "limit": 100}),
        )]),
        Message::assistant("The table has 2000 rows."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(dump)
        .filesystem(FilesystemMiddleware::new())
        .build()
        .unwrap();
    let state = agent.invoke("dump the table").await.unwrap().into_state();

    // The model's next request showed the eviction message, not the 100k characters.
    let requests = model.requests();
    let evicted = requests[1].messages.last().unwrap().text();
    assert!(evicted.len() < 5_000, "{} chars", evicted.len());
    assert!(
        evicted.starts_with(&format!(
            "Tool result too large, the result of this tool call call.big/1 was saved in the \
             filesystem at this path: {path}\n"
        )),
        "{evicted}"
    );
    assert!(evicted.contains("It has 2000 lines"), "{evicted}");
    assert!(evicted.contains("offset=0 and limit=100"), "{evicted}");
    assert!(evicted.contains(&format!("     1\trow 0001 {}", "x".repeat(45))));
    assert!(evicted.contains("... [1990 lines truncated] ..."));
    assert!(evicted.contains(&format!("  2000\trow 2000 {}", "x".repeat(45))));
    assert!(
        !result(&state, "call.big/1").is_error(),
        "eviction keeps the status"
    );

    // The full result is in the files channel, and read_file pages through it.
    assert_eq!(state.files[path].content, big);
    let first = result(&state, "p1").text();
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines[0], "@@ lines 1-100 of 2000 | next offset 100 @@");
    assert_eq!(lines[1], format!("row 0001 {}", "x".repeat(45)));
    assert_eq!(lines.len(), 101);
    let last = result(&state, "p2").text();
    assert!(
        last.starts_with("@@ lines 1951-2000 of 2000 @@\nrow 1951 "),
        "{last}"
    );
    assert!(last.ends_with(&format!("row 2000 {}", "x".repeat(45))));

    // Filesystem tools are never evicted; small results are untouched.
    let model = ScriptedModel::new([
        calls(&[("r", "read_file", json!({"file_path": path, "limit": 2000}))]),
        Message::assistant("ok"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .filesystem(FilesystemMiddleware::new().max_output_chars(200_000))
        .build()
        .unwrap();
    let mut input = kit::agent::AgentStateUpdate::new().messages(vec![Message::user("read")]);
    input = input.files(std::collections::BTreeMap::from([(
        path.to_string(),
        Some(kit::agent::FileData::text(big.clone())),
    )]));
    let state = agent.invoke(input).await.unwrap().into_state();
    assert!(result(&state, "r").text().len() > 100_000);
    assert_eq!(state.files.len(), 1);
}
