//! Trace options on direct calls, suppression that holds for everything under it, tool runs
//! with their tags and metadata, reasoning in model runs, and resume inputs as JSON. (The
//! `tracing` spans are checked in `trace_spans.rs`, a binary of its own.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kit::agent::Agent;
use kit::graph::{GraphBuilder, NodeContext};
use kit::message::{ContentPart, Reasoning, ReasoningFormat};
use kit::model::{self, ModelRequest};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolContext, ToolError};
use kit::trace::{Collector, RunKind, RunRecord, TraceOptions, Tracer};
use kit::{END, Graph, MemoryCheckpointer, Message, Resume, START, State, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tracer recording into a fresh collector.
fn collecting() -> (Tracer, Collector) {
    let collector = Collector::new();
    (Tracer::new().with_exporter(collector.clone()), collector)
}

/// Runs `fut` inside a recorded `outer` run of `tracer`, then returns the runs recorded.
async fn under<F: std::future::Future>(
    tracer: &Tracer,
    collector: &Collector,
    fut: F,
) -> (F::Output, Vec<RunRecord>) {
    let outer = tracer.start("outer", RunKind::Custom, || Value::Null, None);
    let out = outer.clone().scope(fut).await;
    outer.finish(Value::Null);
    (out, collector.runs())
}

fn lookup() -> Tool {
    Tool::from_fn(
        "lookup",
        "Looks a customer up.",
        json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        |args: Value, _| async move {
            Ok::<_, ToolError>(format!("customer {}", args["id"].as_str().unwrap_or("?")))
        },
    )
    .tags(["crm", "read-only"])
    .trace_metadata("owner", "billing")
    .trace_metadata("api_key", "sk-should-never-leave")
}

#[tokio::test]
async fn a_direct_model_call_is_one_run_with_its_options_and_reasoning() {
    let (tracer, collector) = collecting();
    let mut answer = Message::assistant(vec![
        ContentPart::Reasoning(Reasoning::new(
            "scripted",
            ReasoningFormat::Text,
            "Think first.",
        )),
        ContentPart::text("Paris."),
    ]);
    answer.usage = Some(kit::Usage {
        input_tokens: 10,
        output_tokens: 4,
        reasoning_tokens: 2,
        ..Default::default()
    });
    let scripted = ScriptedModel::new([answer]);
    let options = TraceOptions::new().metadata("purpose", "capital lookup");
    let (result, runs) = under(&tracer, &collector, async {
        model::generate_traced(
            &scripted,
            &ModelRequest::new(vec![Message::user("Capital?")]),
            &options,
        )
        .await
    })
    .await;
    assert_eq!(result.unwrap().message.text(), "Paris.");
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let run = &runs[0];
    assert_eq!(
        (run.kind, run.parent_id.as_deref()),
        (RunKind::Model, Some(runs[1].id.as_str()))
    );
    assert_eq!(run.metadata["purpose"], "capital lookup");
    assert_eq!(run.inputs["messages"][0]["content"], "Capital?");
    // The answer's reasoning is in the trace, as its own part.
    assert_eq!(run.outputs["message"]["content"][0]["type"], "reasoning");
    assert_eq!(run.outputs["message"]["content"][0]["text"], "Think first.");
    let info = run.model.as_ref().unwrap();
    assert_eq!(info.provider, "scripted");
    assert_eq!(info.usage.unwrap().reasoning_tokens, 2);

    // Suppressed: the call runs, nothing is recorded for it.
    collector.clear();
    let scripted = ScriptedModel::new([Message::assistant("secret answer")]);
    let (result, runs) = under(&tracer, &collector, async {
        model::generate_traced(
            &scripted,
            &ModelRequest::new(vec![Message::user("x")]),
            &TraceOptions::disabled(),
        )
        .await
    })
    .await;
    assert_eq!(result.unwrap().message.text(), "secret answer");
    assert_eq!(runs.len(), 1, "only the outer run: {runs:#?}");
    assert!(
        !serde_json::to_string(&runs)
            .unwrap()
            .contains("secret answer")
    );
}

#[tokio::test]
async fn a_direct_tool_call_carries_tags_and_safe_metadata() {
    let (tracer, collector) = collecting();
    let call = ToolCall::with_id("call_9", "lookup", json!({"id": "c-1"}));
    let (done, runs) = under(&tracer, &collector, async {
        lookup()
            .execute_traced(
                &call,
                ToolContext::detached(),
                &TraceOptions::new().metadata("via", "cli"),
            )
            .await
    })
    .await;
    assert_eq!(done.unwrap().message.text(), "customer c-1");
    let run = runs.iter().find(|r| r.kind == RunKind::Tool).unwrap();
    assert_eq!(run.tags, ["crm", "read-only"]);
    assert_eq!(run.metadata["tool_name"], "lookup");
    assert_eq!(run.metadata["tool_call_id"], "call_9");
    assert_eq!(run.metadata["owner"], "billing");
    assert_eq!(run.metadata["via"], "cli");
    assert_ne!(
        run.metadata["api_key"], "sk-should-never-leave",
        "secrets never leave"
    );
    assert_eq!(
        run.tool.as_ref().unwrap().description,
        "Looks a customer up."
    );
    assert_eq!(run.outputs["result"], "customer c-1");

    collector.clear();
    let (done, runs) = under(&tracer, &collector, async {
        lookup()
            .execute_traced(&call, ToolContext::detached(), &TraceOptions::disabled())
            .await
    })
    .await;
    assert!(done.is_ok());
    assert!(runs.iter().all(|r| r.kind != RunKind::Tool), "{runs:#?}");
}

#[tokio::test]
async fn an_agents_tool_runs_carry_the_tools_tags_and_metadata() {
    let (tracer, collector) = collecting();
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id("c1", "lookup", json!({"id": "7"}))],
        ),
        Message::assistant("Found."),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(lookup())
        .build()
        .unwrap();
    agent.invoke("who is 7?").tracer(tracer).await.unwrap();
    let runs = collector.runs();
    let tool = runs.iter().find(|r| r.kind == RunKind::Tool).unwrap();
    assert_eq!(tool.tags, ["crm", "read-only"]);
    assert_eq!(tool.metadata["tool_call_id"], "c1");
    assert_eq!(tool.metadata["owner"], "billing");
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Count {
    n: u64,
}

