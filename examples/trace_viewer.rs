//! The trace viewer: runs a small support agent (a tool call, a failing tool call, a
//! subagent) with the JSON-lines trace exporter, prints the trace as a tree, and writes it as
//! one self-contained HTML page.
//!
//! ```text
//! cargo run --example trace_viewer                      # writes target/kit-trace.html
//! cargo run --example trace_viewer -- --serve           # …and serves it on http://127.0.0.1:8765/
//! cargo run --example trace_viewer -- --file runs.jsonl # shows an existing trace file
//!                                                       # (e.g. one written with KIT_TRACE_FILE)
//! ```
//!
//! Offline and deterministic: the model is scripted. With `--serve` the page is rendered again
//! from the trace file on every request, so a file that grows shows new traces on reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::trace::{JsonLinesExporter, RunRecord, TraceOptions, Tracer, viewer};
use kit::{MemoryCheckpointer, Message, ToolCall, Usage};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The support desk whose run is traced: two tools (one fails) and a writer subagent.
#[kit::agent(
    name = "support desk",
    model = desk_model(),
    system_prompt = "You help customers with their orders.",
    tools = [LookupOrder, Refund],
    subagents< writer(description = "Drafts customer replies.", model = writer_model()) >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct SupportDesk;

/// Finds an order by its number.
#[kit::tool]
async fn lookup_order(
    /// The order number, like `A-1001`.
    order: String,
) -> Result<String, ToolError> {
    Ok(format!("{order}: packed, ships tomorrow"))
}

/// Refunds an order.
#[kit::tool]
async fn refund(
    /// The order number, like `A-1001`.
    order: String,
) -> Result<String, ToolError> {
    // The demo's payment gateway is down: every refund fails, and the trace shows the error.
    let _ = order;
    Err(ToolError::new("payment gateway timeout after 5s"))
}

/// Prints the trace as a tree: span name, duration, tokens, cost, errors.
fn print_tree(runs: &[RunRecord]) {
    fn walk(runs: &[RunRecord], run: &RunRecord, prefix: &str, last: bool, root: bool) {
        let mut line = String::new();
        if !root {
            line.push_str(prefix);
            line.push_str(if last { "└─ " } else { "├─ " });
        }
        line.push_str(&run.span_name());
        line.push_str(&format!("  {:.2} ms", run.duration_ms()));
        if let Some(model) = &run.model {
            if let Some(u) = &model.usage {
                line.push_str(&format!(
                    "  {} → {} tokens",
                    u.input_tokens, u.output_tokens
                ));
            }
            if let Some(cost) = model.cost {
                line.push_str(&format!("  ${cost:.4}"));
            }
        }
        if let Some(error) = &run.error {
            line.push_str(&format!("  ✗ {error}"));
        }
        println!("{line}");
        let mut children: Vec<&RunRecord> = runs
            .iter()
            .filter(|r| r.parent_id.as_deref() == Some(run.id.as_str()))
            .collect();
        children.sort_by_key(|r| r.start_ns);
        let next = if root {
            String::new()
        } else {
            format!("{prefix}{}", if last { "   " } else { "│  " })
        };
        for (i, child) in children.iter().enumerate() {
            walk(runs, child, &next, i + 1 == children.len(), false);
        }
    }
    let mut roots: Vec<&RunRecord> = runs.iter().filter(|r| r.parent_id.is_none()).collect();
    roots.sort_by_key(|r| r.start_ns);
    for root in roots {
        walk(runs, root, "", true, true);
    }
}

fn summary(runs: &[RunRecord]) -> String {
    let traces: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r.trace_id.as_str()).collect();
    let failed = runs.iter().filter(|r| r.error.is_some()).count();
    let (mut input, mut output, mut cost, mut calls) = (0, 0, 0.0, 0);
    for m in runs.iter().filter_map(|r| r.model.as_ref()) {
        calls += 1;
        if let Some(u) = &m.usage {
            input += u.input_tokens;
            output += u.output_tokens;
        }
        cost += m.cost.unwrap_or(0.0);
    }
    format!(
        "trace: {} runs in {} trace(s), {failed} failed, {calls} model calls, {input} → {output} tokens, ${cost:.4}",
        runs.len(),
        traces.len()
    )
}

