//! W1 (a linear chain), W3 (fan-out and join), W6 (streaming): graph workloads.

use crate::fail;
use crate::measure::{header, report, stats, time_async};
use futures::StreamExt;
use kit::graph::{GraphBuilder, NodeContext, NodeError, Route};
use kit::{END, Graph, RunOptions, START, Send, State};
use serde::{Deserialize, Serialize};
use std::time::Instant;

pub(crate) const N_LINEAR: usize = 100;
pub(crate) const N_FAN: usize = 50;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
pub(crate) struct Linear {
    pub(crate) counter: i64,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

pub(crate) fn linear_graph() -> Graph<Linear> {
    match linear_builder().compile() {
        Ok(g) => g,
        Err(e) => fail(&format!("W1 graph: {e}")),
    }
}

/// W1's graph, before compiling (the policies workload adds to it).
pub(crate) fn linear_builder() -> GraphBuilder<Linear> {
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
    b.edge(format!("n{}", N_LINEAR - 1), END)
}

pub(crate) fn check_linear(s: &Linear) {
    let expected: Vec<String> = (0..N_LINEAR).map(|i| format!("n{i}")).collect();
    if s.counter != N_LINEAR as i64 || s.log != expected {
        fail(&format!(
            "W1 check failed: counter={} log.len={}",
            s.counter,
            s.log.len()
        ));
    }
}

pub(crate) fn linear_input() -> LinearUpdate {
    LinearUpdate::new().counter(0).log(Vec::new())
}

pub(crate) async fn w1(reps: usize) {
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

pub(crate) async fn invoke_linear(graph: &Graph<Linear>, opts: &RunOptions) -> Linear {
    match graph.invoke(linear_input()).options(opts).await {
        Ok(out) => out.into_state(),
        Err(e) => fail(&format!("W1 invoke: {e}")),
    }
}

// ---------------------------------------------------------------------------------------------
// W3: fan-out 50 + join

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
pub(crate) struct Fan {
    #[state(reducer = kit::reducers::append)]
    items: Vec<String>,
    joined: i64,
}

#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct BranchArg {
    i: usize,
}

pub(crate) fn fan_graph(send: bool) -> Graph<Fan> {
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

pub(crate) fn check_fan(s: &Fan) {
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

pub(crate) async fn w3(reps: usize) {
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

pub(crate) async fn w6(reps: usize) {
    header("W6 streaming updates of W1 (stream_mode=updates: 100 node_end events per invoke)");
    let graph = linear_graph();
    let opts = RunOptions::new()
        .recursion_limit(1000)
        .stream_mode([kit::event::StreamMode::Updates]);
    // Check once: 100 per-node update events, first and last as specified.
    let updates: Vec<kit::Event> = graph
        .stream_events(linear_input(), &opts)
        .filter(|e| std::future::ready(e.kind() == kit::EventKind::NodeEnd))
        .collect()
        .await;
    if updates.len() != N_LINEAR
        || updates[0].name != "n0"
        || updates[0].data.to_json()["update"]["counter"] != 1
        || updates[99].name != "n99"
        || updates[99].data.to_json()["update"]["log"] != serde_json::json!(["n99"])
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
            if event.kind() == kit::EventKind::NodeEnd {
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