/// A graph whose node invokes `inner` (with its own, active tracer).
fn outer_calling(inner: Arc<Graph<Count>>, tracer: Tracer) -> Graph<Count> {
    GraphBuilder::<Count>::new("outer")
        .node("call_inner", move |_: Arc<Count>, _: NodeContext| {
            let (inner, tracer) = (inner.clone(), tracer.clone());
            async move {
                let out = inner
                    .invoke(CountUpdate::new().n(1))
                    .tracer(tracer)
                    .await
                    .unwrap();
                CountUpdate::new().n(out.into_state().n + 1)
            }
        })
        .edge(START, "call_inner")
        .edge("call_inner", END)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_suppressed_runs_nested_graph_calls_stay_suppressed() {
    let (tracer, collector) = collecting();
    let inner = Arc::new(
        GraphBuilder::<Count>::new("inner")
            .sync_node("bump", |c: &Count, _: &NodeContext| {
                CountUpdate::new().n(c.n + 1)
            })
            .edge(START, "bump")
            .edge("bump", END)
            .compile()
            .unwrap(),
    );
    let outer = outer_calling(inner, tracer.clone());
    let out = outer
        .invoke(CountUpdate::new())
        .tracer(tracer.clone())
        .trace(TraceOptions::disabled())
        .await
        .unwrap();
    assert_eq!(out.into_state().n, 3);
    assert!(tracer.flush(std::time::Duration::from_secs(5)));
    assert_eq!(
        collector.runs(),
        Vec::<RunRecord>::new(),
        "nothing under `trace: false`"
    );
    // Traced, the same call records both graphs, the inner one under the outer.
    outer
        .invoke(CountUpdate::new())
        .tracer(tracer)
        .await
        .unwrap();
    let runs = collector.runs();
    let root = runs.iter().find(|r| r.name == "outer").unwrap();
    let nested = runs.iter().find(|r| r.name == "inner").unwrap();
    assert_eq!(nested.trace_id, root.trace_id);
}

#[tokio::test]
async fn a_resumes_trace_input_is_json() {
    let (tracer, collector) = collecting();
    let graph = GraphBuilder::<Count>::new("review")
        .sync_node(
            "ask",
            |_: &Count, ctx: &NodeContext| -> Result<CountUpdate, kit::graph::NodeError> {
                let v = ctx.interrupt(json!({"question": "ok?"}))?;
                Ok(CountUpdate::new().n(v["n"].as_u64().unwrap_or(0)))
            },
        )
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    graph
        .invoke(CountUpdate::new())
        .thread_id("r")
        .tracer(tracer.clone())
        .await
        .unwrap();
    graph
        .resume(Resume::value(json!({"n": 5, "note": "fine"})))
        .thread_id("r")
        .tracer(tracer)
        .await
        .unwrap();
    let runs = collector.runs();
    let resumed = runs.iter().rfind(|r| r.kind == RunKind::Graph).unwrap();
    assert_eq!(resumed.inputs["resume"], json!({"n": 5, "note": "fine"}));
    let text = serde_json::to_string(&resumed.inputs).unwrap();
    assert!(
        !text.contains("Object {") && !text.contains("Value("),
        "{text}"
    );
}