async fn serve(file: PathBuf, port: u16) -> std::io::Result<()> {
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("port {port} is busy ({e}); using a free one");
            tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?
        }
    };
    println!(
        "serving the viewer on http://{}/ (Ctrl-C to stop)",
        listener.local_addr()?
    );
    loop {
        let (mut stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let file = file.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let n = stream.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, kind, body) = if path == "/" || path.starts_with("/?") {
                match viewer::render_json_lines(&file) {
                    Ok((html, _)) => ("200 OK", "text/html; charset=utf-8", html),
                    Err(e) => (
                        "500 Internal Server Error",
                        "text/plain; charset=utf-8",
                        format!("cannot read {}: {e}", file.display()),
                    ),
                }
            } else {
                (
                    "404 Not Found",
                    "text/plain; charset=utf-8",
                    "the viewer is at /".to_string(),
                )
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
        });
    }
}

fn fail(message: &str) -> ! {
    eprintln!("trace_viewer: {message}");
    std::process::exit(1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_it = args.iter().any(|a| a == "--serve");
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let port = match value_of("--port") {
        Some(p) => p
            .parse()
            .unwrap_or_else(|_| fail(&format!("--port {p}: not a port number"))),
        None => 8765,
    };
    let target =
        PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()));
    let html_path = target.join("kit-trace.html");

    let file = match value_of("--file") {
        Some(path) => PathBuf::from(path),
        None => {
            // Run the agent with the JSON-lines exporter: the embedded default, no backend.
            let file = target.join("kit-trace.jsonl");
            let _ = std::fs::remove_file(&file);
            let exporter = JsonLinesExporter::new(&file)
                .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", file.display())));
            let tracer = Tracer::new().with_exporter(exporter);
            let out = SupportDesk::invoke(
                "Where is my order A-1001, and what about my refund for A-0999?",
            )
            .thread_id("ticket-4711")
            .tracer(tracer.clone())
            .trace(
                TraceOptions::new()
                    .user_id("customer-42")
                    .session_id("web-9f3")
                    .execution_mode("chat")
                    .field("tenant", "acme"),
            )
            .await
            .unwrap_or_else(|e| fail(&e.to_string()))
            .into_state();
            println!("agent answer: {}", out.final_text());
            if !tracer.flush(Duration::from_secs(5)) {
                fail("the trace file was not written in time");
            }
            file
        }
    };
    let (runs, skipped) = kit::trace::read_json_lines(&file)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", file.display())));
    if skipped > 0 {
        eprintln!(
            "{skipped} line(s) of {} are not runs; skipped",
            file.display()
        );
    }
    println!("{}", summary(&runs));
    print_tree(&runs);
    viewer::write_html(&html_path, &runs)
        .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", html_path.display())));
    let shown = absolute(&html_path);
    println!("viewer: {}", shown.display());
    if serve_it {
        if let Err(e) = serve(file, port).await {
            fail(&format!("cannot serve: {e}"));
        }
    } else {
        println!(
            "open it: file://{}   (or serve it: cargo run --example trace_viewer -- --serve)",
            shown.display()
        );
    }
}

fn absolute(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

// ---------------------------------------------------------------------------------------------
// The scripted stand-in models, with the usage and cost a real provider would report: the desk
// looks up one order and refunds another in parallel, asks the writer for a reply, and answers.

fn desk_model() -> ScriptedModel {
    ScriptedModel::new([
        answer(
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::with_id("call_1", "lookup_order", json!({"order": "A-1001"})),
                    ToolCall::with_id("call_2", "refund", json!({"order": "A-0999"})),
                ],
            ),
            310,
            42,
            0.0021,
        ),
        answer(
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(
                    "call_3",
                    "task",
                    json!({"description": "Draft a friendly reply about A-1001 and the failed refund.",
                           "subagent_type": "writer"}),
                )],
            ),
            452,
            37,
            0.0016,
        ),
        answer(
            Message::assistant(
                "A-1001 ships tomorrow. The refund for A-0999 did not go through; a colleague will follow up today.",
            ),
            530,
            28,
            0.0014,
        ),
    ])
}

fn writer_model() -> ScriptedModel {
    ScriptedModel::new([answer(
        Message::assistant("Hi! Your order A-1001 ships tomorrow. We are looking into the refund."),
        96,
        21,
        0.0004,
    )])
}

/// A scripted answer with the usage and cost a real provider would report.
fn answer(mut m: Message, input: u64, output: u64, cost: f64) -> Message {
    m.usage = Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        ..Default::default()
    });
    m.metadata.insert("cost_usd".into(), json!(cost));
    m
}
