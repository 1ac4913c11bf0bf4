//! kit in one minute: a supervisor agent that plans, writes a file, delegates a quick job to a
//! sync subagent and a long one to an async subagent on a kit worker, checks on it, asks a
//! human before a sensitive call, redacts an email address, keeps its thread in SQLite and
//! writes a trace you can open in a browser.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Offline by default (kit's scripted model plays the models). With `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY` or `KIT_MODEL=provider:model` set, the same agents run on that model.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use kit::agent::AgentState;
use kit::checkpoint::SqliteCheckpointer;
use kit::middleware::review::{Decision, ReviewRequest};
use kit::model::{ModelError, ModelRequest};
use kit::server::Worker;
use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::trace::{JsonLinesExporter, Tracer};
use kit::{ChatModel, Event, EventKind, Message, Role, RunOptions, ToolCall};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

const TASK: &str = "Prepare the Q3 customer-churn briefing: plan it, write /brief.md, get a \
quick definition of churn from the researcher, start the long churn analysis on the analyst, \
and email the ops team when it is done. Questions go to ada.lovelace@example.com.";

const DIR: &str = "target/kit-quickstart";
const THREADS: &str = "target/kit-quickstart/threads.sqlite";

// ---------------------------------------------------------------------------------------------
// The agents, declared: the supervisor with its capabilities, guardrails and subagents; the
// researcher it asks in-process; the analyst a kit worker hosts.

/// Coordinates the briefing.
#[kit::agent(
    model = model(scripted_supervisor),
    system_prompt = "You coordinate a small team. For the user's request: 1) plan with \
        write_todos; 2) write a first draft to /brief.md with write_file; 3) ask the \
        `researcher` subagent (task tool) for the quick facts and, in the same turn, start the \
        long analysis on the `analyst` async subagent (start_async_task); 4) check the async \
        task with check_async_task, calling wait_seconds between checks while it runs; 5) when \
        it succeeded, mark the plan done and send_email the summary to `ops-team`; 6) answer \
        with a short summary.",
    tools = [WaitSeconds, SendEmail],
    todos,
    filesystem,
    general_purpose_subagent = false,
    subagents< researcher(description = "Answers quick factual questions in one sentence.", agent = Researcher) >,
    async_subagents<
        analyst(description = "Runs long data analyses on the worker; takes a while.",
                graph_id = "analysis", url = worker_url()),
    >,
    pii< email(redact) >,
    interrupt_on< send_email = true >,
    checkpointer = Arc::new(SqliteCheckpointer::open(THREADS)?),
)]
struct Supervisor;

/// Answers quick questions.
#[kit::agent(model = model(scripted_researcher), system_prompt = "Answer in one sentence.")]
struct Researcher;

/// Analyses churn on the worker.
#[kit::agent(
    model = model(scripted_analyst),
    system_prompt = "You analyse churn data with crunch_numbers and report the key figures.",
    tools = [CrunchNumbers],
)]
struct Analyst;

// ---------------------------------------------------------------------------------------------
// Tools

/// Computes churn statistics for a quarter (takes a while).
#[kit::tool]
async fn crunch_numbers(
    /// The quarter, like `Q3`.
    quarter: String,
) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(format!("{quarter}: churn 4.1%, SMB 6.2%, enterprise 2.0%"))
}

/// Waits a few seconds (at most 5), e.g. before checking a background task again.
#[kit::tool]
async fn wait_seconds(
    /// How long to wait, 1 to 5.
    seconds: u64,
) -> Result<String, ToolError> {
    let secs = seconds.clamp(1, 5);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    Ok(format!("waited {secs}s"))
}

/// Sends an email to a team or person.
#[kit::tool]
async fn send_email(
    /// The team or person.
    to: String,
    /// The subject line.
    subject: Option<String>,
    /// The message.
    body: String,
) -> Result<String, ToolError> {
    let _ = (subject, body);
    Ok(format!("email sent to {to}"))
}

/// Where the worker listens, once it started (the supervisor is built after that).
static WORKER_URL: OnceLock<String> = OnceLock::new();

