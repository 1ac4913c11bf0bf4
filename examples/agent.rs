//! An agent with a tool and a custom middleware, streaming its events, then continuing the
//! conversation from its checkpointer.
//!
//! Run it with `cargo run --example agent`. It uses the scripted model (offline, deterministic).

use std::sync::Arc;

use futures::StreamExt;
use kit::agent::{AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware, Runtime};
use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::{EventKind, MemoryCheckpointer, Message, RunOptions, ToolCall};
use serde_json::json;

/// Converts currencies, refusing anything else.
#[kit::agent(
    model = scripted(),
    system_prompt = "You convert currencies. Use the convert tool.",
    tools = [Convert],
    middleware = [OnlyMoney],
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Treasurer;

/// Converts an amount between currencies at today's (fixed, demo) rates.
#[kit::tool]
async fn convert(
    /// The amount to convert.
    amount: f64,
    /// ISO code of the source currency, e.g. `EUR`.
    from: String,
    /// ISO code of the target currency, e.g. `USD`.
    to: String,
) -> Result<String, ToolError> {
    let rate = match (from.as_str(), to.as_str()) {
        ("EUR", "USD") => 1.08,
        ("USD", "EUR") => 0.93,
        ("GBP", "USD") => 1.27,
        (a, b) => return Err(ToolError::new(format!("no rate for {a} to {b}"))),
    };
    Ok(format!("{:.2} {to}", amount * rate))
}

/// A guardrail: refuses requests about anything but money, before the model is called.
struct OnlyMoney;

#[kit::async_trait]
impl Middleware for OnlyMoney {
    fn name(&self) -> &str {
        "OnlyMoney"
    }
    fn hooks(&self) -> &[Hook] {
        &[Hook::BeforeAgent]
    }
    fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] {
        &[JumpTo::End]
    }
    async fn before_agent(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let asked = state.messages.last().map(Message::text).unwrap_or_default();
        if asked.to_lowercase().contains("poem") {
            let refusal = Message::assistant("I can only help with currency questions.");
            return Ok(Some(HookUpdate::end_with(refusal)));
        }
        Ok(None)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("(offline: using kit's scripted model)");
    println!(
        "agent graph nodes: {:?}",
        Treasurer::agent()?.graph().node_names()
    );

    let opts = RunOptions::new().thread_id("desk-1");
    let mut events = Treasurer::stream_events("Convert 100 EUR and 50 GBP to USD.", &opts);
    while let Some(event) = events.next().await {
        match event.kind() {
            EventKind::ModelDelta => {
                if let Some(text) = event.data.to_json()["text"].as_str() {
                    print!("{text}");
                }
            }
            EventKind::ModelEnd => println!(),
            EventKind::ToolStart => {
                println!("  → {}({})", event.name, event.data.to_json()["args"])
            }
            EventKind::ToolEnd => {
                println!("  ← {}: {}", event.name, event.data.to_json()["result"])
            }
            EventKind::RunEnd => println!("run ended: {}", event.data.to_json()["status"]),
            _ => {}
        }
    }

    // Same thread: the agent remembers the conversation through its checkpointer.
    let out = Treasurer::invoke("And together?").options(&opts).await?;
    println!("follow-up answer: {}", out.state().final_text());
    println!("messages in the thread: {}", out.state().messages.len());

    // The guardrail ends the run before the model is called.
    let out = Treasurer::invoke("Write me a poem.")
        .thread_id("desk-2")
        .await?;
    println!("guardrail: {}", out.state().final_text());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in model: it converts two amounts in parallel, then answers. A real model
// (`model = "openai:gpt-4o-mini"`) needs none of this.

fn scripted() -> ScriptedModel {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "Let me convert both.",
            vec![
                ToolCall::with_id(
                    "c1",
                    "convert",
                    json!({"amount": 100, "from": "EUR", "to": "USD"}),
                ),
                ToolCall::with_id(
                    "c2",
                    "convert",
                    json!({"amount": 50, "from": "GBP", "to": "USD"}),
                ),
            ],
        ),
        Message::assistant("100 EUR is 108.00 USD and 50 GBP is 63.50 USD."),
        Message::assistant("Together that is 171.50 USD."),
    ])
}
