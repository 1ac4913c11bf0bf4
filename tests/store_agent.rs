//! The long-term store inside agents and graphs: an agent remembering across threads, and
//! `/memories/` files surviving a new thread (on memory, SQLite and PostgreSQL, across a
//! restart of the agent), subagents sharing their parent's store, middleware and graph nodes
//! reaching it, and what a run without one is told.

use std::sync::Arc;

use kit::agent::{Agent, AgentState, Hook, HookResult, HookUpdate, Middleware, Runtime};
use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::middleware::filesystem::{
    CompositeBackend, FilesystemMiddleware, StateBackend, StoreBackend,
};
use kit::middleware::subagents::SubagentSpec;
use kit::store::{Filter, MemoryStore, Namespace, Search, Store};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolContext, ToolError};
use kit::{END, MemoryCheckpointer, Message, Role, START, ToolCall};
use serde_json::{Value, json};

#[macro_use]
#[path = "support/stores.rs"]
mod stores;
use stores::Storage;

store_suite!(
    an_agent_remembers_across_threads,
    memories_files_survive_a_new_thread,
);

fn call(id: &str, name: &str, args: Value) -> Message {
    Message::assistant_with_tool_calls("", vec![ToolCall::with_id(id, name, args)])
}

/// The answer to the tool call `id` in a state.
fn tool_answer<'a>(state: &'a AgentState, id: &str) -> &'a Message {
    state
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no answer to {id}"))
}

fn user_ns(user: &str) -> Namespace {
    Namespace::new(["users", user, "memories"]).unwrap()
}