fn worker_url() -> String {
    WORKER_URL.get().cloned().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Progress on the terminal

fn show(event: &Event) {
    let who = match event.metadata.namespace.first() {
        Some(ns) if ns.starts_with("task:") => "  [researcher]",
        Some(_) => "  [subagent]",
        None => "[supervisor]",
    };
    match event.kind() {
        EventKind::ToolStart => {
            let args = event.data.to_json()["args"].to_string();
            let args = if args.len() > 110 {
                format!("{}…", &args[..110])
            } else {
                args
            };
            println!("{who} → {}({args})", event.name);
        }
        EventKind::ToolEnd => {
            let result = match &event.data.to_json()["result"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let first = result.lines().next().unwrap_or("");
            let first = if first.len() > 110 {
                format!("{}…", &first[..110])
            } else {
                first.to_string()
            };
            println!("{who} ← {}: {first}", event.name);
        }
        EventKind::ModelEnd => {
            let data = event.data.to_json();
            let text = data["message"]["content"].as_str().unwrap_or_default();
            if !text.is_empty() {
                println!("{who} says: {}", text.replace('\n', " "));
            }
        }
        EventKind::Middleware if event.name.starts_with("PII") => {
            println!("{who} (PII middleware redacted the input)");
        }
        _ => {}
    }
}

fn ask(prompt: &str) -> std::io::Result<String> {
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_lowercase())
}

// ---------------------------------------------------------------------------------------------

#[tokio::main]
async fn main() -> Result<(), Error> {
    match &*MODELS {
        Models::Real(spec) => println!("kit quickstart — model: {spec} (real provider)"),
        Models::Scripted => println!(
            "kit quickstart — no OPENAI_API_KEY / ANTHROPIC_API_KEY / KIT_MODEL set: using kit's \
             scripted model (offline, deterministic)"
        ),
    }
    let dir = std::path::Path::new(DIR);
    std::fs::create_dir_all(dir)?;

    // 1. A kit worker on loopback hosting the async subagent `analyst`.
    let worker = Worker::builder()
        .agent("analysis", Analyst::build()?)
        .sqlite(dir.join("worker.sqlite"))?
        .build()
        .await?
        .start("127.0.0.1:0")
        .await?;
    let _ = WORKER_URL.set(worker.url());
    println!(
        "1. worker started at {} (graph `analysis`, runs kept in {})",
        worker.url(),
        dir.join("worker.sqlite").display()
    );

    // 2. The supervisor, as declared above: planning, files, a sync and an async subagent,
    //    PII, human review and a SQLite thread; the trace goes with the run's options.
    let supervisor = Supervisor::agent()?;
    let trace_file = dir.join("trace.jsonl");
    let _ = std::fs::remove_file(&trace_file);
    let tracer = Tracer::new().with_exporter(JsonLinesExporter::new(&trace_file)?);
    let thread = format!("quickstart-{}", kit::ids::now_millis());
    let opts = RunOptions::new().thread_id(&thread).tracer(tracer.clone());
    println!("2. supervisor ready; thread `{thread}` persisted in {THREADS}");
    println!("\nuser: {TASK}\n");

    // 3. Run it, streaming progress; pause for the human when a sensitive call comes.
    let mut stream = Supervisor::stream_events(TASK, &opts);
    let mut interactive_note = false;
    loop {
        let mut paused = None;
        let mut failed = None;
        while let Some(event) = stream.next().await {
            show(&event);
            if event.metadata.namespace.is_empty() {
                match event.kind() {
                    EventKind::Interrupt => {
                        paused = Some(event.data.to_json()["interrupts"].clone())
                    }
                    EventKind::Error => failed = Some(event.data.to_json()["message"].to_string()),
                    _ => {}
                }
            }
        }
        if let Some(message) = failed {
            return Err(format!("the run failed: {message}").into());
        }
        let Some(interrupts) = paused else { break };
        let interrupts: Vec<kit::Interrupt> = serde_json::from_value(interrupts)?;
        let Some(interrupt) = interrupts.first() else {
            break;
        };
        let request = ReviewRequest::from_interrupt(interrupt)?;
        let mut decisions = Vec::new();
        for action in &request.action_requests {
            println!("\n⏸ human review: {}({})", action.name, action.args);
            let approve = if std::io::stdin().is_terminal() {
                !matches!(ask("   approve? [Y/n] ")?.as_str(), "n" | "no")
            } else {
                if !interactive_note {
                    println!("   (stdin is not a terminal: approving automatically)");
                    interactive_note = true;
                }
                true
            };
            decisions.push(if approve {
                Decision::approve()
            } else {
                Decision::reject_with("The reviewer declined.")
            });
            println!("   → {}\n", if approve { "approved" } else { "rejected" });
        }
        stream = Supervisor::resume_review(decisions).options(&opts).stream();
    }

    // 4. What persisted, and where to look.
    let state: AgentState = supervisor
        .graph()
        .get_state(&RunOptions::new().thread_id(&thread))
        .await?
        .map(|s| s.values)
        .ok_or("the thread was not persisted")?;
    println!("\nplan:");
    for todo in &state.todos {
        let status = serde_json::to_value(todo.status).unwrap_or(Value::Null);
        println!("  [{}] {}", status.as_str().unwrap_or("?"), todo.content);
    }
    println!("files: {:?}", state.files.keys().collect::<Vec<_>>());
    let tasks: Vec<String> = state
        .async_tasks
        .values()
        .map(|t| format!("{} ({})", t.subagent_name, t.status))
        .collect();
    println!("async tasks: {tasks:?}");
    let user = state
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(Message::text);
    println!("the model saw the user as: {:?}", user.unwrap_or_default());
    let history = supervisor
        .graph()
        .state_history(&RunOptions::new().thread_id(&thread), None)
        .await?;
    println!(
        "thread `{thread}`: {} checkpoints in {THREADS}",
        history.len()
    );

    worker.shutdown().await?;
    tracer.flush(Duration::from_secs(5));
    let (runs, _) = kit::trace::read_json_lines(&trace_file)?;
    let html = dir.join("trace.html");
    kit::trace::viewer::write_html(&html, &runs)?;
    let absolute = std::fs::canonicalize(&html)?;
    println!(
        "\ntrace: {} runs written to {}",
        runs.len(),
        trace_file.display()
    );
    println!("look at it: open file://{}", absolute.display());
    println!(
        "       or:   cargo run --example trace_viewer -- --file {} --serve",
        trace_file.display()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Models: a real one when configured, else kit's scripted stand-ins (said once, clearly). The
// stand-ins play the models offline; a real model needs none of this.

enum Models {
    Real(String),
    Scripted,
}

fn choose_models() -> Models {
    if let Ok(spec) = std::env::var("KIT_MODEL")
        && !spec.trim().is_empty()
    {
        return Models::Real(spec);
    }
    if std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.trim().is_empty()) {
        return Models::Real("openai:gpt-4o-mini".into());
    }
    if std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.trim().is_empty()) {
        return Models::Real("anthropic:claude-3-5-haiku-latest".into());
    }
    Models::Scripted
}

static MODELS: LazyLock<Models> = LazyLock::new(choose_models);

/// The model an agent runs on: the configured provider, or its scripted stand-in.
fn model(scripted: fn() -> ScriptedModel) -> Arc<dyn ChatModel> {
    let real = match &*MODELS {
        Models::Real(spec) => kit::model::init(spec, &kit::Config::from_env(), Default::default()),
        Models::Scripted => return Arc::new(scripted()),
    };
    // A provider that cannot be set up (a bad KIT_MODEL) says why, and the run goes on offline.
    real.unwrap_or_else(|e| {
        eprintln!("cannot use the configured model ({e}); using kit's scripted model");
        Arc::new(scripted())
    })
}

/// The tool results after the last user message, by tool name, in order.
fn results_since_user(request: &ModelRequest) -> Vec<(String, String)> {
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    request.messages[start..]
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.name.clone().unwrap_or_default(), m.text()))
        .collect()
}

