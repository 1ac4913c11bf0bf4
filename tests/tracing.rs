//! Run trees: agents, tools, subagents, middleware, spawned tasks; inheritance; redaction.

use std::collections::HashMap;
use std::sync::Arc;

use kit::agent::Agent;
use kit::middleware::subagents::SubagentSpec;
use kit::middleware::todos::TodoMiddleware;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError, ToolOutput};
use kit::trace::{self, Collector, RunKind, RunRecord, RunStatus, TraceOptions, Tracer};
use kit::{MemoryCheckpointer, Message, RunOptions, ToolCall};
use serde_json::json;

fn by_id(runs: &[RunRecord]) -> HashMap<&str, &RunRecord> {
    runs.iter().map(|r| (r.id.as_str(), r)).collect()
}

fn lookup() -> Tool {
    Tool::from_fn(
        "lookup",
        "Looks a customer up.",
        json!({"type": "object", "properties": {"email": {"type": "string"}, "api_key": {"type": "string"}}}),
        |args, _ctx| async move {
            Ok::<_, ToolError>(ToolOutput::text(format!(
                "customer {} (key used: {})",
                args["email"].as_str().unwrap_or(""),
                args["api_key"].as_str().unwrap_or("")
            )))
        },
    )
}

#[tokio::test]
async fn agent_run_tree_with_tool_subagent_and_inherited_dimensions() {
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let parent_model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "c1",
                    "lookup",
                    json!({"email": "ada@example.com", "api_key": "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX"}),
                ),
                ToolCall::with_id(
                    "c2",
                    "task",
                    json!({"description": "summarise", "subagent_type": "helper"}),
                ),
            ],
        ),
        Message::assistant("all done"),
    ]);
    let child_model = ScriptedModel::new([Message::assistant("summary ready")]);
    let agent = Agent::builder()
        .name("support")
        .model(parent_model)
        .tool(lookup())
        .middleware(TodoMiddleware::new())
        .subagents([SubagentSpec::new("helper", "Helps.").model(child_model)])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new()
        .thread_id("thread-7")
        .tracer(tracer.clone())
        .trace(
            TraceOptions::new()
                .name("support chat")
                .user_id("user-1")
                .session_id("sess-9")
                .execution_mode("chat")
                .field("tenant", "acme")
                .field("api_key", "must-not-appear")
                .field("_private", "x")
                .metadata("authorization", "Bearer SECRETSECRET"),
        );
    agent.invoke("help me").options(&opts).await.unwrap();
    let runs = collector.runs();
    let ids = by_id(&runs);

    let root = runs.iter().find(|r| r.parent_id.is_none()).unwrap();
    assert_eq!(root.kind, RunKind::Agent);
    assert_eq!(root.name, "support chat");
    assert_eq!(root.thread_id.as_deref(), Some("thread-7"));
    assert_eq!(root.span_name(), "invoke_agent support chat");
    assert_eq!(root.metadata["authorization"], "[REDACTED]");
    // Every run belongs to the trace and inherits the dimensions.
    for r in &runs {
        assert_eq!(r.trace_id, root.id, "{}", r.name);
        assert_eq!(r.user_id.as_deref(), Some("user-1"), "{}", r.name);
        assert_eq!(r.session_id.as_deref(), Some("sess-9"));
        assert_eq!(r.execution_mode.as_deref(), Some("chat"));
        assert_eq!(r.thread_id.as_deref(), Some("thread-7"));
        assert_eq!(
            r.custom_fields.get("tenant").map(String::as_str),
            Some("acme")
        );
        assert!(!r.custom_fields.contains_key("api_key"));
        assert!(!r.custom_fields.contains_key("_private"));
        assert!(r.end_ns >= r.start_ns);
        if let Some(parent) = &r.parent_id {
            assert!(
                ids.contains_key(parent.as_str()),
                "{} has a dangling parent",
                r.name
            );
        }
    }
    // Model calls: provider, model, messages in, message out.
    let models: Vec<&RunRecord> = runs.iter().filter(|r| r.kind == RunKind::Model).collect();
    assert_eq!(models.len(), 3, "two parent turns and one child turn");
    let first = models
        .iter()
        .find(|m| m.inputs["messages"][0]["content"] == "help me")
        .unwrap();
    assert_eq!(first.model.as_ref().unwrap().provider, "scripted");
    assert_eq!(first.span_name(), "chat scripted");
    // The model run hangs under the `model` node of the agent.
    assert_eq!(ids[first.parent_id.as_deref().unwrap()].name, "model");
    // Tool runs: public args, call id, description.
    let tool = runs
        .iter()
        .find(|r| r.kind == RunKind::Tool && r.name == "lookup")
        .unwrap();
    let info = tool.tool.as_ref().unwrap();
    assert_eq!(info.call_id, "c1");
    assert_eq!(info.description, "Looks a customer up.");
    assert_eq!(tool.inputs["email"], "ada@example.com");
    assert_eq!(tool.inputs["api_key"], "[REDACTED]");
    // The subagent's run tree hangs under the `task` tool run.
    let task = runs
        .iter()
        .find(|r| r.kind == RunKind::Tool && r.name == "task")
        .unwrap();
    let child_root = runs
        .iter()
        .find(|r| r.kind == RunKind::Agent && r.parent_id.as_deref() == Some(task.id.as_str()))
        .expect("the subagent's run is a child of the task tool run");
    assert_eq!(child_root.name, "helper");
    assert!(runs.iter().any(|r| r.kind == RunKind::Model
        && ids[r.parent_id.as_deref().unwrap()].parent_id.as_deref()
            == Some(child_root.id.as_str())));
    // Middleware hooks are middleware runs.
    assert!(
        runs.iter()
            .any(|r| r.kind == RunKind::Middleware && r.name == "TodoList.after_model")
    );
    // Planted secrets never appear anywhere.
    let dump = serde_json::to_string(&runs).unwrap();
    for secret in ["sk-live-ABCDEF", "SECRETSECRET", "must-not-appear"] {
        assert!(!dump.contains(secret), "{secret} leaked");
    }
}

