//! The trace viewer: one self-contained HTML page (no external assets, works from `file://`)
//! showing traces as collapsible trees with a timeline, and for each run its inputs, outputs,
//! tokens, cost and errors.
//!
//! The runs are embedded as JSON and drawn by a small inline script; every value is inserted as
//! text, never as markup. Write the page from a JSON-lines trace file
//! ([`JsonLinesExporter`](super::JsonLinesExporter), `KIT_TRACE_FILE`) or from a
//! [`Collector`](super::Collector):
//!
//! ```
//! use kit::trace::{self, Collector, RunKind, Tracer};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
//! let collector = Collector::new();
//! let tracer = Tracer::new().with_exporter(collector.clone());
//! let root = tracer.start("checkout", RunKind::Agent, || json!({"cart": 3}), None);
//! root.clone().scope(async {
//!     let step = trace::start_run("price lookup", RunKind::Custom, json!({"sku": "A1"}), None);
//!     trace::finish_run(&step, json!({"price": 42}));
//! }).await;
//! root.finish(json!({"total": 42}));
//!
//! let html = kit::trace::viewer::render_html(&collector.runs());
//! assert!(html.starts_with("<!doctype html>"));
//! assert!(html.contains("price lookup"));
//! let dir = tempfile::tempdir()?;
//! kit::trace::viewer::write_html(dir.path().join("trace.html"), &collector.runs())?;
//! # Ok(()) }
//! ```
//!
//! `cargo run --example trace_viewer` runs a small agent, writes `target/kit-trace.html` and
//! prints how to open it; `-- --serve` serves it on 127.0.0.1; `-- --file traces.jsonl` shows an
//! existing trace file.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::exporter::read_json_lines;
use super::record::RunRecord;

#[derive(Serialize)]
struct ViewRun<'a> {
    #[serde(flatten)]
    run: &'a RunRecord,
    /// Start, relative to the trace's first run, in µs.
    offset_us: f64,
    /// Duration, µs.
    duration_us: f64,
    /// Start, Unix milliseconds (JavaScript's `Date`).
    start_ms: f64,
    /// The OpenTelemetry GenAI span name.
    span_name: String,
}

#[derive(Serialize)]
struct ViewData<'a> {
    title: &'a str,
    generated_ms: f64,
    runs: Vec<ViewRun<'a>>,
}

/// The page for these runs (any number of traces; newest first).
pub fn render_html(runs: &[RunRecord]) -> String {
    render_html_titled(runs, "kit trace")
}

/// The page, with its own title.
pub fn render_html_titled(runs: &[RunRecord], title: &str) -> String {
    let mut first: HashMap<&str, u64> = HashMap::new();
    for r in runs {
        let t = first.entry(r.trace_id.as_str()).or_insert(r.start_ns);
        *t = (*t).min(r.start_ns);
    }
    let view = ViewData {
        title,
        generated_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap_or(0.0),
        runs: runs
            .iter()
            .map(|r| {
                let t0 = first
                    .get(r.trace_id.as_str())
                    .copied()
                    .unwrap_or(r.start_ns);
                ViewRun {
                    run: r,
                    offset_us: r.start_ns.saturating_sub(t0) as f64 / 1e3,
                    duration_us: r.end_ns.saturating_sub(r.start_ns) as f64 / 1e3,
                    start_ms: r.start_ns as f64 / 1e6,
                    span_name: r.span_name(),
                }
            })
            .collect(),
    };
    let json = serde_json::to_string(&view).unwrap_or_else(|_| "{\"runs\":[]}".to_string());
    TEMPLATE
        .replace("__KIT_TITLE__", &escape_html(title))
        .replace("__KIT_DATA__", &escape_script_json(&json))
}

/// Writes the page to `path` (parent directories are created).
pub fn write_html(path: impl AsRef<Path>, runs: &[RunRecord]) -> std::io::Result<()> {
    let path = path.as_ref();
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, render_html(runs))
}

/// The page for a JSON-lines trace file, and how many of its lines were not runs (skipped).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let file = dir.path().join("runs.jsonl");
/// std::fs::write(&file, "not json\n")?;
/// let (html, skipped) = kit::trace::viewer::render_json_lines(&file)?;
/// assert_eq!(skipped, 1);
/// assert!(html.contains("kit-trace-data"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn render_json_lines(path: impl AsRef<Path>) -> std::io::Result<(String, usize)> {
    let (runs, bad) = read_json_lines(path)?;
    Ok((render_html(&runs), bad))
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON that can sit inside `<script>`: no `<`, `>`, `&` or line separators left raw (they can
/// only occur inside JSON strings, where `\uXXXX` means the same).
fn escape_script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page: HTML, CSS and the script that draws the runs, in a file of its own.
const TEMPLATE: &str = include_str!("template.html");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_break_out_of_the_script() {
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "id": "a", "trace_id": "a", "name": "</script><img src=x onerror=alert(1)>",
            "kind": "custom", "start_ns": 5, "end_ns": 9, "status": "ok",
            "inputs": {"q": "<!-- & \u{2028}"}
        }))
        .unwrap();
        let html = render_html_titled(&[run], "<b>title</b>");
        assert_eq!(html.matches("</script>").count(), 2, "only the page's own");
        assert!(!html.contains("<img"));
        assert!(html.contains("<title>&lt;b&gt;title&lt;/b&gt;</title>"));
        let start = html.find("kit-trace-data\">").unwrap() + "kit-trace-data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let data: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(
            data["runs"][0]["name"],
            "</script><img src=x onerror=alert(1)>"
        );
        assert_eq!(data["runs"][0]["duration_us"], 0.004);
    }
}
