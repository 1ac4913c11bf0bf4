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

const TEMPLATE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__KIT_TITLE__</title>
<style>
:root {
  --bg: #f6f7f9; --panel: #ffffff; --text: #1d2330; --muted: #6b7385; --line: #e3e6ec;
  --hover: #eef2fb; --sel: #dde7fb; --err: #d13c3c; --err-bg: #fdecec;
  --agent: #6d4bd8; --graph: #3a6fd8; --node: #8c93a3; --model: #0f9d76; --tool: #d8801c;
  --middleware: #b0569a; --task: #3a9bb8; --custom: #7a7f8c;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #14171d; --panel: #1c2028; --text: #e4e7ee; --muted: #98a0b3; --line: #2c323d;
          --hover: #232a36; --sel: #2b3850; --err-bg: #3a1f22; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 13px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       background: var(--bg); color: var(--text); }
header.top { display: flex; align-items: center; gap: 16px; padding: 10px 18px;
             background: var(--panel); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 2; }
header.top h1 { font-size: 15px; margin: 0; font-weight: 650; }
header.top .status { color: var(--muted); }
header.top .tools { margin-left: auto; display: flex; gap: 8px; align-items: center; }
button, input { font: inherit; color: inherit; }
.tools button { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 3px 10px; cursor: pointer; }
.tools input { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 3px 8px; width: 200px; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 420px; gap: 14px; padding: 14px 18px; align-items: start; }
@media (max-width: 1000px) { main { grid-template-columns: 1fr; } }
section.trace { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; margin-bottom: 14px; overflow: hidden; }
.trace-head { padding: 10px 14px; border-bottom: 1px solid var(--line); }
.trace-head h2 { font-size: 14px; margin: 0 0 4px; display: flex; gap: 8px; align-items: center; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; }
.chip { background: var(--bg); border: 1px solid var(--line); border-radius: 999px; padding: 0 8px; color: var(--muted); white-space: nowrap; }
.chip b { color: var(--text); font-weight: 600; }
.chip.err { color: var(--err); border-color: var(--err); background: var(--err-bg); }
.cols, .row { display: grid; grid-template-columns: minmax(220px, 2.2fr) 76px 92px 84px minmax(160px, 2fr); align-items: center; }
.cols { color: var(--muted); font-size: 11px; text-transform: uppercase; letter-spacing: .04em; padding: 4px 14px; border-bottom: 1px solid var(--line); }
ul.tree, ul.children { list-style: none; margin: 0; padding: 0; }
.row { padding: 2px 14px; cursor: pointer; border-bottom: 1px solid transparent; min-height: 26px; }
.row:hover { background: var(--hover); }
.row.selected { background: var(--sel); }
.node.collapsed > ul.children { display: none; }
.node.hidden > .row { display: none; }
.cell { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.cell.num { text-align: right; padding-right: 10px; font-variant-numeric: tabular-nums; color: var(--muted); }
.cell.num.own { color: var(--text); }
.name { display: flex; align-items: center; gap: 6px; }
.caret { width: 16px; height: 16px; border: 0; background: none; padding: 0; cursor: pointer; color: var(--muted);
         transition: transform .1s; flex: none; }
.node.collapsed > .row .caret { transform: rotate(-90deg); }
.caret.leaf { visibility: hidden; }
.badge { font-size: 10px; font-weight: 600; text-transform: uppercase; letter-spacing: .03em; color: #fff;
         border-radius: 4px; padding: 0 5px; flex: none; }
.run-name { overflow: hidden; text-overflow: ellipsis; }
.op { color: var(--muted); }
.erricon { color: #fff; background: var(--err); border-radius: 50%; width: 15px; height: 15px; font-size: 10px;
           display: inline-flex; align-items: center; justify-content: center; font-weight: 700; flex: none; }
.node.error > .row .run-name { color: var(--err); }
.bar { position: relative; height: 14px; background: linear-gradient(to right, var(--line) 1px, transparent 1px) 0 0 / 25% 100%; }
.bar-fill { position: absolute; top: 2px; height: 10px; border-radius: 3px; min-width: 2px; opacity: .9; }
.k-agent { background: var(--agent); } .k-graph { background: var(--graph); } .k-node { background: var(--node); }
.k-model { background: var(--model); } .k-tool { background: var(--tool); } .k-middleware { background: var(--middleware); }
.k-task { background: var(--task); } .k-custom { background: var(--custom); }
.bar-fill.err { background: var(--err); }
aside#detail { position: sticky; top: 58px; background: var(--panel); border: 1px solid var(--line); border-radius: 10px;
               padding: 12px 14px; max-height: calc(100vh - 76px); overflow: auto; }
aside h3 { margin: 0 0 6px; font-size: 14px; display: flex; gap: 8px; align-items: center; }
aside h4 { margin: 14px 0 4px; font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
dl { display: grid; grid-template-columns: 110px 1fr; gap: 2px 10px; margin: 0; }
dt { color: var(--muted); } dd { margin: 0; overflow-wrap: anywhere; }
pre { margin: 0; padding: 8px; background: var(--bg); border: 1px solid var(--line); border-radius: 6px;
      white-space: pre-wrap; overflow-wrap: anywhere; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; max-height: 360px; overflow: auto; }
.errbox { color: var(--err); background: var(--err-bg); border: 1px solid var(--err); border-radius: 6px; padding: 8px;
          white-space: pre-wrap; overflow-wrap: anywhere; }
.msg { border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; margin-bottom: 6px; }
.msg .role { font-size: 10px; font-weight: 700; text-transform: uppercase; color: var(--muted); }
.msg.user { border-left: 3px solid var(--graph); } .msg.assistant { border-left: 3px solid var(--model); }
.msg.tool { border-left: 3px solid var(--tool); } .msg.system { border-left: 3px solid var(--node); }
.msg .text { white-space: pre-wrap; overflow-wrap: anywhere; }
.call { font-family: ui-monospace, monospace; font-size: 12px; color: var(--tool); overflow-wrap: anywhere; }
.empty { color: var(--muted); padding: 30px; text-align: center; }
</style>
</head>
<body>
<header class="top">
  <h1>__KIT_TITLE__</h1>
  <span class="status" id="kit-status">loading…</span>
  <div class="tools">
    <input id="filter" type="search" placeholder="Filter runs by name…" aria-label="Filter runs by name">
    <button id="expand" type="button">Expand all</button>
    <button id="collapse" type="button">Collapse all</button>
  </div>
</header>
<noscript><p class="empty">This page draws the trace with JavaScript; enable it to see the tree.</p></noscript>
<main>
  <div id="traces"></div>
  <aside id="detail"><p class="empty">Select a run to see its inputs, outputs, tokens and errors.</p></aside>
</main>
<script type="application/json" id="kit-trace-data">__KIT_DATA__</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("kit-trace-data").textContent);
  var runs = data.runs || [];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function dur(us) {
    if (!(us >= 0)) return "";
    if (us < 1000) return us.toFixed(0) + " µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + " ms";
    return (us / 1e6).toFixed(2) + " s";
  }
  function money(c) { return c > 0 && c < 0.01 ? "$" + Number(c.toPrecision(2)) : "$" + c.toFixed(4); }
  function tok(n) { return n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(n); }
  function pretty(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }
  function isEmpty(v) {
    return v === undefined || v === null || (typeof v === "object" && Object.keys(v).length === 0);
  }

  // Group runs into traces and trees.
  var byTrace = {}, order = [];
  runs.forEach(function (r) {
    if (!byTrace[r.trace_id]) { byTrace[r.trace_id] = []; order.push(r.trace_id); }
    byTrace[r.trace_id].push(r);
  });
  var byId = {};
  var traces = order.map(function (tid) {
    var list = byTrace[tid], ids = {};
    list.forEach(function (r) { r.children = []; ids[r.id] = r; byId[r.id] = r; });
    var roots = [];
    list.forEach(function (r) {
      var p = r.parent_id && ids[r.parent_id];
      if (p) p.children.push(r); else roots.push(r);
    });
    function byStart(a, b) { return a.offset_us - b.offset_us; }
    list.forEach(function (r) { r.children.sort(byStart); });
    roots.sort(byStart);
    function total(r) {
      var t = { inp: 0, out: 0, cost: 0, errors: r.status === "error" ? 1 : 0, hasCost: false };
      var u = r.model && r.model.usage;
      if (u) { t.inp += u.input_tokens || 0; t.out += u.output_tokens || 0; }
      if (r.model && typeof r.model.cost === "number") { t.cost += r.model.cost; t.hasCost = true; }
      r.children.forEach(function (c) {
        var ct = total(c);
        t.inp += ct.inp; t.out += ct.out; t.cost += ct.cost; t.errors += ct.errors;
        t.hasCost = t.hasCost || ct.hasCost;
      });
      r.totals = t;
      return t;
    }
    var sum = { inp: 0, out: 0, cost: 0, errors: 0, hasCost: false };
    roots.forEach(function (r) {
      var t = total(r);
      sum.inp += t.inp; sum.out += t.out; sum.cost += t.cost; sum.errors += t.errors;
      sum.hasCost = sum.hasCost || t.hasCost;
    });
    var span = 1, start = Infinity;
    list.forEach(function (r) {
      span = Math.max(span, r.offset_us + r.duration_us);
      start = Math.min(start, r.start_ms);
    });
    return { id: tid, roots: roots, runs: list, span: span, start: start, totals: sum };
  });
  traces.sort(function (a, b) { return b.start - a.start; });

  var container = document.getElementById("traces");
  var detail = document.getElementById("detail");
  var rowsById = {};
  var selected = null;

  function chip(label, value, cls) {
    var c = el("span", "chip" + (cls ? " " + cls : ""));
    c.appendChild(document.createTextNode(label + " "));
    c.appendChild(el("b", null, value));
    return c;
  }

  function tokensCell(r) {
    var u = r.model && r.model.usage;
    if (u) return { text: tok(u.input_tokens || 0) + " → " + tok(u.output_tokens || 0), own: true };
    var t = r.totals;
    if (t.inp || t.out) return { text: tok(t.inp) + " → " + tok(t.out), own: false };
    return { text: "", own: false };
  }

  function renderNode(r, depth, trace) {
    var li = el("li", "node" + (r.status === "error" ? " error" : ""));
    li.setAttribute("role", "treeitem");
    li.dataset.name = (r.name + " " + (r.span_name || "")).toLowerCase();
    var row = el("div", "row");
    row.dataset.id = r.id;
    rowsById[r.id] = row;
    var name = el("div", "cell name");
    name.style.paddingLeft = (depth * 16) + "px";
    var caret = el("button", "caret" + (r.children.length ? "" : " leaf"), "▾");
    caret.type = "button";
    caret.setAttribute("aria-label", "expand or collapse");
    caret.addEventListener("click", function (ev) {
      ev.stopPropagation();
      li.classList.toggle("collapsed");
      li.setAttribute("aria-expanded", li.classList.contains("collapsed") ? "false" : "true");
    });
    name.appendChild(caret);
    name.appendChild(el("span", "badge k-" + r.kind, r.kind));
    if (r.kind === "model") name.appendChild(el("span", "op", "chat"));
    name.appendChild(el("span", "run-name", r.name));
    if (r.status === "error") name.appendChild(el("span", "erricon", "!"));
    name.title = r.span_name || r.name;
    row.appendChild(name);
    row.appendChild(el("div", "cell num own", dur(r.duration_us)));
    var tc = tokensCell(r);
    row.appendChild(el("div", "cell num" + (tc.own ? " own" : ""), tc.text));
    var own = r.model && typeof r.model.cost === "number";
    row.appendChild(el("div", "cell num" + (own ? " own" : ""),
      own ? money(r.model.cost) : (r.totals.hasCost ? money(r.totals.cost) : "")));
    var bar = el("div", "cell bar");
    var fill = el("div", "bar-fill k-" + r.kind + (r.status === "error" ? " err" : ""));
    fill.style.left = (100 * r.offset_us / trace.span).toFixed(3) + "%";
    fill.style.width = Math.max(0.3, 100 * r.duration_us / trace.span).toFixed(3) + "%";
    fill.title = dur(r.duration_us) + " at +" + dur(r.offset_us);
    bar.appendChild(fill);
    row.appendChild(bar);
    row.addEventListener("click", function () { select(r); });
    li.appendChild(row);
    if (r.children.length) {
      li.setAttribute("aria-expanded", "true");
      var ul = el("ul", "children");
      ul.setAttribute("role", "group");
      r.children.forEach(function (c) { ul.appendChild(renderNode(c, depth + 1, trace)); });
      li.appendChild(ul);
    }
    return li;
  }

  function renderTrace(t) {
    var sec = el("section", "trace");
    var head = el("div", "trace-head");
    var root = t.roots[0];
    var h = el("h2");
    if (root) h.appendChild(el("span", "badge k-" + root.kind, root.kind));
    h.appendChild(el("span", "trace-name", root ? root.name : t.id));
    head.appendChild(h);
    var chips = el("div", "chips");
    chips.appendChild(chip("duration", dur(t.span)));
    chips.appendChild(chip("runs", t.runs.length));
    if (t.totals.inp || t.totals.out)
      chips.appendChild(chip("tokens", tok(t.totals.inp) + " in / " + tok(t.totals.out) + " out"));
    if (t.totals.hasCost) chips.appendChild(chip("cost", money(t.totals.cost)));
    if (t.totals.errors) chips.appendChild(chip("errors", t.totals.errors, "err"));
    if (isFinite(t.start)) chips.appendChild(chip("started", new Date(t.start).toLocaleString()));
    if (root) {
      [["thread", root.thread_id], ["user", root.user_id], ["session", root.session_id],
       ["mode", root.execution_mode], ["env", root.environment]].forEach(function (p) {
        if (p[1]) chips.appendChild(chip(p[0], p[1]));
      });
      Object.keys(root.custom_fields || {}).forEach(function (k) {
        chips.appendChild(chip(k, root.custom_fields[k]));
      });
    }
    head.appendChild(chips);
    sec.appendChild(head);
    var cols = el("div", "cols");
    ["Run", "Duration", "Tokens", "Cost", "Timeline 0 – " + dur(t.span)].forEach(function (c, i) {
      cols.appendChild(el("div", i > 0 && i < 4 ? "cell num" : "cell", c));
    });
    sec.appendChild(cols);
    var ul = el("ul", "tree");
    ul.setAttribute("role", "tree");
    t.roots.forEach(function (r) { ul.appendChild(renderNode(r, 0, t)); });
    sec.appendChild(ul);
    return sec;
  }

  function renderMessages(parent, list) {
    list.forEach(function (m) {
      if (!m || typeof m !== "object") return;
      var role = m.role || "?";
      var box = el("div", "msg " + role);
      box.appendChild(el("div", "role", role + (m.name && role === "tool" ? " · " + m.name : "")));
      var text = "";
      if (typeof m.content === "string") text = m.content;
      else if (Array.isArray(m.content)) text = m.content.map(function (p) {
        return p && p.type === "text" ? p.text : "[" + (p && p.type) + "]";
      }).join("");
      if (text) box.appendChild(el("div", "text", text));
      (m.tool_calls || []).forEach(function (c) {
        box.appendChild(el("div", "call", "→ " + c.name + "(" + JSON.stringify(c.args) + ")"));
      });
      parent.appendChild(box);
    });
  }

  function section(title, node) {
    detail.appendChild(el("h4", null, title));
    detail.appendChild(node);
  }

  function select(r) {
    if (selected && rowsById[selected]) rowsById[selected].classList.remove("selected");
    selected = r.id;
    if (rowsById[r.id]) rowsById[r.id].classList.add("selected");
    detail.textContent = "";
    var h = el("h3");
    h.appendChild(el("span", "badge k-" + r.kind, r.kind));
    h.appendChild(el("span", null, r.span_name || r.name));
    detail.appendChild(h);
    var dl = el("dl");
    function row(k, v) { if (v === undefined || v === null || v === "") return; dl.appendChild(el("dt", null, k)); dl.appendChild(el("dd", null, v)); }
    row("status", r.status);
    row("duration", dur(r.duration_us));
    row("started", new Date(r.start_ms).toISOString() + " (+" + dur(r.offset_us) + ")");
    row("run id", r.id);
    row("parent", r.parent_id);
    row("trace id", r.trace_id);
    row("thread", r.thread_id);
    row("user", r.user_id);
    row("session", r.session_id);
    row("mode", r.execution_mode);
    row("environment", r.environment);
    if (r.tags && r.tags.length) row("tags", r.tags.join(", "));
    Object.keys(r.custom_fields || {}).forEach(function (k) { row(k, r.custom_fields[k]); });
    detail.appendChild(dl);
    if (r.error) section("Error", el("div", "errbox", r.error));
    if (r.model) {
      var m = el("dl");
      function mrow(k, v) { if (v === undefined || v === null || v === "") return; m.appendChild(el("dt", null, k)); m.appendChild(el("dd", null, v)); }
      mrow("provider", r.model.provider);
      mrow("model", r.model.model);
      var u = r.model.usage;
      if (u) {
        mrow("input tokens", u.input_tokens);
        mrow("output tokens", u.output_tokens);
        if (u.cache_read_tokens) mrow("cache read", u.cache_read_tokens);
        if (u.cache_creation_tokens) mrow("cache write", u.cache_creation_tokens);
      }
      if (typeof r.model.cost === "number") mrow("cost", money(r.model.cost));
      mrow("finish", r.model.finish_reason);
      mrow("structured", r.model.structured_output);
      if (!isEmpty(r.model.params)) mrow("params", JSON.stringify(r.model.params));
      section("Model", m);
    } else if (r.totals && (r.totals.inp || r.totals.out || r.totals.hasCost)) {
      var t = el("dl");
      t.appendChild(el("dt", null, "tokens (all)"));
      t.appendChild(el("dd", null, r.totals.inp + " in / " + r.totals.out + " out"));
      if (r.totals.hasCost) { t.appendChild(el("dt", null, "cost (all)")); t.appendChild(el("dd", null, money(r.totals.cost))); }
      section("Usage below this run", t);
    }
    if (r.tool) {
      var tl = el("dl");
      tl.appendChild(el("dt", null, "call id")); tl.appendChild(el("dd", null, r.tool.call_id));
      if (r.tool.description) { tl.appendChild(el("dt", null, "description")); tl.appendChild(el("dd", null, r.tool.description)); }
      section("Tool", tl);
    }
    if (r.kind === "model" && r.inputs && Array.isArray(r.inputs.messages)) {
      var box = el("div");
      var list = r.inputs.system ? [{ role: "system", content: r.inputs.system }].concat(r.inputs.messages) : r.inputs.messages;
      renderMessages(box, list);
      section("Input messages", box);
      if (r.outputs && r.outputs.message) {
        var out = el("div");
        renderMessages(out, [r.outputs.message]);
        section("Output message", out);
      } else if (!isEmpty(r.outputs)) section("Outputs", el("pre", null, pretty(r.outputs)));
    } else {
      if (!isEmpty(r.inputs)) section("Inputs", el("pre", null, pretty(r.inputs)));
      if (!isEmpty(r.outputs)) section("Outputs", el("pre", null, pretty(r.outputs)));
    }
    if (!isEmpty(r.metadata)) section("Metadata", el("pre", null, pretty(r.metadata)));
  }

  if (!traces.length) {
    container.appendChild(el("p", "empty", "No runs in this trace file yet."));
  }
  traces.forEach(function (t) { container.appendChild(renderTrace(t)); });

  function all(fn) { Array.prototype.forEach.call(document.querySelectorAll(".node"), fn); }
  document.getElementById("expand").addEventListener("click", function () {
    all(function (n) { n.classList.remove("collapsed"); });
  });
  document.getElementById("collapse").addEventListener("click", function () {
    all(function (n) { if (n.querySelector(".children")) n.classList.add("collapsed"); });
  });
  document.getElementById("filter").addEventListener("input", function (ev) {
    var q = ev.target.value.trim().toLowerCase();
    all(function (n) {
      var match = !q || n.dataset.name.indexOf(q) >= 0;
      n.classList.toggle("hidden", !match);
      if (q && match) {
        for (var p = n.parentElement && n.parentElement.closest(".node"); p; p = p.parentElement && p.parentElement.closest(".node")) {
          p.classList.remove("collapsed");
        }
      }
    });
  });

  // Start on the first failed run, else the newest trace's root.
  var firstError = runs.filter(function (r) { return r.status === "error"; })[0];
  var start = firstError || (traces[0] && traces[0].roots[0]);
  if (start) select(byId[start.id]);
  var errors = runs.filter(function (r) { return r.status === "error"; }).length;
  document.getElementById("kit-status").textContent =
    "rendered " + runs.length + " runs in " + traces.length + " trace" + (traces.length === 1 ? "" : "s") +
    (errors ? " · " + errors + " failed" : "");
})();
</script>
</body>
</html>
"##;

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