#[tokio::test]
async fn spawn_keeps_the_trace_context_across_tasks() {
    let collector = Collector::new();
    trace::set_global(Tracer::new().with_exporter(collector.clone()));
    let out = trace::with_run("parent", async {
        let handle = trace::spawn(async {
            let run = trace::start_run("inside", RunKind::Custom, json!({"n": 1}), None);
            trace::finish_run(&run, json!({"ok": true}));
            7
        });
        handle.await.unwrap()
    })
    .await;
    assert_eq!(out, 7);
    let runs = collector.runs();
    let ids = by_id(&runs);
    let inside = runs.iter().find(|r| r.name == "inside").unwrap();
    let task = ids[inside.parent_id.as_deref().unwrap()];
    assert_eq!(task.kind, RunKind::Task);
    let parent = ids[task.parent_id.as_deref().unwrap()];
    assert_eq!(parent.name, "parent");
    trace::set_global(Tracer::new());
}

#[tokio::test]
async fn failures_are_recorded_and_trace_false_suppresses() {
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let model = ScriptedModel::new(Vec::<Message>::new());
    let agent = Agent::builder().model(model).build().unwrap();
    let err = agent.invoke("hi").tracer(tracer.clone()).await;
    assert!(err.is_err());
    let runs = collector.runs();
    let root = runs.iter().find(|r| r.parent_id.is_none()).unwrap();
    assert_eq!(root.status, RunStatus::Error);
    assert!(root.error.as_deref().unwrap().contains("no answer left"));
    let model_run = runs.iter().find(|r| r.kind == RunKind::Model).unwrap();
    assert_eq!(model_run.status, RunStatus::Error);

    collector.clear();
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("quiet")]))
        .build()
        .unwrap();
    agent
        .invoke("hi")
        .tracer(tracer.clone())
        .trace(TraceOptions::disabled())
        .await
        .unwrap();
    assert!(collector.runs().is_empty(), "trace: false records nothing");
}

#[tokio::test]
async fn json_lines_exporter_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces/run.jsonl");
    let exporter = trace::JsonLinesExporter::new(&path).unwrap();
    let tracer = Tracer::new().with_exporter(exporter);
    let agent = Agent::builder()
        .name("writer")
        .model(ScriptedModel::new([Message::assistant("hello")]))
        .build()
        .unwrap();
    agent.invoke("hi").tracer(tracer.clone()).await.unwrap();
    assert!(tracer.flush(std::time::Duration::from_secs(5)));
    let (runs, bad) = trace::read_json_lines(&path).unwrap();
    assert_eq!(bad, 0);
    assert!(
        runs.iter()
            .any(|r| r.kind == RunKind::Agent && r.name == "writer")
    );
    assert!(runs.iter().any(|r| r.kind == RunKind::Model));
    assert_eq!(tracer.stats().dropped, 0);
}

