//! Long-term memory: what an agent learns in one conversation, found again in the next.
//!
//! Run it with `cargo run --example memory_store` (offline: a scripted model plays the model,
//! and `HashEmbedder` stands in for an embedding model). The agent keeps facts in a SQLite
//! `SqliteStore` with semantic search, and its `/memories/` files in the same store, while
//! its other files stay in the thread. On Monday it learns; on Tuesday, a new thread, it
//! recalls by meaning and reads its notes back. Then the store is used directly: filters,
//! namespaces, a time to live.
//!
//! With a real model and embeddings: `model = "openai:gpt-4o-mini"` and
//! `IndexConfig::new(OpenAiEmbeddings::from_env()?, 1536)` (feature `embeddings`).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kit::checkpoint::SqliteCheckpointer;
use kit::middleware::filesystem::{
    CompositeBackend, FilesystemMiddleware, StateBackend, StoreBackend,
};
use kit::store::{
    Filter, IndexConfig, ListNamespaces, Namespace, PutOptions, Search, SqliteStore, Store,
};
use kit::testing::{HashEmbedder, ScriptedModel};
use kit::tool::{ToolContext, ToolError};
use kit::{Message, Role, ToolCall};
use serde_json::json;

/// Where the memories of the user live.
fn memories() -> Result<Namespace, kit::store::StoreError> {
    Namespace::new(["users", "ada", "memories"])
}

/// Saves a fact about the user for every later conversation.
#[kit::tool]
async fn remember(
    ctx: ToolContext,
    /// The fact, in one sentence.
    fact: String,
    /// What kind of fact: `preference`, `event` or `person`.
    kind: String,
) -> Result<String, ToolError> {
    let store = ctx.store().ok_or_else(|| ToolError::new("no store"))?;
    let key = format!("fact-{}", kit::ids::random());
    store
        .put(&memories()?, &key, json!({"text": fact, "kind": kind}))
        .await?;
    Ok(format!("Remembered: {fact}"))
}

/// Finds what is known about the user, most relevant first.
#[kit::tool]
async fn recall(
    ctx: ToolContext,
    /// What to look for, in plain words.
    query: String,
) -> Result<String, ToolError> {
    let store = ctx.store().ok_or_else(|| ToolError::new("no store"))?;
    let hits = store
        .search(&Search::new(memories()?).query(&query).limit(3))
        .await?;
    let lines: Vec<String> = hits
        .iter()
        .map(|h| {
            format!(
                "{:.2} {}",
                h.score.unwrap_or(0.0),
                h.value["text"].as_str().unwrap_or("")
            )
        })
        .collect();
    Ok(lines.join("\n"))
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::with_id(id, name, args)
}

/// Monday's turn, then Tuesday's: what a model would do with these tools.
fn script() -> ScriptedModel {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                call(
                    "m1",
                    "remember",
                    json!({"fact": "Ada drinks green tea, never coffee", "kind": "preference"}),
                ),
                call(
                    "m2",
                    "remember",
                    json!({"fact": "Ada moved to Lyon in March", "kind": "event"}),
                ),
                call(
                    "m3",
                    "remember",
                    json!({"fact": "Ada's sister Grace is a pilot", "kind": "person"}),
                ),
                call(
                    "m4",
                    "write_file",
                    json!({"file_path": "/memories/ada.md", "content": "# Ada\n- tea, not coffee\n- lives in Lyon\n"}),
                ),
                call(
                    "m5",
                    "write_file",
                    json!({"file_path": "/scratch.md", "content": "draft reply\n"}),
                ),
            ],
        ),
        Message::assistant("Noted, Ada."),
        Message::assistant_with_tool_calls(
            "",
            vec![
                call("t1", "recall", json!({"query": "tea or coffee for Ada"})),
                call("t2", "read_file", json!({"file_path": "/memories/ada.md"})),
                call("t3", "read_file", json!({"file_path": "/scratch.md"})),
            ],
        ),
        Message::assistant("Green tea — I remembered, and it is in my notes."),
    ])
}

