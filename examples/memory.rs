//! Memory across processes: a conversation resumed from SQLite by a second process.
//!
//! Run it with `cargo run --example memory`. The first process talks to an agent (a scripted
//! model, no network) on thread `conversation-1`, with a `SqliteCheckpointer` on a file, then
//! exits its agent and starts this same program again as a second process. The second process
//! opens the same file, continues the same thread, and prints the conversation it restored.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use kit::checkpoint::{Checkpointer, SqliteCheckpointer};
use kit::testing::ScriptedModel;
use kit::{Message, Role, RunOptions};

const THREAD: &str = "conversation-1";
const SECOND: &str = "--second-process";

/// Chats, remembering each thread in the SQLite file `db()`.
#[kit::agent(
    model = companion_model(),
    checkpointer = Arc::new(SqliteCheckpointer::open(db())?),
)]
struct Companion;

/// The checkpoint file, chosen by `main` before the agent is built.
static DB: OnceLock<PathBuf> = OnceLock::new();

fn db() -> PathBuf {
    DB.get().cloned().unwrap_or_default()
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("memory example: {message}");
    std::process::exit(1)
}

fn role(m: &Message) -> &'static str {
    match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
        Role::Remove => "remove",
    }
}

/// Turn 1, in the first process.
async fn first_turn(db: &Path) {
    println!(
        "[process 1, pid {}] opening {}",
        std::process::id(),
        db.display()
    );
    // `build()` makes a fresh instance, dropped (closing the file) when this function returns;
    // `Companion::agent()` would keep one open for the whole process.
    let agent = Companion::build().unwrap_or_else(|e| fail(e));
    let input = "Hi, I'm Ada and my favourite colour is green.";
    let out = agent
        .invoke(input)
        .thread_id(THREAD)
        .await
        .unwrap_or_else(|e| fail(e));
    println!("[process 1] user: {input}");
    println!("[process 1] assistant: {}", out.state().final_text());
    println!("[process 1] turn 1 is checkpointed; exiting the agent and starting process 2");
}

/// Turn 2, in the second process: only the file connects it to the first.
async fn second_turn(db: &Path) {
    println!(
        "[process 2, pid {}] opening {}",
        std::process::id(),
        db.display()
    );
    let checkpointer = SqliteCheckpointer::open(db).unwrap_or_else(|e| fail(e));
    for t in checkpointer.threads().await.unwrap_or_else(|e| fail(e)) {
        println!(
            "[process 2] found thread {} ({} checkpoints, last update {})",
            t.thread_id, t.checkpoints, t.updated_at
        );
    }
    let agent = Companion::build().unwrap_or_else(|e| fail(e));
    let opts = RunOptions::new().thread_id(THREAD);
    let out = agent
        .invoke("What do you remember about me?")
        .options(&opts)
        .await
        .unwrap_or_else(|e| fail(e));
    let messages = &out.state().messages;
    println!(
        "[process 2] restored {} messages from turn 1, the conversation is now:",
        messages.len() - 2
    );
    for m in messages {
        println!("  {}: {}", role(m), m.text());
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let (Some(flag), Some(db)) = (args.get(1), args.get(2))
        && flag == SECOND
    {
        let _ = DB.set(PathBuf::from(db));
        second_turn(Path::new(db)).await;
        return;
    }
    // A fresh file for this run.
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(format!("temporary directory: {e}")));
    let db = dir.path().join("memory.sqlite");
    let _ = DB.set(db.clone());
    first_turn(&db).await;

    let exe = std::env::current_exe().unwrap_or_else(|e| fail(e));
    let status = std::process::Command::new(exe)
        .arg(SECOND)
        .arg(&db)
        .status()
        .unwrap_or_else(|e| fail(format!("could not start the second process: {e}")));
    if !status.success() {
        fail(format!("the second process failed: {status}"));
    }
    println!("[process 1] the second process continued the conversation from the file");
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in model. It answers from what it is sent: on turn 2 it can only quote
// turn 1 if the conversation was restored from the file.

fn companion_model() -> ScriptedModel {
    ScriptedModel::from_fn(|request| {
        let said: Vec<String> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(Message::text)
            .collect();
        Ok(Message::assistant(match said.as_slice() {
            [first, _, ..] => format!(
                "You told me earlier: \"{first}\" (I was sent {} messages).",
                request.messages.len()
            ),
            _ => "Nice to meet you, Ada! Green it is.".to_string(),
        }))
    })
}