#[test]
fn custom_field_rules_case_by_case() {
    // (key, value, what the trace keeps)
    let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
        ("tenant", json!("acme"), Some("acme")),
        ("tenant_padded", json!("  acme  "), Some("acme")),
        ("tier", json!(2), Some("2")),
        ("ratio", json!(0.25), Some("0.25")),
        ("vip", json!(true), Some("true")),
        ("max_tokens", json!(256), Some("256")),
        (
            "note",
            json!("call Bearer abcdefghijkl"),
            Some("call Bearer [REDACTED]"),
        ),
        ("none", json!(null), None),
        ("blank", json!("   "), None),
        ("empty", json!(""), None),
        ("nested", json!({"a": 1}), None),
        ("list", json!(["a"]), None),
        ("_private", json!("x"), None),
        ("api_key", json!("k"), None),
        ("X-Api-Key", json!("k"), None),
        ("access_token", json!("t"), None),
        ("client_secret", json!("s"), None),
        ("password", json!("p"), None),
        ("Authorization", json!("Bearer x"), None),
        ("session_cookie", json!("c"), None),
    ];
    for (key, value, expected) in cases {
        let mut fields = serde_json::Map::new();
        fields.insert(key.to_string(), value.clone());
        let clean = trace::custom_fields(&fields);
        assert_eq!(
            clean.get(key.trim()).map(String::as_str),
            expected,
            "{key} = {value}"
        );
        assert!(clean.len() <= 1);
    }
    // A blank key is dropped too.
    let mut fields = serde_json::Map::new();
    fields.insert("  ".into(), json!("x"));
    assert!(trace::custom_fields(&fields).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_keeps_context_across_worker_threads() {
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let root = tracer.start(
        "fan-out",
        RunKind::Custom,
        || json!(null),
        Some(&TraceOptions::new().user_id("u-7").field("tenant", "acme")),
    );
    let total = root
        .clone()
        .scope(async {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    trace::spawn(async move {
                        tokio::task::yield_now().await;
                        let run = trace::start_run(
                            &format!("job {i}"),
                            RunKind::Custom,
                            json!({ "i": i }),
                            None,
                        );
                        trace::finish_run(&run, json!({ "done": i }));
                        i
                    })
                })
                .collect();
            let mut sum = 0;
            for h in handles {
                sum += h.await.unwrap();
            }
            sum
        })
        .await;
    root.finish(json!({ "sum": total }));
    assert_eq!(total, 28);
    let runs = collector.runs();
    let ids = by_id(&runs);
    let root = runs.iter().find(|r| r.name == "fan-out").unwrap();
    for i in 0..8 {
        let job = runs.iter().find(|r| r.name == format!("job {i}")).unwrap();
        let task = ids[job.parent_id.as_deref().unwrap()];
        assert_eq!(task.kind, RunKind::Task);
        assert_eq!(task.parent_id.as_deref(), Some(root.id.as_str()));
        assert_eq!(job.trace_id, root.id);
        assert_eq!(job.user_id.as_deref(), Some("u-7"));
        assert_eq!(job.custom_fields["tenant"], "acme");
    }
    // Each job has its own task run.
    let tasks: std::collections::HashSet<_> = runs
        .iter()
        .filter(|r| r.name.starts_with("job "))
        .map(|r| r.parent_id.clone())
        .collect();
    assert_eq!(tasks.len(), 8);
}

/// An agent that calls `lookup` `rounds` times, then answers; traced into a collector.
async fn traced_rounds(rounds: usize) -> Vec<RunRecord> {
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let mut script: Vec<Message> = (0..rounds)
        .map(|i| {
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(
                    format!("c{i}"),
                    "lookup",
                    json!({"email": format!("user{i}@example.com")}),
                )],
            )
        })
        .collect();
    script.push(Message::assistant("done"));
    let agent = Agent::builder()
        .model(ScriptedModel::new(script))
        .tool(lookup())
        .build()
        .unwrap();
    let opts = RunOptions::new()
        .tracer(tracer.clone())
        .recursion_limit(4 * rounds + 10);
    agent.invoke("look them up").options(&opts).await.unwrap();
    collector.runs()
}

#[tokio::test]
async fn model_runs_record_only_what_is_new_so_a_trace_grows_linearly() {
    let small = traced_rounds(5).await;
    let large = traced_rounds(200).await;
    let model_inputs = |runs: &[RunRecord]| -> Vec<(usize, u64)> {
        runs.iter()
            .filter(|r| r.kind == RunKind::Model)
            .map(|r| {
                let messages = r.inputs["messages"].as_array().map_or(0, Vec::len);
                (messages, r.inputs["earlier_messages"].as_u64().unwrap_or(0))
            })
            .collect()
    };
    let calls = model_inputs(&large);
    assert_eq!(calls.len(), 201);
    // The first call sees the user's message; each later one only the result it asked for,
    // and says how many messages came before (they are in the earlier runs).
    assert!(calls.contains(&(1, 0)), "{calls:?}");
    let mut earlier: Vec<u64> = calls.iter().map(|c| c.1).collect();
    earlier.sort_unstable();
    assert_eq!(earlier, (0..201).map(|i| 2 * i).collect::<Vec<_>>());
    assert!(calls.iter().all(|c| c.0 == 1), "{calls:?}");
    // Bytes per model run stay the same at 5 and at 200 rounds (they grew with the history).
    let bytes_per_model_run = |runs: &[RunRecord]| {
        let models: Vec<&RunRecord> = runs.iter().filter(|r| r.kind == RunKind::Model).collect();
        let total: usize = models.iter().map(|r| r.inputs.to_string().len()).sum();
        total / models.len()
    };
    let (a, b) = (bytes_per_model_run(&small), bytes_per_model_run(&large));
    assert!(
        b < a * 2,
        "model run inputs: {a} bytes each at 5 rounds, {b} at 200"
    );
}