/// The store: a SQLite file, searchable by meaning on each fact's text.
fn store() -> Result<SqliteStore, kit::store::StoreError> {
    SqliteStore::open(dir().join("memory.sqlite"))?
        .index(IndexConfig::new(HashEmbedder::new(256), 256).fields(["text"]))
}

/// Files: `/memories/` in the store (they outlive the thread), the rest in the thread.
fn files() -> Result<FilesystemMiddleware, kit::AgentError> {
    let routed = CompositeBackend::new(StateBackend::new())
        .route("/memories/", StoreBackend::new())
        .map_err(|e| kit::AgentError::Build(e.to_string()))?;
    Ok(FilesystemMiddleware::new().backend(routed))
}

/// An assistant that remembers its user across conversations.
#[kit::agent(
    model = script(),
    system_prompt = "You are Ada's assistant. Remember what matters; recall before answering.",
    tools = [Remember, Recall],
    filesystem = files()?,
    store = store()?,
    checkpointer = Arc::new(SqliteCheckpointer::open(dir().join("threads.sqlite"))?),
)]
struct Assistant;

static DIR: OnceLock<PathBuf> = OnceLock::new();

fn dir() -> PathBuf {
    DIR.get().cloned().unwrap_or_default()
}

fn show_tools(state: &kit::AgentState, from: usize) {
    for m in &state.messages[from..] {
        if m.role == Role::Tool {
            let status = if m.is_error() { " (error)" } else { "" };
            let name = m.name.as_deref().unwrap_or("?");
            for (i, line) in m.text().lines().enumerate() {
                let lead = if i == 0 {
                    format!("  ← {name}{status}: ")
                } else {
                    "      ".to_string()
                };
                println!("{lead}{line}");
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = PathBuf::from("target/kit-memory-store");
    let _ = std::fs::remove_dir_all(&target);
    std::fs::create_dir_all(&target)?;
    let _ = DIR.set(target.clone());

    println!("[monday] thread `monday`");
    let monday = Assistant::invoke(
        "I'm Ada. I only drink green tea; I moved to Lyon; my sister Grace flies planes.",
    )
    .thread_id("monday")
    .await?
    .into_state();
    show_tools(&monday, 0);
    println!("  assistant: {}", monday.final_text());
    let in_thread: Vec<&String> = monday.files.keys().collect();
    println!("  files kept in the thread: {in_thread:?}");

    println!("[tuesday] thread `tuesday` (a new conversation)");
    let tuesday = Assistant::invoke("What should you offer me to drink?")
        .thread_id("tuesday")
        .await?
        .into_state();
    show_tools(&tuesday, 0);
    println!("  assistant: {}", tuesday.final_text());

    // The store, used directly (a fresh handle on the same file).
    let store = store()?;
    let ns = memories()?;
    let events = store
        .search(&Search::new(ns.clone()).filter(Filter::new().eq("kind", "event")))
        .await?;
    println!(
        "[store] events: {:?}",
        events
            .iter()
            .filter_map(|e| e.value["text"].as_str())
            .collect::<Vec<_>>()
    );
    let namespaces = store.list_namespaces(&ListNamespaces::new()).await?;
    println!(
        "[store] namespaces: {}",
        namespaces
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let session = Namespace::new(["users", "ada", "session"])?;
    store
        .put_opts(
            &session,
            "mood",
            json!({"text": "in a hurry today"}),
            PutOptions::new().ttl(Duration::from_secs(1)),
        )
        .await?;
    let fresh = store.get(&session, "mood").await?.is_some();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let later = store.get(&session, "mood").await?.is_some();
    println!(
        "[store] a note for one second: there at first: {fresh}, after 1.2 s: {later}; swept {} expired item(s)",
        store.sweep_expired().await?
    );
    println!("[store] kept in {}", target.join("memory.sqlite").display());
    Ok(())
}
