//! An agent with a filesystem: parallel writes, the same-path guard, an edit, a search and a
//! paged read — first in the agent state, then in a real directory.
//!
//! Run it with `cargo run --example filesystem`. It uses the scripted model (offline,
//! deterministic).

use std::path::PathBuf;

use kit::agent::AgentState;
use kit::testing::ScriptedModel;
use kit::{Message, Role, ToolCall};
use serde_json::{Value, json};

/// Organises notes; its files live in the agent's state (`filesystem`).
#[kit::agent(model = script(), filesystem)]
struct Organiser;

/// The same agent with its files in a real directory (`filesystem(dir = ..)`).
#[kit::agent(model = script(), filesystem(dir = workspace()))]
struct DiskOrganiser;

/// The directory `DiskOrganiser` works in (created when the agent is built).
fn workspace() -> PathBuf {
    std::env::temp_dir().join(format!("kit-filesystem-example-{}", std::process::id()))
}

fn print_results(state: &AgentState) {
    for m in state.messages.iter().filter(|m| m.role == Role::Tool) {
        let name = m.name.as_deref().unwrap_or("?");
        let status = if m.is_error() { " (error)" } else { "" };
        println!("← {name}{status}: {}", m.text().replace('\n', "\n    "));
    }
    println!("answer: {}", state.final_text());
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("== files in the agent state ==");
    let state = Organiser::invoke("Organise my notes").await?.into_state();
    print_results(&state);
    println!(
        "files in state: {:?}",
        state.files.keys().collect::<Vec<_>>()
    );

    println!("\n== files in a directory ==");
    let state = DiskOrganiser::invoke("Organise my notes")
        .await?
        .into_state();
    print_results(&state);
    let root = workspace();
    let todo = std::fs::read_to_string(root.join("todo.md"))?;
    println!("on disk, todo.md: {todo:?}");
    std::fs::remove_dir_all(&root)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in model: three parallel writes (two to the same path), then an edit, a
// search and a listing, then a paged read, then the answer.

fn turn(calls: &[(&str, &str, Value)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        calls
            .iter()
            .map(|(id, name, args)| ToolCall::with_id(*id, *name, args.clone()))
            .collect(),
    )
}

fn script() -> ScriptedModel {
    let notes: String = (1..=250).map(|i| format!("note {i}\n")).collect();
    ScriptedModel::new([
        turn(&[
            (
                "w1",
                "write_file",
                json!({"file_path": "/todo.md", "content": "- buy milk\n- call Bob\n"}),
            ),
            (
                "w2",
                "write_file",
                json!({"file_path": "notes/log.txt", "content": notes}),
            ),
            (
                "w3",
                "write_file",
                json!({"file_path": "/todo.md", "content": "clobbered"}),
            ),
        ]),
        turn(&[
            (
                "e1",
                "edit_file",
                json!({"file_path": "/todo.md", "old_string": "Bob", "new_string": "Alice"}),
            ),
            (
                "g1",
                "grep",
                json!({"pattern": "note 12", "output_mode": "count"}),
            ),
            ("l1", "ls", json!({"path": "/"})),
        ]),
        turn(&[(
            "r1",
            "read_file",
            json!({"file_path": "/notes/log.txt", "offset": 100, "limit": 3}),
        )]),
        Message::assistant("Done: the todo list is updated and the log has 250 notes."),
    ])
}
