//! Guardrails on the terminal: PII redaction of the input and of the model's tool calls, a
//! human review round trip of the calls that need it, then a streamed answer whose tokens are
//! masked as they arrive.
//!
//! Run it with `cargo run --example guardrails`. It uses a scripted model (offline,
//! deterministic). On a terminal it asks you to approve, edit, reject or answer each reviewed
//! call; when stdin is not a terminal (CI, a pipe) it approves every call and says so.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use kit::agent::AgentState;
use kit::middleware::review::{Decision, DecisionType, ReviewRequest};
use kit::model::{ModelError, ModelRequest};
use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::{MemoryCheckpointer, Message, Outcome, Role, RunOptions, ToolCall};
use serde_json::{Value, json};

/// Handles a support ticket: looks up orders, refunds them, emails customers.
#[kit::agent(
    name = "support",
    model = support_model(),
    tools = [LookupOrder, Refund, SendEmail],
    // PII: emails in the input are redacted; card numbers are masked in the input and in the
    // model's answers, tool-call arguments included.
    pii< email(redact), credit_card(mask, apply_to_output = true) >,
    // Review: refunds may only be approved or rejected; emails allow every decision; lookups
    // run without review.
    interrupt_on< refund = [approve, reject], send_email = true >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Support;

/// Tells the customer where the refund went; card numbers are masked even as tokens stream.
#[kit::agent(model = receipt_model(), pii< credit_card(mask, apply_to_output = true) >)]
struct Receipt;

// ---------------------------------------------------------------------------------------------
// Tools

/// Looks up an order.
#[kit::tool]
async fn lookup_order(
    /// The order number.
    order_id: u64,
) -> Result<String, ToolError> {
    Ok(format!("order {order_id}: 30.00 EUR, paid by card"))
}

/// Refunds an order.
#[kit::tool]
async fn refund(
    /// The order number.
    order_id: u64,
    /// The amount to refund, in the order's currency.
    amount: f64,
) -> Result<String, ToolError> {
    Ok(format!("refunded {amount:.2} on order {order_id}"))
}

/// Sends an email.
#[kit::tool]
async fn send_email(
    /// The customer or address.
    to: String,
    /// The message.
    body: String,
) -> Result<String, ToolError> {
    Ok(format!("sent to {to}: {body}"))
}

// ---------------------------------------------------------------------------------------------
// The terminal