/// A tool failing with an error of a kibibyte keeps it whole in its run; one of a megabyte is
/// clipped to 8,000 characters (a span that large is refused by collectors, losing the run).
#[tokio::test]
async fn a_megabyte_error_is_clipped_in_the_run() {
    for (size, kept) in [(1 << 10, (1 << 10) + 7), (1 << 20, 8_001)] {
        let collector = Collector::new();
        let tracer = Tracer::new().with_exporter(collector.clone());
        let failing = Tool::from_fn(
            "fail",
            "Fails.",
            json!({"type": "object", "properties": {}}),
            move |_args, _ctx| async move { Err::<ToolOutput, _>(ToolError::new("e".repeat(size))) },
        );
        let agent = Agent::builder()
            .model(ScriptedModel::new([
                Message::assistant_with_tool_calls(
                    "",
                    vec![ToolCall::with_id("f", "fail", json!({}))],
                ),
                Message::assistant("ok"),
            ]))
            .tool(failing)
            .build()
            .unwrap();
        agent.invoke("go").tracer(tracer.clone()).await.unwrap();
        let runs = collector.runs();
        let tool = runs.iter().find(|r| r.kind == RunKind::Tool).unwrap();
        assert_eq!(tool.status, RunStatus::Error);
        let error = tool.error.as_deref().unwrap();
        assert_eq!(error.chars().count(), kept, "{size}");
        assert!(error.contains("eeee"));
    }
}

/// The JSON-lines exporter's queue holds at most 64 MiB of runs while the file is slow (here a
/// pipe nobody reads yet): a hundred runs of 1 KiB all wait, a hundred of 1 MiB mostly drop,
/// counted; once the file drains, every queued run is there. Reading back skips a torn line
/// and bytes that are not UTF-8, and keeps the lines around them.
#[cfg(unix)]
#[tokio::test]
async fn json_lines_queue_is_bounded_in_bytes_and_reading_skips_only_bad_lines() {
    let collector = Collector::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("hello")]))
        .build()
        .unwrap();
    agent
        .invoke("hi")
        .tracer(Tracer::new().with_exporter(collector.clone()))
        .await
        .unwrap();
    let sample = collector.runs()[0].clone();

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slow.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let copy = dir.path().join("copy.jsonl");
    let reader = {
        let (fifo, copy) = (fifo.clone(), copy.clone());
        std::thread::spawn(move || {
            let mut pipe = std::fs::File::open(&fifo).unwrap();
            wait.recv().unwrap();
            let mut out = std::fs::File::create(&copy).unwrap();
            std::io::copy(&mut pipe, &mut out).unwrap();
        })
    };
    let exporter = trace::JsonLinesExporter::new(&fifo).unwrap();
    let mut accepted = 0;
    for (size, runs) in [(1 << 10, 100u64), (1 << 20, 100)] {
        let before = trace::Exporter::stats(&exporter).dropped;
        for i in 0..runs {
            let mut run = sample.clone();
            run.id = format!("{size}-{i}");
            run.inputs = json!({"text": "x".repeat(size)});
            trace::Exporter::export(&exporter, run);
        }
        let dropped = trace::Exporter::stats(&exporter).dropped - before;
        if size == 1 << 10 {
            assert_eq!(dropped, 0, "1 KiB runs all wait");
        } else {
            assert!(
                (30..=40).contains(&dropped),
                "1 MiB runs: {dropped} dropped"
            );
        }
        accepted += runs - dropped;
    }
    go.send(()).unwrap();
    assert!(trace::Exporter::flush(
        &exporter,
        std::time::Duration::from_secs(30)
    ));
    drop(exporter);
    // The exporter's thread ends when its last sender is gone, closing the pipe.
    reader.join().unwrap();
    let (runs, bad) = trace::read_json_lines(&copy).unwrap();
    assert_eq!((runs.len() as u64, bad), (accepted, 0));

    let good = serde_json::to_string(&sample).unwrap();
    let mut mixed = Vec::new();
    mixed.extend_from_slice(good.as_bytes());
    mixed.extend_from_slice(b"\n\xff\xfe not utf-8\n{\"id\": \"torn\n\n");
    mixed.extend_from_slice(good.as_bytes());
    mixed.push(b'\n');
    let path = dir.path().join("mixed.jsonl");
    std::fs::write(&path, mixed).unwrap();
    let (runs, bad) = trace::read_json_lines(&path).unwrap();
    assert_eq!((runs.len(), bad), (2, 2));
}
