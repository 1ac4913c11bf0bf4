//! kit's benchmark program: the workloads of `shared/bench/WORKLOADS.md`, measured the way the
//! Python LangGraph anchor measures them (per-repetition `Instant` timing, untimed warm-up,
//! median and nearest-rank p95, peak RSS of the process).
//!
//! ```text
//! cargo run --release --example bench -- compare    # kit and Python LangGraph, a ratio table
//! cargo run --release --example bench -- all        # every workload, each in its own process
//! cargo run --release --example bench -- w1         # one workload
//! cargo run --release --example bench -- w1 --reps=500
//! cargo run --release --example bench -- w2t        # W2 with tracing off / Collector / JSON-lines
//! cargo run --release --example bench -- w5         # checkpointing: memory, SQLite x3, size
//! KIT_BENCH_POSTGRES_URL=postgres://... cargo run --release --example bench -- w5  # + PostgreSQL
//! cargo run --release --example bench -- w7         # 1000 async-subagent runs on a worker
//! ```
//!
//! Output lines starting with `RESULT` have the anchor's format, so the two can be compared
//! line by line.

mod compare;

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kit::graph::{GraphBuilder, NodeContext, NodeError, Route};
use kit::{END, Graph, RunOptions, START, Send, State};
use serde::{Deserialize, Serialize};

const N_LINEAR: usize = 100;
const N_FAN: usize = 50;

// ---------------------------------------------------------------------------------------------
// measurement helpers

fn proc_status_kib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            let v: String = rest.chars().filter(|c| c.is_ascii_digit()).collect();
            return v.parse::<f64>().unwrap_or(f64::NAN);
        }
    }
    f64::NAN
}

/// Peak resident set size so far (VmHWM, the same figure as `ru_maxrss`), MiB.
fn maxrss_mib() -> f64 {
    proc_status_kib("VmHWM:") / 1024.0
}

struct Stats {
    n: usize,
    median: f64,
    p95: f64,
    min: f64,
    mean: f64,
}

