//! Growth: the same work at growing sizes, each size in its own process, so a cost that grows
//! with the history (a copy of the conversation per call, a scan per message, a replay per
//! load) shows as a curve instead of hiding in a fixed-size figure.
//!
//! ```text
//! bench growth                          # every curve
//! bench growth --quick                  # every curve at small sizes (CI)
//! bench growth --curve=rounds           # one curve
//! bench growth --curve=rounds --size=1000 --store=sqlite   # one point (what the curve runs)
//! ```
//!
//! Each point prints a `RESULT growth <curve> size=<n> ...` line; each curve ends with a
//! `RESULT growth <curve> ratio=<largest per-unit / smallest per-unit>` line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kit::checkpoint::{Checkpointer, MemoryCheckpointer, SqliteCheckpointer};
use kit::graph::{GraphBuilder, NodeContext, NodeError, Route};
use kit::{END, Graph, Message, RunOptions, START, Send, State, ToolCall};
use serde::{Deserialize, Serialize};

use crate::agent::{Add, check_w2, run_w2, w2_agent};
use crate::fail;
use crate::measure::{maxrss_mib, proc_status_kib};

/// The curves, their sizes, and the unit their per-unit figure is in.
const CURVES: &[Curve] = &[
    ("rounds", &[10, 100, 1_000, 5_000], "round"),
    ("traced", &[10, 100, 1_000], "round"),
    ("thread", &[10, 1_000], "invoke"),
    ("chain", &[10, 100, 10_000], "step"),
    ("fanout", &[100, 10_000], "branch"),
    ("untouched", &[0, 10 << 20], "step"),
    ("concurrent", &[1_000, 10_000, 50_000], "run"),
    ("slow_stream", &[1_000, 20_000], "event"),
];

/// `--quick` (what `bench all` and CI run): the same curves at small sizes, every result
/// checked, in seconds.
const QUICK: &[Curve] = &[
    ("rounds", &[10, 200], "round"),
    ("traced", &[10, 200], "round"),
    ("thread", &[10, 100], "invoke"),
    ("chain", &[10, 1_000], "step"),
    ("fanout", &[100, 1_000], "branch"),
    ("untouched", &[0, 1 << 20], "step"),
    ("concurrent", &[100, 1_000], "run"),
    ("slow_stream", &[500, 2_000], "event"),
];

/// A curve: its name, its sizes, and the unit its per-unit figure is in.
type Curve = (&'static str, &'static [usize], &'static str);

/// `bench growth [--quick] [--curve=c] [--size=n] [--store=memory|sqlite]`.
pub(crate) fn growth(args: &[String]) {
    let arg = |name: &str| args.iter().find_map(|a| a.strip_prefix(name));
    let store = arg("--store=").unwrap_or("memory");
    let curves = if args.iter().any(|a| a == "--quick") {
        QUICK
    } else {
        CURVES
    };
    match (arg("--curve="), arg("--size=").and_then(|s| s.parse().ok())) {
        (Some(curve), Some(size)) => point(curve, size, store),
        (only, _) => {
            for (curve, sizes, unit) in curves {
                if only.is_some_and(|c| c != *curve) {
                    continue;
                }
                let stores: &[&str] = match *curve {
                    "rounds" | "thread" => &["memory", "sqlite"],
                    _ => &["memory"],
                };
                for store in stores {
                    let per_unit: Vec<f64> = sizes
                        .iter()
                        .map(|size| spawn_point(curve, *size, store))
                        .collect();
                    let (first, last) = (per_unit[0], per_unit[per_unit.len() - 1]);
                    println!(
                        "RESULT growth {curve} store={store} ratio={:.2} (per {unit}: {first:.3} us \
                         at {} vs {last:.3} us at {})",
                        last / first,
                        sizes[0],
                        sizes[sizes.len() - 1]
                    );
                }
            }
        }
    }
}

/// Runs one point in a child process; returns its per-unit figure.
fn spawn_point(curve: &str, size: usize, store: &str) -> f64 {
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
    let out = std::process::Command::new(exe)
        .args([
            "growth".to_string(),
            format!("--curve={curve}"),
            format!("--size={size}"),
            format!("--store={store}"),
        ])
        .output()
        .unwrap_or_else(|e| fail(&format!("growth {curve} {size}: {e}")));
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        fail(&format!("growth {curve} size={size} failed"));
    }
    text.lines()
        .filter(|l| l.starts_with("RESULT growth"))
        .find_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("per_unit_us="))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or_else(|| fail(&format!("growth {curve} size={size}: no figure")))
}

