//! An agent assembled at run time with `Agent::builder()`, from a JSON configuration: which
//! tools it gets (picked by name from a registry of `#[kit::tool]`s), its system prompt, its
//! model options and which calls a person reviews.
//!
//! This is the case for the builder: agents whose shape is only known at run time — read from
//! a user's settings, a database row or a tenant's plan. Everything fixed at compile time
//! belongs in `#[kit::agent]`, which checks it while compiling (a review gate on a tool the
//! agent does not have is a compile error there; here it is checked below, at run time).
//!
//! Run it with `cargo run --example runtime_assembly`. It uses kit's scripted model (offline,
//! deterministic) and approves the reviewed call in code.

use std::sync::Arc;

use kit::agent::IntoModelSource;
use kit::middleware::review::{Decision, HumanReviewMiddleware, ReviewRequest, resume_review};
use kit::model::ModelOptions;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{Agent, MemoryCheckpointer, Message, Outcome, Role, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// The configuration, as if read from a user's settings file.
const CONFIG: &str = r#"{
    "name": "returns-desk",
    "system_prompt": "You handle returns. Look an order up before refunding it, and email the customer when done.",
    "model_options": {"temperature": 0.2, "max_tokens": 400, "retries": 2},
    "tools": ["lookup_order", "refund", "send_email"],
    "interrupt_on": {
        "refund": {"allowed_decisions": ["approve", "reject"], "description": "Refunds move money"},
        "send_email": false
    }
}"#;

/// What the configuration holds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeskConfig {
    name: String,
    system_prompt: String,
    #[serde(default)]
    model_options: ModelOptions,
    tools: Vec<String>,
    /// Tool → `true`, `false` or `{"allowed_decisions": [..], "description": ".."}`.
    #[serde(default)]
    interrupt_on: Option<Value>,
}

// ---------------------------------------------------------------------------------------------
// The tools a configuration may pick from: `#[kit::tool]` functions, registered as `T::tool()`.

/// Every tool this program offers, by name.
fn registry() -> Vec<Tool> {
    vec![
        LookupOrder::tool(),
        CheckStock::tool(),
        Refund::tool(),
        SendEmail::tool(),
    ]
}

/// Looks up an order: what was bought, what was paid, where it is.
#[kit::tool]
async fn lookup_order(
    /// The order's id, like `A-17`.
    order_id: String,
) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id, "item": "kettle", "paid_eur": 49.90, "status": "delivered"}))
}

/// Checks how many of an item are in stock.
#[kit::tool]
async fn check_stock(
    /// The item's SKU.
    sku: String,
) -> Result<String, ToolError> {
    Ok(format!("{sku}: 3 in stock"))
}

/// Refunds (part of) an order.
#[kit::tool]
async fn refund(
    /// The order's id.
    order_id: String,
    /// How much to refund, in euros.
    amount_eur: f64,
) -> Result<String, ToolError> {
    Ok(format!("refunded {amount_eur:.2} EUR on {order_id}"))
}

/// Sends an email to a customer.
#[kit::tool]
async fn send_email(
    /// The customer.
    to: String,
    /// The message.
    body: String,
) -> Result<String, ToolError> {
    let _ = body;
    Ok(format!("email sent to {to}"))
}

// ---------------------------------------------------------------------------------------------

/// Builds the agent the configuration describes.
fn assemble(config: &DeskConfig, model: impl IntoModelSource) -> Result<Agent, Error> {
    let registry = registry();
    let mut tools = Vec::new();
    for name in &config.tools {
        let Some(tool) = registry.iter().find(|t| t.name() == name) else {
            let known: Vec<&str> = registry.iter().map(Tool::name).collect();
            return Err(format!("unknown tool `{name}`; the registry has {known:?}").into());
        };
        tools.push(tool.clone());
    }

    let mut builder = Agent::builder()
        .name(&config.name)
        .model(model)
        .model_opts(config.model_options.clone())
        .system_prompt(&config.system_prompt)
        .tools(tools);
    if let Some(gates) = &config.interrupt_on {
        // `#[agent]` checks at compile time that each gate names one of the agent's tools; a
        // configuration is only known now, so check it now.
        for tool in gates.as_object().into_iter().flat_map(|m| m.keys()) {
            if !config.tools.contains(tool) {
                return Err(format!("interrupt_on names `{tool}`, which is not enabled").into());
            }
        }
        builder = builder
            .middleware(HumanReviewMiddleware::from_json(gates)?)
            // Review pauses the run, and a paused run resumes from its checkpoint.
            .checkpointer(Arc::new(MemoryCheckpointer::new()));
    }
    Ok(builder.build()?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let config: DeskConfig = serde_json::from_str(CONFIG)?;
    // A real model goes here (`.model("openai:gpt-4o-mini")`); the scripted one plays it.
    let model = scripted();
    let agent = assemble(&config, model.clone())?;
    println!("assembled `{}` from the configuration", agent.name());
    println!("tools: {:?}", agent.tool_names());
    let left_out: Vec<String> = registry()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| !config.tools.contains(n))
        .collect();
    println!("not enabled: {left_out:?}");

    let ask = "Customer 7 says the kettle from order A-17 arrived broken. Refund it, please.";
    println!("\nuser: {ask}");
    let mut outcome = agent.invoke(ask).thread_id("return-17").await?;
    while let Outcome::Interrupted(paused) = &outcome {
        let Some(interrupt) = paused.interrupts.first() else {
            break;
        };
        let request = ReviewRequest::from_interrupt(interrupt)?;
        let mut decisions = Vec::new();
        for (action, config) in request.action_requests.iter().zip(&request.review_configs) {
            let allowed: Vec<&str> = config
                .allowed_decisions
                .iter()
                .map(|d| d.as_str())
                .collect();
            println!("paused for review: {}({})", action.name, action.args);
            println!(
                "  {} — allowed: {}",
                action.description.lines().next().unwrap_or_default(),
                allowed.join(", ")
            );
            // A real application asks a person here; this one approves.
            println!("  → approved");
            decisions.push(Decision::approve());
        }
        outcome = agent
            .resume(resume_review(decisions))
            .thread_id("return-17")
            .await?;
    }
    for m in outcome
        .state()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
    {
        println!("← {}: {}", m.name.as_deref().unwrap_or("?"), m.text());
    }
    println!("answer: {}", outcome.state().final_text());

    // What reached the model: the configured prompt and options, on every call.
    let seen = model.requests();
    let options = seen.first().map(|r| &r.options);
    let system = seen
        .first()
        .and_then(|r| r.system.clone())
        .unwrap_or_default();
    println!("system prompt: {system}");
    println!(
        "the model was called {} times with temperature {} and max_tokens {}",
        seen.len(),
        options.and_then(|o| o.temperature).unwrap_or_default(),
        options.and_then(|o| o.max_tokens).unwrap_or_default(),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in model: looks the order up, then refunds it and emails the customer in
// parallel, then answers. It keeps every request it gets, options included.

fn scripted() -> ScriptedModel {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new("lookup_order", json!({"order_id": "A-17"}))],
        ),
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::new("refund", json!({"order_id": "A-17", "amount_eur": 49.90})),
                ToolCall::new(
                    "send_email",
                    json!({"to": "customer-7", "body": "Your refund of 49.90 EUR is on its way."}),
                ),
            ],
        ),
        Message::assistant("Refunded 49.90 EUR on order A-17 and emailed customer 7."),
    ])
}
