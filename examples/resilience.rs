//! Resilience and budgets: an agent whose provider is overloaded falls back to another one,
//! retries, keeps its tool calls within limits, and runs under a budget that stops it — then
//! continues the same thread with a raised budget.
//!
//! Run it with `cargo run --example resilience`. It is offline: the two providers are kit's
//! mock servers on 127.0.0.1, speaking the real Anthropic and OpenAI wire formats (the
//! Anthropic one answers `529 overloaded_error`), and the budgeted agent uses kit's scripted
//! model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::agent::Agent;
use kit::graph::Resume;
use kit::middleware::budget::{Budget, BudgetMiddleware, OnExhausted};
use kit::middleware::call_limits::{ModelCallLimitMiddleware, ToolCallLimitMiddleware};
use kit::middleware::fallback::ModelFallbackMiddleware;
use kit::middleware::retry::{ModelRetryMiddleware, OnFailure};
use kit::model::ModelOptions;
use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::{EventKind, MemoryCheckpointer, Message, RunOptions, ToolCall, Usage};
use kit_testing::mock::anthropic::{self, MockAnthropic};
use kit_testing::mock::openai::{self, MockOpenAi};
use serde_json::json;

/// Looks a word up.
#[kit::tool]
async fn define(
    /// The word.
    word: String,
) -> Result<String, ToolError> {
    Ok(format!("{word}: a word worth knowing"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    fallback().await?;
    budget().await?;
    Ok(())
}

/// An overloaded Anthropic API, a retry, then the OpenAI fallback answers.
async fn fallback() -> Result<(), Box<dyn std::error::Error>> {
    let claude = MockAnthropic::start().await?;
    let gpt = MockOpenAi::start().await?;
    claude.enqueue_all([anthropic::overloaded(), anthropic::overloaded()]);
    gpt.enqueue(openai::text_stream(&["Serendipity: ", "a happy accident."]));

    let agent = Agent::builder()
        .model(claude.model("claude-sonnet-4-5"))
        .model_opts(ModelOptions::default().retries(0))
        .tool(Define)
        .middleware(ModelFallbackMiddleware::new([gpt.model("gpt-4o-mini")]))
        .middleware(
            ModelRetryMiddleware::new()
                .max_retries(1)
                .initial_delay(Duration::from_millis(50))
                .on_failure(OnFailure::Error),
        )
        .middleware(ModelCallLimitMiddleware::new().run_limit(10))
        .middleware(ToolCallLimitMiddleware::for_tool("define").run_limit(3))
        .build()?;

    println!("== fallback: Anthropic answers 529 twice, OpenAI takes over");
    let mut events = agent.stream_events("What is serendipity?", &RunOptions::new());
    while let Some(event) = events.next().await {
        match event.kind() {
            EventKind::Middleware
                if event.name.contains("retry") || event.name.contains("fallback") =>
            {
                let data = event.data.to_json();
                println!(
                    "  {}: {}",
                    event.name,
                    data["message"].as_str().unwrap_or_default()
                );
            }
            EventKind::ModelEnd => println!("  answered by {}", event.name),
            EventKind::RunEnd => {
                let answer = event.data.to_json()["output"]["messages"]
                    .as_array()
                    .and_then(|m| m.last().cloned())
                    .unwrap_or_default();
                println!(
                    "  answer: {}",
                    answer["content"].as_str().unwrap_or_default()
                );
            }
            _ => {}
        }
    }
    println!(
        "  requests: {} to Anthropic, {} to OpenAI\n",
        claude.request_count(),
        gpt.request_count()
    );
    Ok(())
}

/// A model that looks up a word per call, then answers; every call costs 1,000 input tokens.
fn researcher() -> ScriptedModel {
    let n = Arc::new(AtomicUsize::new(0));
    ScriptedModel::from_fn(move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        let mut m = if i < 4 {
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(
                    format!("d{i}"),
                    "define",
                    json!({"word": format!("word{i}")}),
                )],
            )
        } else {
            Message::assistant("Four words defined.")
        };
        m.usage = Some(Usage {
            input_tokens: 1_000,
            output_tokens: 20,
            ..Usage::default()
        });
        Ok(m)
    })
}

/// A run stopped by its budget, then continued on the same thread with a raised one.
async fn budget() -> Result<(), Box<dyn std::error::Error>> {
    let model = researcher();
    let checkpointer = Arc::new(MemoryCheckpointer::new());
    let build = |budget: Budget| {
        Agent::builder()
            .model(model.clone())
            .tool(Define)
            .checkpointer(checkpointer.clone())
            .middleware(BudgetMiddleware::new(budget).on_exhausted(OnExhausted::Error))
            .build()
    };

    println!("== budget: 2,500 input tokens for a task that needs 5,000");
    let tight = build(Budget::new().max_input_tokens(2_500))?;
    let opts = RunOptions::new().thread_id("research");
    let mut events = tight.stream_events("Define four words.", &opts);
    while let Some(event) = events.next().await {
        if event.name == "BudgetMiddleware.remaining" {
            println!("  remaining: {}", event.data.to_json());
        }
        if event.kind() == EventKind::Error {
            println!(
                "  stopped: {}",
                event.data.to_json()["message"].as_str().unwrap_or_default()
            );
        }
    }

    println!("== the same thread, with 10,000 input tokens");
    let raised = build(Budget::new().max_input_tokens(10_000))?;
    let out = raised
        .resume(Resume::Continue)
        .thread_id("research")
        .await?;
    println!("  answer: {}", out.state().final_text());
    let spent = &out
        .state()
        .custom
        .get("budget")
        .cloned()
        .unwrap_or_default();
    println!(
        "  spent over both runs: {} input tokens",
        spent["input_tokens"]
    );
    Ok(())
}
