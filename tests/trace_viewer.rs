//! The trace viewer page, loaded in real headless Chromium: the tree's node names are in the
//! rendered DOM, and a screenshot is written to `target/trace-viewer.png`.
//!
//! Chromium comes from Debian's `chromium` package (`.ci/chromium.sh` installs it in CI). When
//! it is absent the test fails under `CI`, and is skipped loudly otherwise. `KIT_CHROMIUM`
//! points at another binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kit::agent::Agent;
use kit::middleware::subagents::SubagentSpec;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError, ToolOutput};
use kit::trace::{JsonLinesExporter, RunStatus, TraceOptions, Tracer, viewer};
use kit::{MemoryCheckpointer, Message, ToolCall, Usage};
use serde_json::json;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KIT_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// The cargo target directory (`target/` unless CARGO_TARGET_DIR says otherwise).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Runs headless Chromium with these arguments; stdout. Killed after two minutes.
fn run_chromium(bin: &Path, args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within two minutes: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn usage(mut m: Message, input: u64, output: u64, cost: f64) -> Message {
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[tokio::test]
async fn viewer_page_renders_the_tree_in_headless_chromium() {
    // A trace with a tool call, a failing tool call and a subagent, through the JSON-lines file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.jsonl");
    let tracer = Tracer::new().with_exporter(JsonLinesExporter::new(&file).unwrap());
    let model = ScriptedModel::new([
        usage(
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::with_id("c1", "lookup_order", json!({"order": "A-1001"})),
                    ToolCall::with_id("c2", "refund", json!({"order": "A-0999"})),
                    ToolCall::with_id(
                        "c3",
                        "task",
                        json!({"description": "draft a reply", "subagent_type": "writer"}),
                    ),
                ],
            ),
            310,
            42,
            0.0021,
        ),
        usage(
            Message::assistant("A-1001 ships tomorrow."),
            420,
            18,
            0.0012,
        ),
    ]);
    let writer = ScriptedModel::new([usage(Message::assistant("Draft ready."), 60, 9, 0.0003)]);
    let agent = Agent::builder()
        .name("support desk")
        .model(model)
        .tool(Tool::from_fn(
            "lookup_order",
            "Finds an order.",
            json!({"type": "object"}),
            |_a, _c| async { Ok::<_, ToolError>(ToolOutput::text("A-1001: shipped")) },
        ))
        .tool(Tool::from_fn(
            "refund",
            "Refunds an order.",
            json!({"type": "object"}),
            |_a, _c| async { Err::<ToolOutput, _>(ToolError::new("payment gateway timeout")) },
        ))
        .subagents([SubagentSpec::new("writer", "Drafts replies.").model(writer)])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    agent
        .invoke("Where is my order?")
        .thread_id("thread-1")
        .tracer(tracer.clone())
        .trace(TraceOptions::new().user_id("u-1").field("tenant", "acme"))
        .await
        .unwrap();
    assert!(tracer.flush(Duration::from_secs(10)));
    let (runs, bad) = kit::trace::read_json_lines(&file).unwrap();
    assert_eq!(bad, 0);
    assert!(runs.iter().any(|r| r.status == RunStatus::Error));

    let (html, skipped) = viewer::render_json_lines(&file).unwrap();
    assert_eq!(skipped, 0);
    let target = target_dir();
    let page = target.join("trace-viewer.html");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(&page, &html).unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());

    let Some(bin) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "headless Chromium is required in CI (apt-get install -y chromium, see .ci/chromium.sh)"
            );
        }
        eprintln!(
            "SKIPPED viewer_page_renders_the_tree_in_headless_chromium: no Chromium found \
             (apt-get install -y chromium, or set KIT_CHROMIUM); the page is at {}",
            page.display()
        );
        return;
    };

    // The rendered DOM: the script ran, and every run of the tree is a node with its name.
    let dom = run_chromium(&bin, &["--dump-dom".into(), url.clone()]);
    let status = format!("rendered {} runs in 1 trace", runs.len());
    assert!(dom.contains(&status), "no `{status}` in the DOM:\n{dom}");
    assert_eq!(
        dom.matches("class=\"run-name\"").count(),
        runs.len(),
        "one tree node per run"
    );
    for r in &runs {
        let node = format!("class=\"run-name\">{}</span>", escape(&r.name));
        assert!(dom.contains(&node), "no tree node for {:?}", r.name);
    }
    for name in [
        "support desk",
        "lookup_order",
        "refund",
        "task",
        "writer",
        "scripted",
    ] {
        assert!(
            dom.contains(&format!("class=\"run-name\">{name}</span>")),
            "{name}"
        );
    }
    // Errors, tokens and cost are shown: the failed run is marked and selected first.
    assert!(dom.contains("class=\"node error\""));
    assert!(dom.contains("payment gateway timeout"));
    assert!(dom.contains("790 in / 69 out"), "token totals of the trace");
    assert!(dom.contains("$0.0036"), "cost of the trace");
    assert!(dom.contains("class=\"bar-fill k-model\""), "timeline bars");

    // A screenshot, for people.
    let png = target.join("trace-viewer.png");
    let _ = std::fs::remove_file(&png);
    run_chromium(
        &bin,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,800".into(),
            url,
        ],
    );
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    eprintln!("screenshot: {}", png.display());
}
