//! W2 (the agent loop) and W4 (1000 concurrent agents).

use crate::fail;
use crate::measure::{header, maxrss_mib, proc_status_kib, report, stats, time_async};
use kit::RunOptions;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;

pub(crate) const ROUNDS: usize = 10;

/// Adds two integers.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
pub(crate) struct Add {
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
pub(crate) fn fake_model() -> kit::testing::ScriptedModel {
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

pub(crate) fn w2_agent(checkpointer: Arc<dyn kit::Checkpointer>) -> kit::Agent {
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

pub(crate) fn check_w2(state: &kit::AgentState) {
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

pub(crate) async fn run_w2(agent: &kit::Agent, thread: String) -> kit::AgentState {
    run_w2_traced(agent, thread, None).await
}

pub(crate) async fn run_w2_traced(
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

pub(crate) async fn w2(reps: usize) {
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
pub(crate) async fn w2_trace(reps: usize) {
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

pub(crate) async fn w4_round(
    runs: usize,
    round: usize,
) -> (f64, Vec<f64>, kit::AgentState, kit::AgentState) {
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

pub(crate) fn w4() {
    // `KIT_BENCH_W4_WORKERS` sets another count (to tell cross-core costs from the rest).
    let workers = std::env::var("KIT_BENCH_W4_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2);
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
                 rss_now_mib={:.1} rss_file_mib={:.1} maxrss_mib={:.1}",
                1000.0 / wall,
                s.median,
                s.p95,
                wall * 1e6 / (1000.0 * 21.0),
                proc_status_kib("VmRSS:") / 1024.0,
                proc_status_kib("RssFile:") / 1024.0,
                maxrss_mib()
            );
        }
        rates.sort_by(|a, b| a.total_cmp(b));
        // The peak counts the program's own pages mapped from its file (the benchmark program
        // holds every workload and feature, so more than an agent's binary would): printed
        // beside it, to tell them from the memory the runs hold.
        println!(
            "RESULT W4 summary rounds=3 runs=1000 runs_per_s_median={:.0} peak_maxrss_mib={:.1} \
             rss_file_mib={:.1}",
            rates[rates.len() / 2],
            maxrss_mib(),
            proc_status_kib("RssFile:") / 1024.0
        );
    });
}

// ---------------------------------------------------------------------------------------------
// W7: async-subagent runs on a kit worker over loopback HTTP