fn point(curve: &str, size: usize, store: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("temp dir: {e}")));
    let path = dir.path().join("growth.sqlite");
    let memory = Arc::new(MemoryCheckpointer::new());
    let saver: Arc<dyn Checkpointer> = match store {
        "sqlite" => Arc::new(
            SqliteCheckpointer::open(&path).unwrap_or_else(|e| fail(&format!("sqlite: {e}"))),
        ),
        _ => memory.clone(),
    };
    let stored_bytes = || match store {
        "sqlite" => {
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
                + std::fs::metadata(path.with_extension("sqlite-wal"))
                    .map(|m| m.len())
                    .unwrap_or(0)
        }
        _ => memory.stored_bytes() as u64,
    };
    let (per_unit, extra) = rt.block_on(async {
        match curve {
            "rounds" => rounds(size, saver.clone(), None).await,
            "traced" => traced(size, saver.clone()).await,
            "thread" => thread(size, saver.clone()).await,
            "chain" => chain(size).await,
            "fanout" => fanout(size).await,
            "untouched" => untouched(size).await,
            "concurrent" => concurrent(size).await,
            "slow_stream" => slow_stream(size).await,
            other => fail(&format!("unknown growth curve `{other}`")),
        }
    });
    let bytes = match curve {
        // Every invoke of the point wrote its own thread: bytes per round of one of them.
        "rounds" => format!(
            " checkpoint_bytes_per_round={}",
            stored_bytes() / (size * (round_reps(size) + 1)) as u64
        ),
        _ => String::new(),
    };
    println!(
        "RESULT growth {curve} store={store} size={size} per_unit_us={per_unit:.3}{bytes}{extra} \
         maxrss_mib={:.1}",
        maxrss_mib()
    );
}

// ---------------------------------------------------------------------------------------------
// rounds: one agent invoke with `size` tool rounds

/// A model that calls `add` until the last tool result reaches `rounds`, then answers; it
/// reads only the last message, so its own cost does not grow.
fn counting_model(rounds: usize) -> kit::testing::ScriptedModel {
    kit::testing::ScriptedModel::from_fn(move |request| {
        let done: usize = request
            .messages
            .last()
            .filter(|m| m.role == kit::Role::Tool)
            .and_then(|m| m.text().parse().ok())
            .unwrap_or(0);
        Ok(if done < rounds {
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(
                    format!("call_{done}"),
                    "add",
                    serde_json::json!({"a": done, "b": 1}),
                )],
            )
        } else {
            Message::assistant(format!("done: {done}"))
        })
    })
}

/// Invokes measured at `size` rounds, after one warm-up: small sizes are repeated (each on a
/// new thread) so one invoke's noise does not decide.
fn round_reps(size: usize) -> usize {
    (2_000 / size).clamp(1, 50)
}

/// `rounds` with every run traced into a JSON-lines file: the trace must grow with the rounds,
/// not with their square (a model run records only what is new since the last call).
async fn traced(size: usize, saver: Arc<dyn Checkpointer>) -> (f64, String) {
    use kit::trace::{Exporter, JsonLinesExporter, Tracer};
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("temp dir: {e}")));
    let file = dir.path().join("trace.jsonl");
    let jsonl = Arc::new(
        JsonLinesExporter::new(&file).unwrap_or_else(|e| fail(&format!("trace file: {e}"))),
    );
    let tracer = Tracer::new().with_exporter(jsonl.clone());
    let (per_round, extra) = rounds(size, saver, Some(tracer)).await;
    jsonl.flush(Duration::from_secs(30));
    let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let invokes = round_reps(size) + 1;
    if bytes == 0 {
        fail("growth traced: nothing was traced");
    }
    (
        per_round,
        format!(
            "{extra} trace_bytes_per_round={}",
            bytes / (size * invokes) as u64
        ),
    )
}

