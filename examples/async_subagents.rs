//! Async subagents end to end, in one program on loopback: a kit worker hosting a scripted
//! "researcher" agent, and a supervisor agent (scripted too) that starts a task on it, checks
//! it while it runs, sends a follow-up, and reports the result.
//!
//! ```text
//! cargo run --example async_subagents
//! ```
//!
//! Both models are `ScriptedModel`s, so it runs offline; swap in a real model to use it for
//! real.

use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use kit::server::Worker;
use kit::testing::{ScriptStep, ScriptedModel};
use kit::{MemoryCheckpointer, Message, Role, ToolCall};
use kit_testing::researcher::{self, Gate};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The supervisor: one async subagent, reached over HTTP with the worker's token.
#[kit::agent(
    model = SUPERVISOR_MODEL.clone(),
    async_subagents<
        researcher(
            description = "Researches a topic in depth; takes a while.",
            graph_id = "research",
            url = worker_url(),
            headers = {"Authorization": "Bearer example-token"},
        ),
    >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Supervisor;

/// Where the worker listens, once it started.
static WORKER_URL: OnceLock<String> = OnceLock::new();

fn worker_url() -> String {
    WORKER_URL.get().cloned().unwrap_or_default()
}

/// One turn: the user says `user`, the supervisor's model calls `tool` with `args`, then answers
/// with what the tool said. Prints the exchange and returns the tool's JSON answer.
async fn turn(user: &str, tool: &str, args: Value) -> Result<Value, Error> {
    println!("user → supervisor: {user}");
    println!("  supervisor calls {tool} {args}");
    let id = script_turn(tool, args);
    let out = Supervisor::invoke(user).thread_id("supervisor-1").await?;
    let state = out.into_state();
    let result = state
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id.as_str()))
        .map(Message::text)
        .ok_or("the tool did not answer")?;
    println!("  ← {tool}: {result}");
    Ok(serde_json::from_str(&result).unwrap_or(Value::String(result)))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // The worker: the researcher agent under graph id `research`, on a random local port. Its
    // tool waits on a gate, so the task is still running when the supervisor first checks.
    let gate = Gate::closed();
    let worker = Worker::builder()
        .agent("research", researcher::agent(gate.clone()))
        .capacity(4)
        .bearer_token("example-token")
        .build()
        .await?
        .start("127.0.0.1:0")
        .await?;
    println!(
        "worker: {} hosting `research` (bearer token required)",
        worker.url()
    );
    // The supervisor declared above reaches the worker at this URL; it is built on first use.
    let _ = WORKER_URL.set(worker.url());

    let started = turn(
        "Research the history of the Rust language in the background.",
        "start_async_task",
        json!({"description": "the history of Rust", "subagent_name": "researcher"}),
    )
    .await?;
    let task_id = started["task_id"].as_str().ok_or("no task id")?.to_string();
    println!("task started: {task_id}");

    // Wait (bounded) until the worker runs it, so the check below sees `running`.
    wait_until(&worker.url(), &task_id, "running").await?;
    let checked = turn(
        "How is the research going?",
        "check_async_task",
        json!({"task_id": task_id}),
    )
    .await?;
    println!(
        "status while the tool waits: {}",
        checked["status"].as_str().unwrap_or("?")
    );

    let updated = turn(
        "Also cover the 1.0 release.",
        "update_async_task",
        json!({"task_id": task_id, "message": "the Rust 1.0 release"}),
    )
    .await?;
    println!(
        "follow-up queued on the same task: {} ({})",
        updated["task_id"].as_str().unwrap_or("?"),
        updated["status"].as_str().unwrap_or("?")
    );

    gate.release();
    wait_until(&worker.url(), &task_id, "success").await?;
    let done = turn(
        "Is the research done?",
        "check_async_task",
        json!({"task_id": task_id}),
    )
    .await?;
    println!("status: {}", done["status"].as_str().unwrap_or("?"));
    println!("result: {}", done["result"].as_str().unwrap_or(""));

    turn("List my tasks.", "list_async_tasks", json!({})).await?;
    worker.shutdown().await?;
    println!("worker stopped");
    Ok(())
}

/// Polls the worker directly (a plain HTTP GET with the token) until the task's latest run
/// has `status`; gives up after 30 s.
async fn wait_until(url: &str, task_id: &str, status: &str) -> Result<(), Error> {
    let http = reqwest::Client::new();
    for _ in 0..3000 {
        let run: Value = http
            .get(format!("{url}/runs/{task_id}"))
            .bearer_auth("example-token")
            .send()
            .await?
            .json()
            .await?;
        if run["status"] == status {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("task {task_id} never reached `{status}`").into())
}

// ---------------------------------------------------------------------------------------------
// The supervisor's scripted stand-in model: told, turn by turn, which tool to call.

static SUPERVISOR_MODEL: LazyLock<ScriptedModel> =
    LazyLock::new(|| ScriptedModel::new(Vec::<ScriptStep>::new()));

/// Queues the next turn of the scripted model: a call of `tool`, then a short answer. Returns
/// the call's id.
fn script_turn(tool: &str, args: Value) -> String {
    let call = ToolCall::new(tool, args);
    let id = call.id.clone();
    SUPERVISOR_MODEL.push(Message::assistant_with_tool_calls("", vec![call]));
    SUPERVISOR_MODEL.push(Message::assistant("Done."));
    id
}