/// Saves a fact about the user to the long-term store.
fn remember_tool() -> Tool {
    Tool::from_fn(
        "remember",
        "Saves a fact about the user for later conversations.",
        json!({"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]}),
        |args: Value, ctx: ToolContext| async move {
            let store = ctx.store().ok_or_else(|| ToolError::new("no store"))?;
            let fact = args["fact"].as_str().unwrap_or_default().to_string();
            store
                .put(
                    &user_ns("ada"),
                    &kit::ids::random(),
                    json!({"fact": fact, "kind": "fact"}),
                )
                .await?;
            Ok(json!("Saved."))
        },
    )
}

/// Reads back every fact saved about the user.
fn recall_tool() -> Tool {
    Tool::from_fn(
        "recall",
        "Lists what is known about the user.",
        json!({"type": "object", "properties": {}}),
        |_args: Value, ctx: ToolContext| async move {
            let store = ctx.store().ok_or_else(|| ToolError::new("no store"))?;
            let facts = store
                .search(&Search::new(user_ns("ada")).filter(Filter::new().eq("kind", "fact")))
                .await?;
            let lines: Vec<String> = facts
                .iter()
                .filter_map(|i| i.value["fact"].as_str().map(String::from))
                .collect();
            Ok(json!(lines.join("\n")))
        },
    )
}

async fn an_agent_remembers_across_threads(s: &Storage) {
    let monday = Agent::builder()
        .model(ScriptedModel::new([
            call("m1", "remember", json!({"fact": "Ada prefers green tea"})),
            Message::assistant("Noted: green tea."),
        ]))
        .tools([remember_tool(), recall_tool()])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .store(s.open().await)
        .build()
        .unwrap();
    let first = monday
        .invoke("I prefer green tea.")
        .thread_id("monday")
        .await
        .unwrap()
        .into_state();
    assert_eq!(tool_answer(&first, "m1").text(), "Saved.");

    // A new thread of a new agent (a restart: its own checkpointer, the store opened again).
    let tuesday = Agent::builder()
        .model(ScriptedModel::new([
            call("t1", "recall", json!({})),
            Message::assistant("You prefer green tea."),
        ]))
        .tools([remember_tool(), recall_tool()])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .store(s.open().await)
        .build()
        .unwrap();
    let second = tuesday
        .invoke("What do I like to drink?")
        .thread_id("tuesday")
        .await
        .unwrap()
        .into_state();
    assert_eq!(
        tool_answer(&second, "t1").text(),
        "Ada prefers green tea",
        "{}: the fact outlived the thread",
        s.name
    );
    // The conversation itself did not carry over: only the store did.
    assert!(
        !second
            .messages
            .iter()
            .any(|m| m.text().contains("I prefer green tea"))
    );
    assert_eq!(second.final_text(), "You prefer green tea.");
}

fn memories_fs() -> FilesystemMiddleware {
    FilesystemMiddleware::new().backend(
        CompositeBackend::new(StateBackend::new())
            .route("/memories/", StoreBackend::new())
            .unwrap(),
    )
}

async fn memories_files_survive_a_new_thread(s: &Storage) {
    let first = Agent::builder()
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::with_id(
                        "w1",
                        "write_file",
                        json!({"file_path": "/memories/prefs.md", "content": "tea, not coffee\n"}),
                    ),
                    ToolCall::with_id(
                        "w2",
                        "write_file",
                        json!({"file_path": "/draft.txt", "content": "scratch\n"}),
                    ),
                ],
            ),
            Message::assistant("Saved both."),
        ]))
        .filesystem(memories_fs())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .store(s.open().await)
        .build()
        .unwrap();
    let state = first
        .invoke("Note my preferences.")
        .thread_id("one")
        .await
        .unwrap()
        .into_state();
    assert_eq!(
        tool_answer(&state, "w1").text(),
        "Updated file /memories/prefs.md"
    );
    // The draft is the thread's; the memory is not in the thread's state at all.
    assert_eq!(state.files["/draft.txt"].content, "scratch\n");
    assert!(!state.files.contains_key("/memories/prefs.md"));

    let second = Agent::builder()
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::with_id("r1", "read_file", json!({"file_path": "/memories/prefs.md"})),
                    ToolCall::with_id("r2", "read_file", json!({"file_path": "/draft.txt"})),
                    ToolCall::with_id("l1", "ls", json!({"path": "/"})),
                    ToolCall::with_id("l2", "ls", json!({"path": "/memories"})),
                    ToolCall::with_id("g1", "grep", json!({"pattern": "tea", "path": "/"})),
                    ToolCall::with_id("g2", "glob", json!({"pattern": "**/*.md"})),
                ],
            ),
            call(
                "e1",
                "edit_file",
                json!({"file_path": "/memories/prefs.md", "old_string": "tea", "new_string": "green tea"}),
            ),
            Message::assistant("You prefer tea."),
        ]))
        .filesystem(memories_fs())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .store(s.open().await)
        .build()
        .unwrap();
    let state = second
        .invoke("What do I prefer?")
        .thread_id("two")
        .await
        .unwrap()
        .into_state();
    let read = tool_answer(&state, "r1");
    assert!(!read.is_error(), "{}: {}", s.name, read.text());
    assert!(read.text().contains("tea, not coffee"), "{}", read.text());
    let missing = tool_answer(&state, "r2");
    assert!(missing.is_error());
    assert_eq!(missing.text(), "Error: File '/draft.txt' not found");
    assert_eq!(tool_answer(&state, "l1").text(), "['/memories/']");
    assert_eq!(tool_answer(&state, "l2").text(), "['/memories/prefs.md']");
    assert!(
        tool_answer(&state, "g1")
            .text()
            .contains("/memories/prefs.md"),
        "{}",
        tool_answer(&state, "g1").text()
    );
    assert_eq!(tool_answer(&state, "g2").text(), "['/memories/prefs.md']");
    assert!(
        !tool_answer(&state, "e1").is_error(),
        "{}",
        tool_answer(&state, "e1").text()
    );

    // The edit landed in the store, under deepagents' layout.
    let store = s.open().await;
    let item = store
        .get(&Namespace::new(["filesystem"]).unwrap(), "/prefs.md")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.value["content"], "green tea, not coffee\n");
    assert_eq!(item.value["encoding"], "utf-8");
    assert!(item.value["created_at"].is_string() && item.value["modified_at"].is_string());
}