async fn rounds(
    size: usize,
    saver: Arc<dyn Checkpointer>,
    tracer: Option<kit::trace::Tracer>,
) -> (f64, String) {
    let agent = kit::Agent::builder()
        .model(counting_model(size))
        .tool(Add::tool())
        .checkpointer(saver)
        .build()
        .unwrap_or_else(|e| fail(&format!("growth agent: {e}")));
    let reps = round_reps(size);
    let mut times = Vec::new();
    for rep in 0..reps + 1 {
        let mut opts = RunOptions::new()
            .thread_id(format!("rounds-{rep}"))
            .recursion_limit(4 * size + 10);
        if let Some(tracer) = &tracer {
            opts = opts.tracer(tracer.clone());
        }
        let t = Instant::now();
        let out = agent
            .invoke("Count up.")
            .options(&opts)
            .await
            .unwrap_or_else(|e| fail(&format!("growth rounds: {e}")));
        let us = t.elapsed().as_secs_f64() * 1e6;
        let state = out.into_state();
        if state.messages.len() != 2 * size + 2 || state.final_text() != format!("done: {size}") {
            fail(&format!(
                "growth rounds: {} messages, final {:?}",
                state.messages.len(),
                state.final_text()
            ));
        }
        // The first invoke warms the process up (allocator, lazy statics).
        if rep > 0 {
            times.push(us);
        }
    }
    times.sort_by(f64::total_cmp);
    (
        times[times.len() / 2] / size as f64,
        format!(" invokes={reps}"),
    )
}

// ---------------------------------------------------------------------------------------------
// thread: one thread grown by one-round invokes

async fn thread(size: usize, saver: Arc<dyn Checkpointer>) -> (f64, String) {
    let agent = kit::Agent::builder()
        .model(counting_model(1))
        .tool(Add::tool())
        .checkpointer(saver)
        .build()
        .unwrap_or_else(|e| fail(&format!("growth agent: {e}")));
    let opts = RunOptions::new().thread_id("grown");
    // The last (up to) 20 invokes: each adds one round (4 messages) to a thread of `size`.
    let mut last = Vec::new();
    for i in 0..size {
        let t = Instant::now();
        let out = agent
            .invoke("Once more.")
            .options(&opts)
            .await
            .unwrap_or_else(|e| fail(&format!("growth thread: {e}")));
        if i + 20 >= size {
            last.push(t.elapsed().as_secs_f64() * 1e6);
        }
        if i + 1 == size && out.state().messages.len() != 4 * size {
            fail(&format!(
                "growth thread: {} messages after {size} invokes",
                out.state().messages.len()
            ));
        }
    }
    last.sort_by(f64::total_cmp);
    (last[last.len() / 2], format!(" messages={}", 4 * size))
}

// ---------------------------------------------------------------------------------------------
// chain / fanout / untouched: graph shapes

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Chain {
    counter: i64,
    /// A field no node writes (the `untouched` curve fills it).
    blob: String,
}

fn chain_graph(n: usize) -> Graph<Chain> {
    let mut b = GraphBuilder::<Chain>::new("chain");
    for i in 0..n {
        b = b.sync_node(format!("n{i}"), |s: &Chain, _: &NodeContext| {
            ChainUpdate::new().counter(s.counter + 1)
        });
        b = if i == 0 {
            b.edge(START, "n0")
        } else {
            b.edge(format!("n{}", i - 1), format!("n{i}"))
        };
    }
    b.edge(format!("n{}", n - 1), END)
        .compile()
        .unwrap_or_else(|e| fail(&format!("growth chain: {e}")))
}

/// Median µs per step of `reps` invokes of a chain of `n` nodes from `input`, which is given
/// the state the previous invoke returned.
async fn per_step(
    graph: &Graph<Chain>,
    n: usize,
    mut input: impl FnMut(Option<Chain>) -> ChainUpdate,
) -> f64 {
    let opts = RunOptions::new().recursion_limit(n + 10);
    let reps = (20_000 / n).clamp(3, 200);
    let mut times = Vec::new();
    let mut last = None;
    for rep in 0..reps + 2 {
        // Made before the clock starts: preparing the input is the caller's cost.
        let input = input(last.take());
        let t = Instant::now();
        let out = graph
            .invoke(input)
            .options(&opts)
            .await
            .unwrap_or_else(|e| fail(&format!("growth chain: {e}")));
        let elapsed = t.elapsed().as_secs_f64() * 1e6;
        if out.state().counter != n as i64 {
            fail("growth chain: wrong count");
        }
        if rep >= 2 {
            times.push(elapsed);
        }
        last = Some(out.into_state());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2] / n as f64
}