fn stats(mut us: Vec<f64>) -> Stats {
    us.sort_by(|a, b| a.total_cmp(b));
    let n = us.len();
    let median = if n % 2 == 1 {
        us[n / 2]
    } else {
        (us[n / 2 - 1] + us[n / 2]) / 2.0
    };
    let k = ((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1;
    Stats {
        n,
        median,
        p95: us[k],
        min: us[0],
        mean: us.iter().sum::<f64>() / n as f64,
    }
}

fn report(name: &str, s: &Stats, per: &[(&str, f64)]) {
    let mut line = format!(
        "RESULT {name} n={} median_us={:.1} p95_us={:.1} min_us={:.1} mean_us={:.1}",
        s.n, s.median, s.p95, s.min, s.mean
    );
    for (label, divisor) in per {
        line.push_str(&format!(
            " per_{label}_median_us={:.3} per_{label}_p95_us={:.3}",
            s.median / divisor,
            s.p95 / divisor
        ));
    }
    line.push_str(&format!(" maxrss_mib={:.1}", maxrss_mib()));
    println!("{line}");
}

fn header(title: &str) {
    println!("# {title}");
    println!(
        "# kit {} (rustc release, lto=thin) on {}, {} cpus, runtime: tokio current_thread",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!("# maxrss after startup: {:.1} MiB", maxrss_mib());
}

async fn time_async<F, Fut>(warmup: usize, reps: usize, mut f: F) -> Vec<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..warmup {
        f().await;
    }
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f().await;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// W1: linear chain of 100 nodes

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Linear {
    counter: i64,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

fn linear_graph() -> Graph<Linear> {
    let mut b = GraphBuilder::<Linear>::new("w1");
    for i in 0..N_LINEAR {
        let name = format!("n{i}");
        let entry = name.clone();
        b = b.sync_node(name, move |s: &Linear, _: &NodeContext| {
            LinearUpdate::new()
                .counter(s.counter + 1)
                .log(vec![entry.clone()])
        });
    }
    b = b.edge(START, "n0");
    for i in 1..N_LINEAR {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    match b.edge(format!("n{}", N_LINEAR - 1), END).compile() {
        Ok(g) => g,
        Err(e) => fail(&format!("W1 graph: {e}")),
    }
}

fn check_linear(s: &Linear) {
    let expected: Vec<String> = (0..N_LINEAR).map(|i| format!("n{i}")).collect();
    if s.counter != N_LINEAR as i64 || s.log != expected {
        fail(&format!(
            "W1 check failed: counter={} log.len={}",
            s.counter,
            s.log.len()
        ));
    }
}

fn linear_input() -> LinearUpdate {
    LinearUpdate::new().counter(0).log(Vec::new())
}

async fn w1(reps: usize) {
    header("W1 linear chain, 100 nodes, invoke (no checkpointer)");
    let build = {
        let mut times = Vec::new();
        for i in 0..22 {
            let t = Instant::now();
            let g = linear_graph();
            let us = t.elapsed().as_secs_f64() * 1e6;
            std::hint::black_box(&g);
            if i >= 2 {
                times.push(us);
            }
        }
        times
    };
    report("W1 build+compile", &stats(build), &[]);
    let graph = linear_graph();
    let opts = RunOptions::new().recursion_limit(1000);
    let out = invoke_linear(&graph, &opts).await;
    check_linear(&out);
    let times = time_async(20, reps, || async {
        std::hint::black_box(invoke_linear(&graph, &opts).await);
    })
    .await;
    report(
        "W1 invoke",
        &stats(times),
        &[("node_step", N_LINEAR as f64)],
    );
}

async fn invoke_linear(graph: &Graph<Linear>, opts: &RunOptions) -> Linear {
    match graph.invoke(linear_input()).options(opts).await {
        Ok(out) => out.into_state(),
        Err(e) => fail(&format!("W1 invoke: {e}")),
    }
}

// ---------------------------------------------------------------------------------------------
// W3: fan-out 50 + join

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Fan {
    #[state(reducer = kit::reducers::append)]
    items: Vec<String>,
    joined: i64,
}

#[derive(Clone, Serialize, Deserialize)]
struct BranchArg {
    i: usize,
}

fn fan_graph(send: bool) -> Graph<Fan> {
    let mut b = GraphBuilder::<Fan>::new("w3")
        .sync_node("fan", |_: &Fan, _: &NodeContext| {
            FanUpdate::new().items(vec!["fan".to_string()])
        })
        .sync_node("join", |s: &Fan, _: &NodeContext| {
            FanUpdate::new()
                .items(vec!["join".to_string()])
                .joined(s.items.len() as i64)
        })
        .edge(START, "fan")
        .edge("join", END);
    if send {
        b = b
            .sync_node(
                "branch",
                |_: &Fan, ctx: &NodeContext| -> Result<FanUpdate, NodeError> {
                    let arg: BranchArg = ctx.arg()?;
                    Ok(FanUpdate::new().items(vec![format!("b{}", arg.i)]))
                },
            )
            .route("fan", ["branch"], |_: &Fan| {
                Route::Sends(
                    (0..N_FAN)
                        .map(|i| Send::new("branch", BranchArg { i }))
                        .collect(),
                )
            })
            .edge("branch", "join");
    } else {
        for i in 0..N_FAN {
            let name = format!("b{i}");
            let item = name.clone();
            b = b
                .sync_node(name.clone(), move |_: &Fan, _: &NodeContext| {
                    FanUpdate::new().items(vec![item.clone()])
                })
                .edge("fan", name.clone())
                .edge(name, "join");
        }
    }
    match b.compile() {
        Ok(g) => g,
        Err(e) => fail(&format!("W3 graph: {e}")),
    }
}

fn check_fan(s: &Fan) {
    let mut middle: Vec<String> = s.items[1..s.items.len() - 1].to_vec();
    middle.sort();
    let mut expected: Vec<String> = (0..N_FAN).map(|i| format!("b{i}")).collect();
    expected.sort();
    if s.items.first().map(String::as_str) != Some("fan")
        || s.items.last().map(String::as_str) != Some("join")
        || middle != expected
        || s.joined != 51
    {
        fail(&format!(
            "W3 check failed: {:?} joined={}",
            s.items, s.joined
        ));
    }
}

async fn w3(reps: usize) {
    header("W3 fan-out 50 + join, invoke (no checkpointer)");
    for (label, send) in [("invoke_static", false), ("invoke_send", true)] {
        let graph = fan_graph(send);
        let opts = RunOptions::new();
        let run = || async {
            match graph
                .invoke(FanUpdate::new().items(Vec::new()).joined(0))
                .options(&opts)
                .await
            {
                Ok(o) => o.into_state(),
                Err(e) => fail(&format!("W3 invoke: {e}")),
            }
        };
        check_fan(&run().await);
        let times = time_async(20, reps, || async {
            std::hint::black_box(run().await);
        })
        .await;
        report(
            &format!("W3 {label}"),
            &stats(times),
            &[("branch", N_FAN as f64), ("node_step", (N_FAN + 2) as f64)],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// W6: streaming per-node updates of W1

async fn w6(reps: usize) {
    header("W6 streaming updates of W1 (100 node_end events per invoke)");
    let graph = linear_graph();
    let opts = RunOptions::new().recursion_limit(1000);
    // Check once: 100 per-node update events, first and last as specified.
    let updates: Vec<kit::Event> = graph
        .stream_events(linear_input(), &opts)
        .filter(|e| std::future::ready(e.event == kit::EventKind::NodeEnd))
        .collect()
        .await;
    if updates.len() != N_LINEAR
        || updates[0].name != "n0"
        || updates[0].data["update"]["counter"] != 1
        || updates[99].name != "n99"
        || updates[99].data["update"]["log"] != serde_json::json!(["n99"])
    {
        fail(&format!("W6 check failed: {} events", updates.len()));
    }
    let mut first = Vec::with_capacity(reps);
    let mut total = Vec::with_capacity(reps);
    for rep in 0..(20 + reps) {
        let t = Instant::now();
        let mut stream = graph.stream_events(linear_input(), &opts);
        let mut seen = 0;
        let mut first_at = 0.0;
        while let Some(event) = stream.next().await {
            if event.event == kit::EventKind::NodeEnd {
                if seen == 0 {
                    first_at = t.elapsed().as_secs_f64() * 1e6;
                }
                seen += 1;
                if seen == N_LINEAR {
                    break;
                }
            }
        }
        let all = t.elapsed().as_secs_f64() * 1e6;
        if rep >= 20 {
            first.push(first_at);
            total.push(all);
        }
    }
    report("W6 first_event", &stats(first), &[]);
    let total = stats(total);
    report("W6 100_events", &total, &[("event", N_LINEAR as f64)]);
    println!(
        "RESULT W6 events_per_s median={:.0}",
        N_LINEAR as f64 / (total.median / 1e6)
    );
}

// ---------------------------------------------------------------------------------------------
// W2 / W4: the agent loop (model + add tool, 10 rounds) with an in-memory checkpointer

const ROUNDS: usize = 10;

/// Adds two integers.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

impl kit::tool::ToolHandler for Add {
    type Output = i64;
    async fn run(self, _ctx: kit::tool::ToolContext) -> Result<i64, kit::tool::ToolError> {
        Ok(self.a + self.b)
    }
}

/// The workload's stateless fake model: k tool results after the last human message → call
/// `add(k, 1)` while k < 10, else answer "done: <last tool result>".
fn fake_model() -> kit::testing::ScriptedModel {
    kit::testing::ScriptedModel::from_fn(|request| {
        let last_human = request
            .messages
            .iter()
            .rposition(|m| m.role == kit::Role::User)
            .unwrap_or(0);
        let tool_results: Vec<&kit::Message> = request.messages[last_human..]
            .iter()
            .filter(|m| m.role == kit::Role::Tool)
            .collect();
        let k = tool_results.len();
        Ok(if k < ROUNDS {
            kit::Message::assistant_with_tool_calls(
                "",
                vec![kit::ToolCall::with_id(
                    format!("call_{k}"),
                    "add",
                    serde_json::json!({"a": k, "b": 1}),
                )],
            )
        } else {
            let last = tool_results.last().map(|m| m.text()).unwrap_or_default();
            kit::Message::assistant(format!("done: {last}"))
        })
    })
}

fn w2_agent(checkpointer: Arc<dyn kit::Checkpointer>) -> kit::Agent {
    match kit::Agent::builder()
        .model(fake_model())
        .tool(Add::tool())
        .checkpointer(checkpointer)
        .build()
    {
        Ok(a) => a,
        Err(e) => fail(&format!("W2 agent: {e}")),
    }
}

fn check_w2(state: &kit::AgentState) {
    let tools = state
        .messages
        .iter()
        .filter(|m| m.role == kit::Role::Tool)
        .count();
    if state.messages.len() != 22 || state.final_text() != "done: 10" || tools != ROUNDS {
        fail(&format!(
            "W2 check failed: {} messages, final {:?}, {tools} tool messages",
            state.messages.len(),
            state.final_text()
        ));
    }
}

async fn run_w2(agent: &kit::Agent, thread: String) -> kit::AgentState {
    run_w2_traced(agent, thread, None).await
}

async fn run_w2_traced(
    agent: &kit::Agent,
    thread: String,
    tracer: Option<&kit::trace::Tracer>,
) -> kit::AgentState {
    let mut opts = RunOptions::new().thread_id(thread);
    if let Some(tracer) = tracer {
        opts = opts.tracer(tracer.clone());
    }
    if let Ok(d) = std::env::var("KIT_BENCH_DURABILITY") {
        opts = opts.durability(match d.as_str() {
            "sync" => kit::graph::Durability::Sync,
            "exit" => kit::graph::Durability::Exit,
            _ => kit::graph::Durability::Async,
        });
    }
    match agent.invoke("Add things up.").options(&opts).await {
        Ok(out) => out.into_state(),
        Err(e) => fail(&format!("W2 invoke: {e}")),
    }
}

async fn w2(reps: usize) {
    header("W2 agent loop (10 tool rounds), MemoryCheckpointer, new thread per run");
    let agent = w2_agent(Arc::new(kit::MemoryCheckpointer::new()));
    check_w2(&run_w2(&agent, "check".into()).await);
    let mut n = 0usize;
    let times = time_async(20, reps, || {
        n += 1;
        let thread = format!("w2-{n}");
        let agent = &agent;
        async move {
            drop(std::hint::black_box(run_w2(agent, thread).await));
        }
    })
    .await;
    report(
        "W2 ainvoke_sequential",
        &stats(times),
        &[("round", ROUNDS as f64), ("node_step", 21.0)],
    );
}

/// W2 with tracing off, into a [`kit::trace::Collector`], and into the JSON-lines file
/// exporter: the per-invoke (and per-run-record) cost of tracing.
async fn w2_trace(reps: usize) {
    use kit::trace::{Collector, Exporter, JsonLinesExporter, Tracer};
    header("W2 agent loop (10 tool rounds) with tracing off / Collector / JSON-lines file");
    let agent = w2_agent(Arc::new(kit::MemoryCheckpointer::new()));
    let collector = Collector::new();
    let file = std::env::temp_dir().join(format!("kit-bench-trace-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let jsonl = Arc::new(
        JsonLinesExporter::new(&file).unwrap_or_else(|e| fail(&format!("trace file: {e}"))),
    );
    let tracers = [
        ("trace_off", Tracer::new()),
        (
            "trace_collector",
            Tracer::new().with_exporter(collector.clone()),
        ),
        ("trace_jsonl", Tracer::new().with_exporter(jsonl.clone())),
    ];
    // Runs recorded per invoke (the same for both exporters).
    check_w2(&run_w2_traced(&agent, "check".into(), Some(&tracers[1].1)).await);
    let runs_per_invoke = collector.runs().len();
    collector.clear();
    let mut medians = Vec::new();
    let mut n = 0usize;
    for (label, tracer) in &tracers {
        let times = time_async(20, reps, || {
            n += 1;
            collector.clear();
            let thread = format!("w2t-{n}");
            let agent = &agent;
            async move {
                drop(std::hint::black_box(
                    run_w2_traced(agent, thread, Some(tracer)).await,
                ));
            }
        })
        .await;
        let s = stats(times);
        report(
            &format!("W2 {label}"),
            &s,
            &[("round", ROUNDS as f64), ("node_step", 21.0)],
        );
        medians.push(s.median);
    }
    if !jsonl.flush(std::time::Duration::from_secs(30)) {
        fail("the JSON-lines exporter did not drain");
    }
    let written = jsonl.stats();
    let _ = std::fs::remove_file(&file);
    let per_invoke = |i: usize| medians[i] - medians[0];
    println!(
        "RESULT W2 trace_overhead runs_per_invoke={runs_per_invoke} \
         collector_us_per_invoke={:.1} collector_us_per_run={:.3} \
         jsonl_us_per_invoke={:.1} jsonl_us_per_run={:.3} \
         jsonl_exported={} jsonl_dropped={}",
        per_invoke(1),
        per_invoke(1) / runs_per_invoke as f64,
        per_invoke(2),
        per_invoke(2) / runs_per_invoke as f64,
        written.exported,
        written.dropped
    );
}

async fn w4_round(runs: usize, round: usize) -> (f64, Vec<f64>, kit::AgentState, kit::AgentState) {
    let agent = w2_agent(Arc::new(kit::MemoryCheckpointer::new()));
    let start = Instant::now();
    let mut handles = Vec::with_capacity(runs);
    for i in 0..runs {
        let agent = agent.clone();
        handles.push(tokio::spawn(async move {
            let t = Instant::now();
            let state = run_w2(&agent, format!("r{round}-{i}")).await;
            (t.elapsed().as_secs_f64() * 1e6, state)
        }));
    }
    let mut latencies = Vec::with_capacity(runs);
    let (mut first, mut last) = (None, None);
    for h in handles {
        match h.await {
            Ok((us, state)) => {
                latencies.push(us);
                if first.is_none() {
                    first = Some(state);
                } else {
                    last = Some(state);
                }
            }
            Err(e) => fail(&format!("W4 run panicked: {e}")),
        }
    }
    let wall = start.elapsed().as_secs_f64();
    (
        wall,
        latencies,
        first.unwrap_or_default(),
        last.unwrap_or_default(),
    )
}

fn w4() {
    let workers = 2;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    println!("# W4 1000 concurrent agent runs (W2's agent), fresh MemoryCheckpointer per round");
    println!("# runtime: tokio multi_thread, {workers} workers; every run a spawned task");
    println!("# maxrss before rounds: {:.1} MiB", maxrss_mib());
    rt.block_on(async {
        let _ = w4_round(50, 0).await;
        let mut rates = Vec::new();
        for round in 1..=3 {
            let (wall, latencies, first, last) = w4_round(1000, round).await;
            rates.push(1000.0 / wall);
            check_w2(&first);
            check_w2(&last);
            let s = stats(latencies);
            println!(
                "RESULT W4 round={round} runs=1000 wall_s={wall:.3} runs_per_s={:.0} \
                 latency_median_us={:.0} latency_p95_us={:.0} per_node_step_us={:.3} \
                 rss_now_mib={:.1} maxrss_mib={:.1}",
                1000.0 / wall,
                s.median,
                s.p95,
                wall * 1e6 / (1000.0 * 21.0),
                proc_status_kib("VmRSS:") / 1024.0,
                maxrss_mib()
            );
        }
        rates.sort_by(|a, b| a.total_cmp(b));
        println!(
            "RESULT W4 summary rounds=3 runs=1000 runs_per_s_median={:.0} peak_maxrss_mib={:.1}",
            rates[rates.len() / 2],
            maxrss_mib()
        );
    });
}

// ---------------------------------------------------------------------------------------------
// W7: async-subagent runs on a kit worker over loopback HTTP

const W7_RUNS: usize = 1000;
const W7_CAPACITY: usize = 16;

/// Submits `runs` runs to the worker at `url` (at most 256 requests in flight), returns their
/// ids and the time the submissions took.
async fn w7_submit(http: &reqwest::Client, url: &str, runs: usize, round: usize) -> Vec<String> {
    use futures::StreamExt;
    futures::stream::iter(0..runs)
        .map(|i| {
            let http = http.clone();
            let url = url.to_string();
            async move {
                let body = serde_json::json!({"assistant_id": "research",
                    "input": {"messages": [{"role": "user", "content": format!("r{round} topic {i}")}]}});
                let response = match http.post(format!("{url}/runs")).json(&body).send().await {
                    Ok(r) => r,
                    Err(e) => fail(&format!("W7 submit: {e}")),
                };
                let run: serde_json::Value = match response.json().await {
                    Ok(v) => v,
                    Err(e) => fail(&format!("W7 submit answer: {e}")),
                };
                match run["run_id"].as_str() {
                    Some(id) => id.to_string(),
                    None => fail(&format!("W7 submit refused: {run}")),
                }
            }
        })
        .buffer_unordered(256)
        .collect()
        .await
}

fn w7() {
    let workers = 2;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    println!(
        "# W7 {W7_RUNS} async-subagent runs submitted concurrently over loopback HTTP to one kit \
         worker (capacity {W7_CAPACITY}, SQLite run store file, MemoryCheckpointer, the scripted \
         researcher agent: one model turn, one tool call, one answer per run)"
    );
    println!("# runtime: tokio multi_thread, {workers} workers; client and worker in one process");
    println!(
        "# tool=instant measures the worker's own cost per run; tool=20ms makes the capacity bind"
    );
    println!("# maxrss before rounds: {:.1} MiB", maxrss_mib());
    rt.block_on(async {
        w7_variant("instant", std::time::Duration::ZERO).await;
        w7_variant("20ms", std::time::Duration::from_millis(20)).await;
    });
}

async fn w7_variant(label: &str, delay: std::time::Duration) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("tempdir: {e}")));
    let stats = Arc::new(kit_examples::load::LoadStats::default());
    let agent = kit_examples::researcher::agent_with(kit_examples::researcher::Behaviour {
        gate: kit_examples::researcher::Gate::open(),
        delay,
    });
    let worker = kit::server::Worker::builder()
        .host(
            "research",
            kit_examples::load::Counting {
                inner: agent,
                stats: stats.clone(),
            },
        )
        .sqlite(dir.path().join("w7.sqlite"))
        .unwrap_or_else(|e| fail(&format!("W7 store: {e}")))
        .capacity(W7_CAPACITY)
        .build()
        .await
        .unwrap_or_else(|e| fail(&format!("W7 worker: {e}")));
    let handle = worker
        .start("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| fail(&format!("W7 start: {e}")));
    let url = handle.url();
    let http = reqwest::Client::new();
    let mut expected = 0;
    // Warm-up round (untimed).
    expected += w7_submit(&http, &url, 50, 0).await.len();
    stats.wait_finished(expected).await;
    for round in 1..=3 {
        let start = Instant::now();
        let ids = w7_submit(&http, &url, W7_RUNS, round).await;
        let submitted = start.elapsed().as_secs_f64();
        expected += ids.len();
        stats.wait_finished(expected).await;
        let wall = start.elapsed().as_secs_f64();
        // Completeness (untimed): every run succeeded, each executed exactly once.
        let executions = stats.executions();
        for id in &ids {
            match handle.store().get_run(id).await {
                Ok(Some(run)) if run.status == kit::server::RunStatus::Success => {}
                other => fail(&format!("W7 run {id} did not succeed: {other:?}")),
            }
            if executions.get(id) != Some(&1) {
                fail(&format!(
                    "W7 run {id} executed {:?} times",
                    executions.get(id)
                ));
            }
        }
        if stats.peak() > W7_CAPACITY {
            fail(&format!(
                "W7 ran {} at once (capacity {W7_CAPACITY})",
                stats.peak()
            ));
        }
        println!(
            "RESULT W7 tool={label} round={round} runs={W7_RUNS} capacity={W7_CAPACITY} \
             wall_s={wall:.3} runs_per_s={:.0} submit_s={submitted:.3} peak_concurrent={} \
             rss_now_mib={:.1} maxrss_mib={:.1}",
            W7_RUNS as f64 / wall,
            stats.peak(),
            proc_status_kib("VmRSS:") / 1024.0,
            maxrss_mib()
        );
    }
    if let Err(e) = handle.shutdown().await {
        fail(&format!("W7 shutdown: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// W5: W1 with a checkpointer (memory, SQLite in each durability mode), and the file size

async fn w5(reps: usize) {
    use kit::checkpoint::{Checkpointer, MemoryCheckpointer, SqliteCheckpointer};
    use kit::graph::Durability;
    use std::sync::Arc;

    header("W5 W1 + checkpointer (MemoryCheckpointer / SqliteCheckpointer file), invoke");
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("temp dir: {e}")));
    let mut next_thread = 0usize;
    let mut variants: Vec<(&str, Option<Durability>)> = vec![
        ("memory", None),
        ("sqlite-async", Some(Durability::Async)),
        ("sqlite-sync", Some(Durability::Sync)),
        ("sqlite-exit", Some(Durability::Exit)),
    ];
    // Not part of the anchor's W5: PostgreSQL too, when a server is given.
    let postgres_url = std::env::var("KIT_BENCH_POSTGRES_URL").ok();
    if postgres_url.is_some() {
        variants.push(("postgres-async", Some(Durability::Async)));
        variants.push(("postgres-sync", Some(Durability::Sync)));
    }
    for (tag, durability) in variants {
        // A fresh saver (SQLite: a fresh file; PostgreSQL: a fresh schema) per variant.
        let mut schema_to_drop = None;
        let saver: Arc<dyn Checkpointer> = match (durability, &postgres_url) {
            (None, _) => Arc::new(MemoryCheckpointer::new()),
            (Some(_), Some(url)) if tag.starts_with("postgres") => {
                let schema = format!("kit_bench_{}_{}", std::process::id(), tag.len());
                let pg = kit::checkpoint::PostgresCheckpointer::connect_in_schema(url, &schema)
                    .await
                    .unwrap_or_else(|e| fail(&format!("W5 connect {tag}: {e}")));
                schema_to_drop = Some(pg.clone());
                Arc::new(pg)
            }
            (Some(_), _) => {
                let path = dir.path().join(format!("timing-{tag}.sqlite"));
                Arc::new(
                    SqliteCheckpointer::open(&path)
                        .unwrap_or_else(|e| fail(&format!("W5 open {tag}: {e}"))),
                )
            }
        };
        let graph = linear_graph().with_checkpointer(saver);
        let base = RunOptions::new()
            .recursion_limit(1000)
            .durability(durability.unwrap_or_default());
        let mut opts = move || {
            next_thread += 1;
            base.clone().thread_id(format!("t{next_thread}"))
        };
        check_linear(&invoke_linear(&graph, &opts()).await);
        let times = time_async(10, reps, || {
            let o = opts();
            let g = &graph;
            async move {
                std::hint::black_box(invoke_linear(g, &o).await);
            }
        })
        .await;
        report(
            &format!("W5 invoke_{tag}"),
            &stats(times),
            &[("node_step", N_LINEAR as f64)],
        );
        next_thread += reps + 11;
        if let Some(pg) = schema_to_drop
            && let Err(e) = pg.drop_schema().await
        {
            eprintln!("W5: could not drop the benchmark schema: {e}");
        }
    }

    // Size: a fresh file after exactly 100 invokes on 100 distinct threads (default
    // durability).
    let path = dir.path().join("size.sqlite");
    let saver = Arc::new(
        SqliteCheckpointer::open(&path).unwrap_or_else(|e| fail(&format!("W5 open size: {e}"))),
    );
    let graph = linear_graph().with_checkpointer(saver.clone());
    for i in 0..100 {
        let opts = RunOptions::new()
            .recursion_limit(1000)
            .thread_id(format!("size-{i}"));
        check_linear(&invoke_linear(&graph, &opts).await);
    }
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal_path = dir.path().join("size.sqlite-wal");
    let (main_b, wal_b) = (size(&path), size(&wal_path));
    drop(graph);
    drop(saver);
    let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| fail(&format!("{e}")));
    let count = |sql: &str| -> i64 {
        conn.query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| fail(&format!("W5 `{sql}`: {e}")))
    };
    let threads = count("SELECT COUNT(DISTINCT thread_id) FROM kit_checkpoints");
    let checkpoints = count("SELECT COUNT(*) FROM kit_checkpoints");
    let blobs = count("SELECT COUNT(*) FROM kit_blobs");
    let writes = count("SELECT COUNT(*) FROM kit_writes");
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        fail(&format!("W5 wal_checkpoint: {e}"));
    }
    drop(conn);
    let after = size(&path);
    println!(
        "RESULT W5 db_size_after_100_invokes threads={threads} checkpoint_rows={checkpoints} \
         blob_rows={blobs} write_rows={writes} main_bytes={main_b} wal_bytes={wal_b} \
         main_after_wal_truncate_bytes={after} bytes_per_invoke={:.0}",
        after as f64 / 100.0
    );
}

// ---------------------------------------------------------------------------------------------

fn fail(message: &str) -> ! {
    eprintln!("bench: {message}");
    std::process::exit(1)
}

const WORKLOADS: &[&str] = &["w1", "w2", "w2t", "w3", "w4", "w5", "w6", "w7"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "all".to_string());
    let reps_arg: Option<usize> = args
        .iter()
        .find_map(|a| a.strip_prefix("--reps="))
        .and_then(|v| v.parse().ok());
    let reps_given = reps_arg.is_some();
    let reps = reps_arg.unwrap_or(200);
    if which == "compare" {
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
        compare::run(&exe, &["w1", "w2", "w3", "w4", "w5", "w6"]);
        return;
    }
    if which == "all" {
        // Each workload in its own process, so each peak RSS is its own.
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
        for w in WORKLOADS {
            let mut command = std::process::Command::new(&exe);
            command.arg(w);
            if reps_given {
                command.arg(format!("--reps={reps}"));
            }
            let status = command.status();
            if !matches!(status, Ok(s) if s.success()) {
                fail(&format!("workload {w} failed"));
            }
        }
        return;
    }
    if which == "w4" {
        w4();
        return;
    }
    if which == "w7" {
        w7();
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(async {
        match which.as_str() {
            "w1" => w1(reps).await,
            "w2" => w2(reps).await,
            "w2t" => w2_trace(reps).await,
            "w3" => w3(reps).await,
            "w5" => w5(if reps_given { reps } else { 100 }).await,
            "w6" => w6(reps).await,
            other => fail(&format!(
                "unknown workload `{other}`; choose one of {} or all",
                WORKLOADS.join(", ")
            )),
        }
    });
}