#[tokio::test]
async fn subagents_share_the_parents_store() {
    let store = Arc::new(MemoryStore::new());
    let parent = ScriptedModel::new([
        call(
            "job",
            "task",
            json!({"description": "Save that Ada prefers tea.", "subagent_type": "archivist"}),
        ),
        Message::assistant("Done."),
    ]);
    let child = ScriptedModel::new([
        call("c1", "remember", json!({"fact": "Ada prefers tea"})),
        Message::assistant("Saved it."),
    ]);
    let agent = Agent::builder()
        .model(parent)
        .store(store.clone())
        .subagents([SubagentSpec::new("archivist", "Saves facts.")
            .model(child)
            .tools([remember_tool()])])
        .build()
        .unwrap();
    let state = agent
        .invoke("Remember I like tea.")
        .await
        .unwrap()
        .into_state();
    assert_eq!(tool_answer(&state, "job").text(), "Saved it.");
    let saved = store.search(&Search::new(user_ns("ada"))).await.unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].value["fact"], "Ada prefers tea");
}

/// Loads the user's memories into the conversation before each model call.
struct Recall;

#[kit::async_trait]
impl Middleware for Recall {
    fn name(&self) -> &str {
        "Recall"
    }
    fn hooks(&self) -> &[Hook] {
        &[Hook::BeforeAgent]
    }
    async fn before_agent(&self, _state: &AgentState, rt: &Runtime) -> HookResult {
        let Some(store) = rt.store() else {
            return Ok(None);
        };
        let facts = store
            .search(&Search::new(user_ns("ada")))
            .await
            .map_err(|e| kit::AgentError::middleware("Recall", e))?;
        let text: Vec<String> = facts
            .iter()
            .filter_map(|f| f.value["fact"].as_str().map(String::from))
            .collect();
        Ok(Some(HookUpdate::messages(vec![Message::system(format!(
            "What you know about the user: {}",
            text.join("; ")
        ))])))
    }
}