async fn chain(size: usize) -> (f64, String) {
    let graph = chain_graph(size);
    (
        per_step(&graph, size, |_| ChainUpdate::new()).await,
        String::new(),
    )
}

async fn untouched(size: usize) -> (f64, String) {
    let graph = chain_graph(100);
    // The field goes from each invoke's output into the next input, as a service would keep
    // it: copying 10 MB before each invoke would flush the caches the invoke then runs in.
    let per = per_step(&graph, 100, |last| {
        let blob = last.map_or_else(|| "x".repeat(size), |state| state.blob);
        if blob.len() != size {
            fail("growth untouched: the field came back changed");
        }
        ChainUpdate::new().blob(blob)
    })
    .await;
    (per, format!(" field_bytes={size}"))
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Fan {
    #[state(reducer = kit::reducers::add)]
    hits: i64,
}

async fn fanout(size: usize) -> (f64, String) {
    let graph = GraphBuilder::<Fan>::new("fanout")
        .sync_node("fan", |_: &Fan, _: &NodeContext| FanUpdate::new())
        .sync_node(
            "branch",
            |_: &Fan, ctx: &NodeContext| -> Result<FanUpdate, NodeError> {
                let _: usize = ctx.arg()?;
                Ok(FanUpdate::new().hits(1))
            },
        )
        .route("fan", ["branch"], move |_: &Fan| {
            Route::Sends((0..size).map(|i| Send::new("branch", i)).collect())
        })
        .edge("branch", END)
        .edge(START, "fan")
        .compile()
        .unwrap_or_else(|e| fail(&format!("growth fanout: {e}")));
    let reps = (200_000 / size).clamp(3, 100);
    let mut times = Vec::new();
    for rep in 0..reps + 1 {
        let t = Instant::now();
        let out = graph
            .invoke(FanUpdate::new())
            .await
            .unwrap_or_else(|e| fail(&format!("growth fanout: {e}")));
        if out.state().hits != size as i64 {
            fail("growth fanout: branches lost");
        }
        if rep >= 1 {
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2] / size as f64, String::new())
}

// ---------------------------------------------------------------------------------------------
// concurrent: W4 at many concurrent runs

async fn concurrent(size: usize) -> (f64, String) {
    let agent = w2_agent(Arc::new(MemoryCheckpointer::new()));
    let start = Instant::now();
    let handles: Vec<_> = (0..size)
        .map(|i| {
            let agent = agent.clone();
            tokio::spawn(async move { run_w2(&agent, format!("c{i}")).await })
        })
        .collect();
    for h in handles {
        match h.await {
            Ok(state) => check_w2(&state),
            Err(e) => fail(&format!("growth concurrent: {e}")),
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let rss = proc_status_kib("VmHWM:") / 1024.0;
    (
        wall * 1e6 / size as f64,
        format!(
            " runs_per_s={:.0} peak_kib_per_run={:.1}",
            size as f64 / wall,
            rss * 1024.0 / size as f64
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// slow_stream: a consumer slower than the producer

async fn slow_stream(size: usize) -> (f64, String) {
    let graph = chain_graph(size);
    let opts = RunOptions::new().recursion_limit(size + 10);
    let before = proc_status_kib("VmRSS:");
    let mut stream = graph.stream_events(ChainUpdate::new().blob("y".repeat(1 << 20)), &opts);
    let t = Instant::now();
    let mut seen = 0usize;
    let mut peak = before;
    while let Some(event) = stream.next().await {
        if event.kind() == kit::EventKind::NodeEnd {
            seen += 1;
            if seen.is_multiple_of(64) {
                // The consumer is slow: the producer must wait for it, not buffer.
                tokio::time::sleep(Duration::from_millis(1)).await;
                peak = peak.max(proc_status_kib("VmRSS:"));
            }
        }
    }
    if seen != size {
        fail(&format!("growth slow_stream: {seen} of {size} events"));
    }
    let us = t.elapsed().as_secs_f64() * 1e6;
    (
        us / size as f64,
        format!(" rss_growth_kib={:.0}", (peak - before).max(0.0)),
    )
}
