//! Subgraphs: a compiled graph as a node of another, with its own state type, checkpoints in
//! its own namespace under the parent's thread, interrupts that reach the parent's caller and
//! resume back into it without re-running finished work, and events under its namespace.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::{END, EventKind, Graph, MemoryCheckpointer, Outcome, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Outer {
    topic: String,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Middle {
    question: String,
    #[state(reducer = kit::reducers::append)]
    notes: Vec<String>,
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Inner {
    query: String,
    answer: String,
}

/// How often each node really ran.
#[derive(Default)]
struct Runs {
    fetch: AtomicUsize,
    ask: AtomicUsize,
    summarise: AtomicUsize,
    before: AtomicUsize,
}

/// inner: fetch -> ask (asks a human) -> END
fn inner(runs: &Arc<Runs>) -> Graph<Inner> {
    let (r1, r2) = (runs.clone(), runs.clone());
    GraphBuilder::<Inner>::new("inner")
        .sync_node("fetch", move |i: &Inner, _: &NodeContext| {
            r1.fetch.fetch_add(1, Ordering::SeqCst);
            InnerUpdate::new().answer(format!("raw data on {}", i.query))
        })
        .sync_node(
            "ask",
            move |i: &Inner, ctx: &NodeContext| -> Result<InnerUpdate, NodeError> {
                r2.ask.fetch_add(1, Ordering::SeqCst);
                let verdict = ctx.interrupt(json!({"check": i.answer}))?;
                Ok(InnerUpdate::new().answer(format!(
                    "{} ({})",
                    i.answer,
                    verdict.as_str().unwrap_or("?")
                )))
            },
        )
        .edge(START, "fetch")
        .edge("fetch", "ask")
        .edge("ask", END)
        .compile()
        .unwrap()
}

/// middle: lookup (the inner graph) -> summarise -> END
fn middle(runs: &Arc<Runs>) -> Graph<Middle> {
    let r = runs.clone();
    GraphBuilder::<Middle>::new("middle")
        .subgraph(
            "lookup",
            inner(runs),
            |m: &Middle| InnerUpdate::new().query(m.question.clone()),
            |i: &Inner| MiddleUpdate::new().notes(vec![i.answer.clone()]),
        )
        .sync_node("summarise", move |m: &Middle, _: &NodeContext| {
            r.summarise.fetch_add(1, Ordering::SeqCst);
            MiddleUpdate::new().notes(vec![format!("{} note(s)", m.notes.len())])
        })
        .edge(START, "lookup")
        .edge("lookup", "summarise")
        .edge("summarise", END)
        .compile()
        .unwrap()
}

/// outer: before -> research (the middle graph, with the inner one inside) -> END
fn outer(runs: &Arc<Runs>) -> Graph<Outer> {
    let r = runs.clone();
    GraphBuilder::<Outer>::new("outer")
        .sync_node("before", move |_: &Outer, _: &NodeContext| {
            r.before.fetch_add(1, Ordering::SeqCst);
            OuterUpdate::new().log(vec!["before".into()])
        })
        .subgraph(
            "research",
            middle(runs),
            |o: &Outer| MiddleUpdate::new().question(o.topic.clone()),
            |m: &Middle| OuterUpdate::new().log(m.notes.clone()),
        )
        .edge(START, "before")
        .edge("before", "research")
        .edge("research", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap()
}

#[tokio::test]
async fn an_interrupt_two_subgraphs_deep_reaches_the_top_and_resumes_without_rerunning_work() {
    let runs = Arc::new(Runs::default());
    let graph = outer(&runs);
    let opts = RunOptions::new().thread_id("deep");
    let out = graph
        .invoke(OuterUpdate::new().topic("otters"))
        .options(&opts)
        .await
        .unwrap();
    let Outcome::Interrupted(paused) = out else {
        panic!("the innermost question pauses the whole run");
    };
    assert_eq!(paused.interrupts.len(), 1);
    let interrupt = &paused.interrupts[0];
    assert_eq!(interrupt.value["check"], "raw data on otters");
    assert_eq!(interrupt.node, "ask");
    assert_eq!(
        interrupt.namespace,
        ["research:1:research", "lookup:0:lookup"],
        "the path through both subgraphs"
    );
    assert_eq!(
        graph.get_state(&opts).await.unwrap().unwrap().next,
        ["research"]
    );

    // The innermost graph's own state, read at its namespace.
    let inner_state = inner(&runs)
        .get_state(
            &RunOptions::new()
                .thread_id("deep")
                .checkpoint_ns(interrupt.namespace.join("|"))
                .checkpointer(graph.checkpointer().unwrap().clone()),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inner_state.values.answer, "raw data on otters");
    assert_eq!(inner_state.next, ["ask"]);

    let done = graph
        .resume(Resume::value("verified"))
        .options(&opts)
        .await
        .unwrap();
    let Outcome::Done(state) = done else {
        panic!("the answer reaches the innermost node and the run finishes");
    };
    assert_eq!(
        state.log,
        ["before", "raw data on otters (verified)", "1 note(s)"]
    );
    assert_eq!(
        runs.before.load(Ordering::SeqCst),
        1,
        "the outer step before ran once"
    );
    assert_eq!(
        runs.fetch.load(Ordering::SeqCst),
        1,
        "finished inner work is not redone"
    );
    assert_eq!(
        runs.ask.load(Ordering::SeqCst),
        2,
        "the asking node re-runs from the top"
    );
    assert_eq!(runs.summarise.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn two_parallel_subgraphs_each_interrupt_and_each_resumes_with_its_own_value() {
    let runs = Arc::new(Runs::default());
    let graph = GraphBuilder::<Outer>::new("parallel")
        .subgraph(
            "left",
            inner(&runs),
            |o: &Outer| InnerUpdate::new().query(format!("{} (left)", o.topic)),
            |i: &Inner| OuterUpdate::new().log(vec![i.answer.clone()]),
        )
        .subgraph(
            "right",
            inner(&runs),
            |o: &Outer| InnerUpdate::new().query(format!("{} (right)", o.topic)),
            |i: &Inner| OuterUpdate::new().log(vec![i.answer.clone()]),
        )
        .edge(START, "left")
        .edge(START, "right")
        .edge("left", END)
        .edge("right", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("parallel");
    let Outcome::Interrupted(paused) = graph
        .invoke(OuterUpdate::new().topic("seals"))
        .options(&opts)
        .await
        .unwrap()
    else {
        panic!("both subgraphs pause");
    };
    assert_eq!(paused.interrupts.len(), 2);
    let id_of = |side: &str| {
        paused
            .interrupts
            .iter()
            .find(|i| i.namespace[0].starts_with(side))
            .map(|i| i.id.clone())
            .unwrap()
    };
    let (left, right) = (id_of("left:"), id_of("right:"));
    assert_ne!(left, right);

    // Answer one: the other stays pending.
    let still = graph
        .resume(Resume::by_ids([(left.clone(), "L-ok")]))
        .options(&opts)
        .await
        .unwrap();
    let Outcome::Interrupted(still) = still else {
        panic!("the right side still waits");
    };
    assert_eq!(still.interrupts.len(), 1);
    assert_eq!(still.interrupts[0].id, right);

    let done = graph
        .resume(Resume::by_ids([(right, "R-ok")]))
        .options(&opts)
        .await
        .unwrap();
    let mut log = done.state().log.clone();
    log.sort();
    assert_eq!(
        log,
        [
            "raw data on seals (left) (L-ok)",
            "raw data on seals (right) (R-ok)"
        ]
    );
    assert_eq!(
        runs.fetch.load(Ordering::SeqCst),
        2,
        "each side fetched once"
    );
}

#[tokio::test]
async fn a_subgraph_s_events_stream_under_its_namespace() {
    let graph = GraphBuilder::<Middle>::new("essay")
        .subgraph(
            "research",
            GraphBuilder::<Inner>::new("inner")
                .sync_node("fetch", |i: &Inner, _: &NodeContext| {
                    InnerUpdate::new().answer(format!("on {}", i.query))
                })
                .edge(START, "fetch")
                .edge("fetch", END)
                .compile()
                .unwrap(),
            |m: &Middle| InnerUpdate::new().query(m.question.clone()),
            |i: &Inner| MiddleUpdate::new().notes(vec![i.answer.clone()]),
        )
        .edge(START, "research")
        .edge("research", END)
        .compile()
        .unwrap();
    let events: Vec<kit::Event> = graph
        .stream_events(MiddleUpdate::new().question("q"), &RunOptions::new())
        .collect()
        .await;
    let inner_end = events
        .iter()
        .find(|e| e.kind() == EventKind::NodeEnd && e.name == "fetch")
        .expect("the child's node streams through the parent");
    assert_eq!(inner_end.metadata.namespace, ["research:0:research"]);
    let outer_end = events
        .iter()
        .find(|e| e.kind() == EventKind::NodeEnd && e.name == "research")
        .unwrap();
    assert!(outer_end.metadata.namespace.is_empty());
    assert_eq!(outer_end.data.to_json()["update"]["notes"], json!(["on q"]));
}

#[tokio::test]
async fn a_failing_subgraph_fails_its_node_with_the_child_s_error() {
    let graph = GraphBuilder::<Middle>::new("fails")
        .subgraph(
            "research",
            GraphBuilder::<Inner>::new("inner")
                .sync_node(
                    "fetch",
                    |_: &Inner, _: &NodeContext| -> Result<InnerUpdate, NodeError> {
                        Err(NodeError::msg("the archive is offline"))
                    },
                )
                .edge(START, "fetch")
                .edge("fetch", END)
                .compile()
                .unwrap(),
            |_: &Middle| InnerUpdate::new(),
            |_: &Inner| MiddleUpdate::new(),
        )
        .edge(START, "research")
        .edge("research", END)
        .compile()
        .unwrap();
    let err = graph.invoke(MiddleUpdate::new()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("research") && text.contains("the archive is offline"),
        "{text}"
    );
}