#[tokio::test]
async fn middleware_reads_the_store_through_its_runtime() {
    let store = MemoryStore::new();
    store
        .put(&user_ns("ada"), "f1", json!({"fact": "writes Rust"}))
        .await
        .unwrap();
    let model = ScriptedModel::new([Message::assistant("Hi Ada.")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(Recall)
        .store(store)
        .build()
        .unwrap();
    agent.invoke("Hello").await.unwrap();
    let seen: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert!(
        seen.iter()
            .any(|t| t == "What you know about the user: writes Rust"),
        "{seen:?}"
    );
}

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Visits {
    #[state(reducer = kit::reducers::append)]
    seen: Vec<String>,
}

/// Records which store the node saw (by the item it finds) and counts a visit.
async fn visit(_s: &Visits, ctx: &NodeContext) -> Result<VisitsUpdate, NodeError> {
    let Some(store) = ctx.store() else {
        return Ok(VisitsUpdate::new().seen(vec!["no store".to_string()]));
    };
    let ns = Namespace::new(["who"])?;
    let name = match store.get(&ns, "name").await? {
        Some(item) => item.value["name"].as_str().unwrap_or("?").to_string(),
        None => "unnamed".to_string(),
    };
    Ok(VisitsUpdate::new().seen(vec![format!("{}:{name}", ctx.graph_name())]))
}

async fn named(name: &str) -> MemoryStore {
    let store = MemoryStore::new();
    store
        .put(
            &Namespace::new(["who"]).unwrap(),
            "name",
            json!({"name": name}),
        )
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn graph_nodes_and_subgraphs_reach_the_store_the_run_resolves() {
    let child = |store: Option<MemoryStore>| {
        let mut b = GraphBuilder::<Visits>::new("child")
            .node("visit", |s: Arc<Visits>, ctx: NodeContext| async move {
                visit(&s, &ctx).await
            })
            .edge(START, "visit")
            .edge("visit", END);
        if let Some(store) = store {
            b = b.store(store);
        }
        b.compile().unwrap()
    };
    let parent = |inner: kit::Graph<Visits>, store: Option<MemoryStore>| {
        let mut b = GraphBuilder::<Visits>::new("parent")
            .node("visit", |s: Arc<Visits>, ctx: NodeContext| async move {
                visit(&s, &ctx).await
            })
            .subgraph(
                "inner",
                inner,
                |s: &Visits| VisitsUpdate::new().seen(s.seen.clone()),
                |c: &Visits| VisitsUpdate::new().seen(c.seen.clone()),
            )
            .edge(START, "visit")
            .edge("visit", "inner")
            .edge("inner", END);
        if let Some(store) = store {
            b = b.store(store);
        }
        b.compile().unwrap()
    };
    // No store anywhere.
    let out = parent(child(None), None)
        .invoke(VisitsUpdate::new())
        .await
        .unwrap();
    assert!(!out.state().seen.is_empty());
    assert!(out.state().seen.iter().all(|s| s == "no store"));
    // The parent's store reaches a child without one.
    let g = parent(child(None), Some(named("P").await));
    let seen = g
        .invoke(VisitsUpdate::new())
        .await
        .unwrap()
        .state()
        .seen
        .clone();
    assert!(
        seen.contains(&"parent:P".to_string()) && seen.contains(&"child:P".to_string()),
        "{seen:?}"
    );
    // A child's own store wins over the parent's.
    let g = parent(child(Some(named("C").await)), Some(named("P").await));
    let seen = g
        .invoke(VisitsUpdate::new())
        .await
        .unwrap()
        .state()
        .seen
        .clone();
    assert!(
        seen.contains(&"parent:P".to_string()) && seen.contains(&"child:C".to_string()),
        "{seen:?}"
    );
    // A run's store overrides the graph's, and reaches children without their own.
    let g = parent(child(None), Some(named("P").await));
    let seen = g
        .invoke(VisitsUpdate::new())
        .store(named("R").await)
        .await
        .unwrap()
        .state()
        .seen
        .clone();
    assert!(
        seen.contains(&"parent:R".to_string()) && seen.contains(&"child:R".to_string()),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_memories_route_without_a_store_tells_the_model_how_to_fix_it() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            call(
                "w1",
                "write_file",
                json!({"file_path": "/memories/x.md", "content": "x"}),
            ),
            Message::assistant("Could not save."),
        ]))
        .filesystem(memories_fs())
        .build()
        .unwrap();
    let state = agent.invoke("Save x.").await.unwrap().into_state();
    let answer = tool_answer(&state, "w1");
    assert!(answer.is_error());
    assert!(
        answer.text().contains("give the agent a store"),
        "{}",
        answer.text()
    );
    // Paths outside the route still work.
    assert!(state.files.is_empty());
}

#[tokio::test]
async fn routed_files_keep_the_filesystem_rules() {
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            call(
                "a",
                "write_file",
                json!({"file_path": "/memories/dir/a.md", "content": "1"}),
            ),
            call(
                "b",
                "write_file",
                json!({"file_path": "/memories/dir", "content": "2"}),
            ),
            call(
                "c",
                "write_file",
                json!({"file_path": "/memories/dir/a.md/x", "content": "3"}),
            ),
            call("d", "read_file", json!({"file_path": "/memories/dir"})),
            call("e", "delete", json!({"file_path": "/memories/dir"})),
            call("f", "read_file", json!({"file_path": "/memories/dir/a.md"})),
            call("g", "delete", json!({"file_path": "/memories"})),
            Message::assistant("Done."),
        ]))
        .filesystem(memories_fs())
        .store(store.clone())
        .build()
        .unwrap();
    let state = agent.invoke("Go.").await.unwrap().into_state();
    assert!(!tool_answer(&state, "a").is_error());
    let b = tool_answer(&state, "b").text();
    assert!(b.contains("'/memories/dir' is a directory"), "{b}");
    let c = tool_answer(&state, "c").text();
    assert!(c.contains("because '/memories/dir/a.md' is a file"), "{c}");
    let d = tool_answer(&state, "d").text();
    assert!(d.contains("'/memories/dir' is a directory"), "{d}");
    assert!(!tool_answer(&state, "e").is_error());
    assert_eq!(
        tool_answer(&state, "f").text(),
        "Error: File '/memories/dir/a.md' not found"
    );
    assert!(
        tool_answer(&state, "g").is_error(),
        "the mount point itself is not deleted"
    );
    assert!(store.is_empty());
}
