//! A deep agent: it plans with `write_todos`, works in a virtual filesystem, and delegates a
//! research job to a subagent — all in one run, streamed to the terminal.
//!
//! Run it with `cargo run --example deep_agent` (offline: the scripted model plays the model).

use futures::StreamExt;
use kit::event::EventData;
use kit::testing::ScriptedModel;
use kit::{Message, RunOptions, ToolCall};
use serde_json::json;

/// Writes short reports: plans them, keeps them in files, and delegates research.
#[kit::agent(
    model = lead_model(),
    system_prompt = "You write short technical reports.",
    todos,
    filesystem,
    subagents<
        researcher(
            description = "Researches a question and answers briefly.",
            system_prompt = "You research. Answer in bullet points.",
            model = researcher_model(),
        ),
    >,
)]
struct Lead;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("(offline: using kit's scripted model)\n");
    println!("tools: {:?}\n", Lead::agent()?.tool_names());

    let mut events =
        Lead::stream_events("Write a report on Rust async runtimes.", &RunOptions::new());
    let mut final_state = None;
    while let Some(event) = events.next().await {
        // Events from the subagent carry its namespace: attribute them.
        let who = match event.metadata.namespace.first() {
            Some(ns) => format!("  [{ns}]"),
            None => String::new(),
        };
        match &event.data {
            EventData::ToolStart { args, .. } => println!("{who} → {}({args})", event.name),
            EventData::ToolEnd { result, .. } => {
                let result = result.text();
                println!(
                    "{who} ← {}: {}",
                    event.name,
                    result.lines().next().unwrap_or("")
                );
            }
            EventData::ModelEnd { message, .. } => {
                let text = message.text();
                if !text.is_empty() {
                    println!("{who} {}: {}", event.name, text.replace('\n', " / "));
                }
            }
            EventData::RunEnd { output, .. } if event.metadata.namespace.is_empty() => {
                final_state = output.clone();
            }
            _ => {}
        }
    }
    let state = final_state.ok_or("the run did not finish")?;
    println!("\nplan:");
    for todo in state["todos"].as_array().into_iter().flatten() {
        println!(
            "  [{}] {}",
            todo["status"].as_str().unwrap_or(""),
            todo["content"].as_str().unwrap_or("")
        );
    }
    println!(
        "files: {:?}",
        state["files"]
            .as_object()
            .map(|f| f.keys().collect::<Vec<_>>())
    );
    println!(
        "/report.md:\n{}",
        state["files"]["/report.md"]["content"]
            .as_str()
            .unwrap_or("")
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in models: the lead plans, delegates the research, writes the report and
// closes the plan; the researcher answers.

fn lead_model() -> ScriptedModel {
    ScriptedModel::new([
        calls(&[(
            "plan",
            "write_todos",
            json!({"todos": [
                {"content": "Research Rust async runtimes", "status": "in_progress"},
                {"content": "Write the report to /report.md", "status": "pending"}
            ]}),
        )]),
        calls(&[(
            "research",
            "task",
            json!({
                "description": "Compare tokio and async-std: maintenance status and ecosystem. Answer in two bullet points.",
                "subagent_type": "researcher"
            }),
        )]),
        calls(&[
            (
                "write",
                "write_file",
                json!({"file_path": "/report.md", "content": "# Async runtimes\n\n- tokio: actively maintained, the ecosystem default\n- async-std: discontinued in 2025\n"}),
            ),
            (
                "plan2",
                "write_todos",
                json!({"todos": [
                    {"content": "Research Rust async runtimes", "status": "completed"},
                    {"content": "Write the report to /report.md", "status": "completed"}
                ]}),
            ),
        ]),
        Message::assistant("The report is in /report.md: use tokio."),
    ])
    .named("lead-model")
}

/// The researcher subagent: it reads nothing, it answers.
fn researcher_model() -> ScriptedModel {
    ScriptedModel::new([Message::assistant(
        "- tokio: actively maintained, the ecosystem default\n- async-std: discontinued in 2025",
    )])
    .named("researcher-model")
}

fn calls(list: &[(&str, &str, serde_json::Value)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.iter()
            .map(|(id, name, args)| ToolCall::with_id(*id, *name, args.clone()))
            .collect(),
    )
}