fn calls(list: Vec<(&str, Value)>) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.into_iter()
            .map(|(name, args)| ToolCall::new(name, args))
            .collect(),
    )
}

/// The scripted supervisor: a pure function of what it has seen, so it reacts to the real
/// task id and statuses the worker returns.
fn scripted_supervisor() -> ScriptedModel {
    ScriptedModel::from_fn(|request| -> Result<Message, ModelError> {
        let seen = results_since_user(request);
        let has = |tool: &str| seen.iter().any(|(name, _)| name == tool);
        let last_check = seen
            .iter()
            .rev()
            .find(|(name, _)| name == "check_async_task")
            .and_then(|(_, text)| serde_json::from_str::<Value>(text).ok());
        let task_id = seen
            .iter()
            .find(|(name, _)| name == "start_async_task")
            .and_then(|(_, text)| serde_json::from_str::<Value>(text).ok())
            .and_then(|v| v["task_id"].as_str().map(String::from));
        Ok(if !has("write_todos") {
            calls(vec![
                (
                    "write_todos",
                    json!({"todos": [
                        {"content": "Draft the briefing", "status": "in_progress"},
                        {"content": "Get the churn definition", "status": "pending"},
                        {"content": "Run the churn analysis", "status": "pending"},
                        {"content": "Email the ops team", "status": "pending"}
                    ]}),
                ),
                (
                    "write_file",
                    json!({"file_path": "/brief.md", "content": "# Q3 churn briefing\n\nDraft: definition and analysis to come.\n"}),
                ),
            ])
        } else if !has("task") {
            calls(vec![
                (
                    "task",
                    json!({"description": "In one sentence: how do we define customer churn?", "subagent_type": "researcher"}),
                ),
                (
                    "start_async_task",
                    json!({"description": "Analyse Q3 customer churn by segment.", "subagent_name": "analyst"}),
                ),
            ])
        } else if let (Some(id), None) = (&task_id, &last_check) {
            calls(vec![("check_async_task", json!({ "task_id": id }))])
        } else if let (Some(id), Some(check)) = (&task_id, &last_check) {
            let done = check["status"] == "success";
            let waited_since_check = seen
                .iter()
                .rposition(|(n, _)| n == "wait_seconds")
                .zip(seen.iter().rposition(|(n, _)| n == "check_async_task"))
                .is_some_and(|(w, c)| w > c);
            if !done && !waited_since_check {
                calls(vec![("wait_seconds", json!({"seconds": 1}))])
            } else if !done {
                calls(vec![("check_async_task", json!({ "task_id": id }))])
            } else if !has("send_email") {
                let result = check["result"].as_str().unwrap_or("analysis done");
                calls(vec![
                    (
                        "write_todos",
                        json!({"todos": [
                            {"content": "Draft the briefing", "status": "completed"},
                            {"content": "Get the churn definition", "status": "completed"},
                            {"content": "Run the churn analysis", "status": "completed"},
                            {"content": "Email the ops team", "status": "in_progress"}
                        ]}),
                    ),
                    (
                        "send_email",
                        json!({"to": "ops-team", "subject": "Q3 churn", "body": result}),
                    ),
                ])
            } else if seen.iter().rposition(|(n, _)| n == "write_todos")
                < seen.iter().rposition(|(n, _)| n == "send_email")
            {
                calls(vec![(
                    "write_todos",
                    json!({"todos": [
                        {"content": "Draft the briefing", "status": "completed"},
                        {"content": "Get the churn definition", "status": "completed"},
                        {"content": "Run the churn analysis", "status": "completed"},
                        {"content": "Email the ops team", "status": "completed"}
                    ]}),
                )])
            } else {
                Message::assistant(
                    "Done: the plan is complete, /brief.md holds the draft, the researcher \
                     defined churn, the analyst's Q3 analysis is in, and ops-team has the summary.",
                )
            }
        } else {
            Message::assistant("I could not start the analysis.")
        })
    })
    .named("scripted-supervisor")
}

fn scripted_researcher() -> ScriptedModel {
    ScriptedModel::from_fn(|_| {
        Ok(Message::assistant(
            "Churn is the share of customers who stop paying within the period.",
        ))
    })
    .named("scripted-researcher")
}

/// The analyst on the worker: crunches numbers (slowly), then reports.
fn scripted_analyst() -> ScriptedModel {
    ScriptedModel::from_fn(|request| {
        Ok(if results_since_user(request).is_empty() {
            calls(vec![("crunch_numbers", json!({"quarter": "Q3"}))])
        } else {
            Message::assistant(
                "Q3 churn was 4.1% (down from 4.8%); SMB customers churn three times more than \
                 enterprise ones.",
            )
        })
    })
    .named("scripted-analyst")
}