fn ask(prompt: &str) -> std::io::Result<String> {
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// Asks the person at the terminal for one decision among the allowed ones.
fn decide(args: &Value, allowed: &[DecisionType]) -> std::io::Result<Decision> {
    let menu: Vec<&str> = allowed.iter().map(|d| d.as_str()).collect();
    loop {
        let answer = ask(&format!("     decision ({}): ", menu.join("/")))?;
        let Some(kind) = allowed
            .iter()
            .find(|d| !answer.is_empty() && d.as_str().starts_with(answer.to_lowercase().as_str()))
        else {
            println!("     please type one of: {}", menu.join(", "));
            continue;
        };
        return Ok(match kind {
            DecisionType::Approve => Decision::approve(),
            DecisionType::Reject => match ask("     reason (empty for none): ")? {
                reason if reason.is_empty() => Decision::reject(),
                reason => Decision::reject_with(reason),
            },
            DecisionType::Respond => Decision::respond(ask("     the result to give the model: ")?),
            DecisionType::Edit => {
                let text = ask(&format!("     new arguments as JSON [{args}]: "))?;
                if text.is_empty() {
                    Decision::edit("", args.clone())
                } else {
                    match serde_json::from_str::<Value>(&text) {
                        Ok(edited) => Decision::edit("", edited),
                        Err(e) => {
                            println!("     not JSON ({e}); try again");
                            continue;
                        }
                    }
                }
            }
        });
    }
}

fn print_results(state: &AgentState) {
    for m in state.messages.iter().filter(|m| m.role == Role::Tool) {
        let status = if m.is_error() { " (error)" } else { "" };
        let text = m.text();
        // An edited call's result starts with a long note for the model; show its end.
        let shown = text.rsplit("Tool response:\n").next().unwrap_or(&text);
        println!("← {}{status}: {shown}", m.name.as_deref().unwrap_or("?"));
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = RunOptions::new().thread_id("ticket-42");

    println!("== PII ==");
    let input =
        "Refund order 42 and email the receipt to ann@example.com. Card: 4111-1111-1111-1111.";
    println!("user wrote: {input}");
    let mut outcome = Support::invoke(input).options(&opts).await?;
    println!("model saw:  {}", outcome.state().messages[0].text());

    println!("\n== Human review ==");
    let interactive = std::io::stdin().is_terminal();
    while let Outcome::Interrupted(paused) = &outcome {
        let Some(interrupt) = paused.interrupts.first() else {
            break;
        };
        let request = ReviewRequest::from_interrupt(interrupt)?;
        if let Some(error) = &request.error {
            println!("the last answer was not accepted: {error}");
        }
        println!(
            "paused for review ({} calls):",
            request.action_requests.len()
        );
        for (i, (action, config)) in request
            .action_requests
            .iter()
            .zip(&request.review_configs)
            .enumerate()
        {
            let allowed: Vec<&str> = config
                .allowed_decisions
                .iter()
                .map(|d| d.as_str())
                .collect();
            println!(
                "  {}. {} {} — allowed: {}",
                i + 1,
                action.name,
                action.args,
                allowed.join(", ")
            );
        }
        let decisions = if interactive {
            let mut decisions = Vec::new();
            for (i, (action, config)) in request
                .action_requests
                .iter()
                .zip(&request.review_configs)
                .enumerate()
            {
                println!("  {}. {}", i + 1, action.name);
                let decision = match decide(&action.args, &config.allowed_decisions)? {
                    // An edit keeps the tool; only the arguments change here.
                    Decision::Edit { edited_action } => {
                        Decision::edit(action.name.clone(), edited_action.args)
                    }
                    other => other,
                };
                decisions.push(decision);
            }
            decisions
        } else {
            println!("stdin is not a terminal: approving every call");
            vec![Decision::approve(); request.action_requests.len()]
        };
        outcome = Support::resume_review(decisions).options(&opts).await?;
    }
    print_results(outcome.state());
    println!("final answer: {}", outcome.state().final_text());

    println!("\n== Streaming ==");
    stream_masked().await
}

/// Streams an answer that spells out a card number word by word: the PII middleware's event
/// filter holds back a short lookback, so the number is masked even though it arrives in four
/// pieces.
async fn stream_masked() -> Result<(), Box<dyn std::error::Error>> {
    use futures::StreamExt;
    let mut events = Receipt::stream_events("Where did my refund go?", &RunOptions::new());
    print!("streamed: ");
    while let Some(event) = events.next().await {
        if event.kind() == kit::EventKind::ModelDelta
            && let Some(text) = event.data.to_json()["text"].as_str()
        {
            print!("{text}");
            std::io::stdout().flush()?;
        }
    }
    println!();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in models

/// The scripted model: first it looks up the order, refunds it and emails a receipt (in
/// parallel); once it has the results, it reports them.
fn support_model() -> ScriptedModel {
    ScriptedModel::from_fn(|request: &ModelRequest| -> Result<Message, ModelError> {
        let results: Vec<&Message> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .collect();
        if results.is_empty() {
            return Ok(Message::assistant_with_tool_calls(
                "I'll look up the order, refund it and send the receipt.",
                vec![
                    ToolCall::with_id("c1", "lookup_order", json!({"order_id": 42})),
                    ToolCall::with_id("c2", "refund", json!({"order_id": 42, "amount": 30.0})),
                    ToolCall::with_id(
                        "c3",
                        "send_email",
                        json!({
                            "to": "customer-42",
                            "body": "Refunded 30.00 to card 4111-1111-1111-1111."
                        }),
                    ),
                ],
            ));
        }
        let summary: Vec<String> = results
            .iter()
            .map(|m| {
                let name = m.name.clone().unwrap_or_default();
                let outcome = if m.is_error() { "not done" } else { "done" };
                format!("{name} {outcome}")
            })
            .collect();
        Ok(Message::assistant(format!(
            "Summary: {}.",
            summary.join(", ")
        )))
    })
}

/// Spells out the card number the refund went back to.
fn receipt_model() -> ScriptedModel {
    ScriptedModel::new([Message::assistant(
        "Done: 30.00 EUR went back to the card 4111 1111 1111 1111 you paid with.",
    )])
}
