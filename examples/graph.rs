//! A support-ticket graph: a conditional route, a human approval (interrupt) and a resume.
//!
//! Run it with `cargo run --example graph`.

use std::sync::Arc;

use kit::graph::{NodeContext, NodeError};
use kit::{MemoryCheckpointer, Outcome, Resume, RunOptions, State};
use serde::{Deserialize, Serialize};

/// The graph's state: every field is a channel.
#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Ticket {
    text: String,
    kind: String,
    /// Append-only audit log: parallel writers never clash.
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
    resolution: String,
}

/// Reads the ticket and decides what kind it is.
async fn classify(t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
    let kind = if t.text.contains("refund") {
        "refund"
    } else {
        "question"
    };
    TicketUpdate::new()
        .kind(kind)
        .log(vec![format!("classified as {kind}")])
}

/// Refunds need a human: the run pauses here until someone answers.
async fn refund(t: &Ticket, ctx: &NodeContext) -> Result<TicketUpdate, NodeError> {
    let answer = ctx.interrupt(serde_json::json!({
        "question": "Approve this refund?",
        "ticket": t.text,
    }))?;
    let approved = answer.as_str() == Some("yes");
    Ok(TicketUpdate::new()
        .resolution(if approved {
            "refunded"
        } else {
            "refund declined"
        })
        .log(vec![format!("human said {answer}")]))
}

async fn answer(_t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
    TicketUpdate::new()
        .resolution("answered from the FAQ")
        .log(vec!["answered".to_string()])
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Nodes, edges and `when` conditions are checked at compile time: a misspelt node or
    // state field is a compile error pointing at the typo.
    let graph = kit::graph! {
        name: "support";
        state: Ticket;
        node classify;
        node refund;
        node answer;
        edge START -> classify;
        edge classify -> refund when kind == "refund";
        edge classify -> answer when kind == "question";
        edge refund -> END;
        edge answer -> END;
    }
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));

    println!("The graph, in Mermaid:\n{}", graph.draw_mermaid());

    let opts = RunOptions::new().thread_id("ticket-1");
    let input = TicketUpdate::new().text("I want a refund for order 42");
    println!("> invoke: {:?}", "I want a refund for order 42");
    let outcome = graph.invoke(input).options(&opts).await?;

    let Outcome::Interrupted(paused) = outcome else {
        return Err("expected the refund to wait for approval".into());
    };
    for interrupt in &paused.interrupts {
        println!(
            "⏸ paused in `{}` (interrupt {}): {}",
            interrupt.node, interrupt.id, interrupt.value
        );
    }
    println!("  log so far: {:?}", paused.state.log);

    println!("> resume with \"yes\"");
    let done = graph.resume(Resume::value("yes")).options(&opts).await?;
    let ticket = done.into_state();
    println!("✔ resolution: {}", ticket.resolution);
    println!("  log: {:?}", ticket.log);

    let history = graph.state_history(&opts, None).await?;
    println!("{} checkpoints in the thread's history:", history.len());
    for snapshot in history.iter().rev() {
        println!(
            "  step {:>2} ({:?}) next={:?}",
            snapshot.checkpoint.step, snapshot.checkpoint.source, snapshot.next
        );
    }
    Ok(())
}
