//! The graph executor's rules, one test each: supersteps, reducers, conflicts, Overwrite,
//! routing, Send, Command, joins, limits, interrupts, failure recovery, history, streaming.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kit::graph::{Durability, GraphBuilder, NodeContext, NodeError, NodeOutput, Route};
use kit::state::{DynState, DynUpdate};
use kit::{
    END, EventKind, GraphError, MemoryCheckpointer, Outcome, Overwrite, Resume, RunOptions, START,
    Send, State,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct S {
    #[state(reducer = kit::reducers::append)]
    items: Vec<String>,
    last: String,
    count: i64,
}

fn item(s: &str) -> Vec<String> {
    vec![s.to_string()]
}

#[tokio::test]
async fn parallel_nodes_see_the_same_snapshot_and_apply_in_declaration_order() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (sa, sb) = (seen.clone(), seen.clone());
    let graph = GraphBuilder::<S>::new("snap")
        .node("a", move |s: Arc<S>, _| {
            let seen = sa.clone();
            async move {
                // Finish last, to prove completion order does not matter.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                seen.lock().unwrap().push(("a", s.items.clone()));
                SUpdate::new().items(item("a"))
            }
        })
        .node("b", move |s: Arc<S>, _| {
            let seen = sb.clone();
            async move {
                seen.lock().unwrap().push(("b", s.items.clone()));
                SUpdate::new().items(item("b"))
            }
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .compile()
        .unwrap();
    let out = graph
        .invoke(SUpdate::new().items(item("init")))
        .await
        .unwrap();
    assert_eq!(out.state().items, ["init", "a", "b"]);
    for (_, snapshot) in seen.lock().unwrap().iter() {
        assert_eq!(snapshot, &["init"], "both nodes read the pre-step snapshot");
    }
}

#[tokio::test]
async fn two_last_value_writes_in_one_step_are_an_error_naming_the_field() {
    let graph = GraphBuilder::<S>::new("conflict")
        .sync_node("a", |_: &S, _: &NodeContext| SUpdate::new().last("a"))
        .sync_node("b", |_: &S, _: &NodeContext| {
            SUpdate::new().last("b".to_string())
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .compile()
        .unwrap();
    let err = graph.invoke(SUpdate::new()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`last`"), "{text}");
    assert!(text.contains("one superstep"), "{text}");
    assert!(matches!(err, GraphError::State { .. }));
}

#[tokio::test]
async fn overwrite_beats_a_normal_write_and_two_overwrites_fail() {
    let graph = GraphBuilder::<S>::new("overwrite")
        .sync_node("a", |_: &S, _: &NodeContext| {
            SUpdate::new().items(Overwrite(item("o")))
        })
        .sync_node("b", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("n"))
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .compile()
        .unwrap();
    let out = graph.invoke(SUpdate::new().items(item("x"))).await.unwrap();
    assert_eq!(out.state().items, ["o"]);

    let twice = GraphBuilder::<S>::new("overwrite2")
        .sync_node("a", |_: &S, _: &NodeContext| {
            SUpdate::new().items(Overwrite(item("1")))
        })
        .sync_node("b", |_: &S, _: &NodeContext| {
            SUpdate::new().items(Overwrite(item("2")))
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .compile()
        .unwrap();
    let err = twice.invoke(SUpdate::new()).await.unwrap_err();
    assert!(err.to_string().contains("Overwrite"), "{err}");
}

#[tokio::test]
async fn send_fans_out_with_per_task_input_and_join_waits_for_all() {
    #[derive(Clone, Serialize, Deserialize)]
    struct Branch {
        i: usize,
    }
    let graph = GraphBuilder::<S>::new("fanout")
        .sync_node("fan", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("fan"))
        })
        .sync_node(
            "branch",
            |_: &S, ctx: &NodeContext| -> Result<SUpdate, NodeError> {
                let b: Branch = ctx.arg()?;
                Ok(SUpdate::new().items(vec![format!("b{}", b.i)]))
            },
        )
        .sync_node("join", |s: &S, _: &NodeContext| {
            SUpdate::new()
                .items(item("join"))
                .count(s.items.len() as i64 + 1)
        })
        .route(START, ["fan"], |_: &S| Route::to("fan"))
        .route("fan", ["branch"], |_: &S| {
            (0..5)
                .map(|i| Send::new("branch", Branch { i }))
                .collect::<Vec<_>>()
        })
        .edge("branch", "join")
        .edge("join", END)
        .compile()
        .unwrap();
    let out = graph.invoke(SUpdate::new()).await.unwrap().into_state();
    assert_eq!(out.items, ["fan", "b0", "b1", "b2", "b3", "b4", "join"]);
    assert_eq!(out.count, 7, "join ran once, after all branches");

    // A join across branches of different lengths waits for both.
    let graph = GraphBuilder::<S>::new("join")
        .sync_node("short", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("short"))
        })
        .sync_node("long1", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("long1"))
        })
        .sync_node("long2", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("long2"))
        })
        .sync_node("after", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("after"))
        })
        .edge(START, "short")
        .edge(START, "long1")
        .edge("long1", "long2")
        .join(["short", "long2"], "after")
        .edge("after", END)
        .compile()
        .unwrap();
    let out = graph.invoke(SUpdate::new()).await.unwrap().into_state();
    // Tasks of one step apply in declaration order: `short` before `long1`.
    assert_eq!(out.items, ["short", "long1", "long2", "after"]);
}

/// A node two predecessors trigger in one step runs once; a step's tasks run in node order
/// whatever order they fired in, then its `Send`s in the order sent, each with its own input,
/// to one node or several; a `Send` to an unknown node is an error naming it, even after
/// `Send`s to a known one.
#[tokio::test]
async fn a_node_triggered_twice_runs_once_and_sends_keep_their_order_across_targets() {
    fn logger(
        name: &'static str,
    ) -> impl Fn(&S, &NodeContext) -> SUpdate + std::marker::Send + Sync {
        move |_: &S, _: &NodeContext| SUpdate::new().items(item(name))
    }
    fn sent(
        name: &'static str,
    ) -> impl Fn(&S, &NodeContext) -> Result<SUpdate, NodeError> + std::marker::Send + Sync {
        move |_: &S, ctx: &NodeContext| {
            let i: usize = ctx.arg()?;
            Ok(SUpdate::new().items(vec![format!("{name}{i}")]))
        }
    }
    let graph = |last: &'static str| {
        GraphBuilder::<S>::new("diamond")
            .sync_node("c", logger("c"))
            .sync_node("b", logger("b"))
            .sync_node("a", logger("a"))
            .sync_node("d", logger("d"))
            .sync_node("x", sent("x"))
            .sync_node("y", sent("y"))
            .edge(START, "a")
            // `a` triggers b, then c; they run in node order: c was added before b.
            .edge("a", "b")
            .edge("a", "c")
            .edge("b", "d")
            .edge("c", "d")
            .route("d", ["x", "y"], move |_: &S| {
                Route::Sends(vec![
                    Send::new("x", 0usize),
                    Send::new("x", 1usize),
                    Send::new("y", 2usize),
                    Send::new(last, 3usize),
                ])
            })
            .edge("x", END)
            .edge("y", END)
            .compile()
            .unwrap()
    };
    let out = graph("x")
        .invoke(SUpdate::new())
        .await
        .unwrap()
        .into_state();
    assert_eq!(out.items, ["a", "c", "b", "d", "x0", "x1", "y2", "x3"]);

    let err = graph("nowhere").invoke(SUpdate::new()).await.unwrap_err();
    assert!(
        matches!(&err, GraphError::UnknownNode { target, .. } if target == "nowhere"),
        "{err}"
    );
}

#[tokio::test]
async fn command_goto_applies_the_update_then_routes() {
    let graph = GraphBuilder::<S>::new("command")
        .sync_node("start", |_: &S, _: &NodeContext| {
            NodeOutput::goto("final").with_update(SUpdate::new().last("from start"))
        })
        .sync_node("final", |s: &S, _: &NodeContext| {
            SUpdate::new().items(vec![format!("final saw {}", s.last)])
        })
        .sync_node("never", |_: &S, _: &NodeContext| {
            SUpdate::new().items(item("never"))
        })
        .edge(START, "start")
        .destinations("start", ["final", "never"])
        .edge("final", END)
        .edge("never", END)
        .compile()
        .unwrap();
    let out = graph.invoke(SUpdate::new()).await.unwrap().into_state();
    assert_eq!(out.items, ["final saw from start"]);
    assert!(graph.draw_mermaid().contains("start -. goto .-> final"));
}

#[tokio::test]
async fn conditional_edges_route_on_state_and_no_match_is_an_error() {
    let build = || {
        GraphBuilder::<S>::new("cond")
            .sync_node("classify", |_: &S, _: &NodeContext| ())
            .sync_node("refund", |_: &S, _: &NodeContext| {
                SUpdate::new().items(item("refund"))
            })
            .sync_node("other", |_: &S, _: &NodeContext| {
                SUpdate::new().items(item("other"))
            })
            .edge(START, "classify")
            .edge_when("classify", "refund", "last == refund", |s: &S| {
                s.last == "refund"
            })
            .edge_when("classify", "other", "last == other", |s: &S| {
                s.last == "other"
            })
            .edge("refund", END)
            .edge("other", END)
            .compile()
            .unwrap()
    };
    let graph = build();
    let out = graph.invoke(SUpdate::new().last("refund")).await.unwrap();
    assert_eq!(out.state().items, ["refund"]);
    let err = graph.invoke(SUpdate::new().last("spam")).await.unwrap_err();
    assert!(
        matches!(err, GraphError::NoRoute { ref node, .. } if node == "classify"),
        "{err}"
    );
    let mermaid = graph.draw_mermaid();
    assert!(
        mermaid.contains("classify -. \"last == refund\" .-> refund"),
        "{mermaid}"
    );
}

#[tokio::test]
async fn recursion_limit_counts_supersteps() {
    let graph = GraphBuilder::<S>::new("loop")
        .sync_node("spin", |s: &S, _: &NodeContext| {
            SUpdate::new().count(s.count + 1)
        })
        .edge(START, "spin")
        .edge("spin", "spin")
        .compile()
        .unwrap();
    let err = graph
        .invoke(SUpdate::new())
        .recursion_limit(7)
        .await
        .unwrap_err();
    assert!(
        matches!(err, GraphError::RecursionLimit { limit: 7 }),
        "{err}"
    );
    assert!(err.to_string().contains("recursion limit of 7"));
}

#[tokio::test]
async fn interrupt_and_resume_with_two_interrupts_in_one_node() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let graph = GraphBuilder::<S>::new("review")
        .node("ask", move |_: Arc<S>, ctx: NodeContext| {
            let runs = r.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let name = ctx.interrupt(json!({"question": "name?"}))?;
                let color = ctx.interrupt(json!({"question": "color?"}))?;
                Ok::<_, NodeError>(SUpdate::new().last(format!(
                    "{} likes {}",
                    name.as_str().unwrap_or(""),
                    color.as_str().unwrap_or("")
                )))
            }
        })
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("t1");
    let first = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    let Outcome::Interrupted(paused) = first else {
        panic!("expected an interrupt")
    };
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value["question"], "name?");
    assert_eq!(paused.interrupts[0].node, "ask");

    let second = graph
        .resume(Resume::value("Ada"))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(second.interrupts()[0].value["question"], "color?");
    let id = second.interrupts()[0].id.clone();
    assert_ne!(id, paused.interrupts[0].id);

    let done = graph
        .resume(Resume::by_ids([(id, "green")]))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(done.state().last, "Ada likes green");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "the node re-runs from the top"
    );

    // Nothing is left to answer.
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert!(snapshot.next.is_empty());

    // Streamed, the pause is an `interrupt` event carrying the question and its id, then a
    // `run_end` whose status says the run is interrupted, not done.
    let opts = RunOptions::new().thread_id("t2");
    let events: Vec<kit::Event> = graph.stream_events(SUpdate::new(), &opts).collect().await;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind()).collect();
    let at = kinds
        .iter()
        .position(|k| *k == EventKind::Interrupt)
        .expect("an interrupt event");
    assert_eq!(&kinds[at..], [EventKind::Interrupt, EventKind::RunEnd]);
    let pending = &events[at].data.to_json()["interrupts"][0];
    assert_eq!(pending["value"]["question"], "name?");
    assert_eq!(pending["node"], "ask");
    let state = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(pending["id"], json!(state.interrupts[0].id));
    assert_eq!(events[at + 1].data.to_json()["status"], "interrupted");
}

#[tokio::test]
async fn interrupt_without_checkpointer_is_a_clear_error() {
    let graph = GraphBuilder::<S>::new("nocp")
        .node("ask", |_: Arc<S>, ctx: NodeContext| async move {
            ctx.interrupt("ok?")?;
            Ok::<_, NodeError>(())
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile()
        .unwrap();
    let err = graph.invoke(SUpdate::new()).await.unwrap_err();
    assert!(
        matches!(err, GraphError::InterruptWithoutCheckpointer { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("checkpointer"));
}

#[tokio::test]
async fn a_failed_node_keeps_sibling_writes_and_resume_reruns_only_it() {
    let ok_runs = Arc::new(AtomicUsize::new(0));
    let bad_runs = Arc::new(AtomicUsize::new(0));
    let (o, b) = (ok_runs.clone(), bad_runs.clone());
    let graph = GraphBuilder::<S>::new("failing")
        .node("ok", move |_: Arc<S>, _| {
            let o = o.clone();
            async move {
                o.fetch_add(1, Ordering::SeqCst);
                SUpdate::new().items(item("ok"))
            }
        })
        .node("bad", move |_: Arc<S>, _| {
            let b = b.clone();
            async move {
                if b.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(NodeError::msg("boom"));
                }
                Ok(SUpdate::new().items(item("bad fixed")))
            }
        })
        .edge(START, "ok")
        .edge(START, "bad")
        .edge("ok", END)
        .edge("bad", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("fail-1");
    let err = graph
        .invoke(SUpdate::new())
        .options(&opts)
        .await
        .unwrap_err();
    assert!(
        matches!(err, GraphError::NodeFailed { ref node, .. } if node == "bad"),
        "{err}"
    );
    assert!(err.to_string().contains("boom"));
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.next, ["bad"], "only the failed task is still due");
    assert_eq!(snapshot.errors.len(), 1);

    let out = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert_eq!(out.state().items, ["ok", "bad fixed"]);
    assert_eq!(
        ok_runs.load(Ordering::SeqCst),
        1,
        "the sibling's write was kept"
    );
    assert_eq!(bad_runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_panicking_node_becomes_an_error() {
    let graph = GraphBuilder::<S>::new("panics")
        .sync_node("p", |_: &S, _: &NodeContext| -> SUpdate {
            panic!("kaboom")
        })
        .edge(START, "p")
        .edge("p", END)
        .compile()
        .unwrap();
    let err = graph.invoke(SUpdate::new()).await.unwrap_err();
    assert!(err.to_string().contains("kaboom"), "{err}");
}

/// Nodes of one step run concurrently even when most finish at once: `waits` is pending until
/// `signals` (declared after it) has run, and a panic among many sync nodes is that node's error.
#[tokio::test]
async fn nodes_of_a_wide_step_still_run_concurrently_and_a_panic_among_them_is_an_error() {
    let signal = Arc::new(tokio::sync::Notify::new());
    let waiter = signal.clone();
    let mut b = GraphBuilder::<S>::new("wide")
        .node("waits", move |_s: Arc<S>, _ctx: NodeContext| {
            let signal = waiter.clone();
            async move {
                signal.notified().await;
                SUpdate::new().items(item("waited"))
            }
        })
        .edge(START, "waits")
        .edge("waits", END);
    for i in 0..40 {
        let name = format!("sync{i}");
        b = b
            .sync_node(name.clone(), move |_: &S, _: &NodeContext| {
                SUpdate::new().items(vec![name.clone()])
            })
            .edge(START, format!("sync{i}"))
            .edge(format!("sync{i}"), END);
    }
    let notifier = signal.clone();
    let graph = b
        .sync_node("signals", move |_: &S, _: &NodeContext| {
            notifier.notify_one();
            SUpdate::new().items(item("signalled"))
        })
        .edge(START, "signals")
        .edge("signals", END)
        .compile()
        .unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        graph.invoke(SUpdate::new()),
    )
    .await
    .expect("a node waiting on a sibling of its step must not hang the step")
    .unwrap();
    let items = &out.state().items;
    assert_eq!(items.len(), 42);
    assert_eq!(items[0], "waited", "updates apply in declaration order");
    assert_eq!(items[41], "signalled");

    let mut b = GraphBuilder::<S>::new("wide-panic");
    for i in 0..40 {
        b = b
            .sync_node(format!("n{i}"), move |_: &S, _: &NodeContext| -> SUpdate {
                if i == 17 {
                    panic!("node 17 broke")
                }
                SUpdate::new().items(item("ok"))
            })
            .edge(START, format!("n{i}"))
            .edge(format!("n{i}"), END);
    }
    let err = b
        .compile()
        .unwrap()
        .invoke(SUpdate::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("node 17 broke"), "{err}");
}

fn chain(n: usize) -> kit::Graph<S> {
    let mut b = GraphBuilder::<S>::new("chain");
    for i in 0..n {
        let name = format!("n{i}");
        b = b.sync_node(name.clone(), move |s: &S, _: &NodeContext| {
            SUpdate::new().count(s.count + 1).items(vec![name.clone()])
        });
    }
    b = b.edge(START, "n0");
    for i in 1..n {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", n - 1), END).compile().unwrap()
}

#[tokio::test]
async fn checkpoint_history_walks_every_step_back_to_the_input() {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let cp = Arc::new(MemoryCheckpointer::new());
        let graph = chain(5).with_checkpointer(cp.clone());
        let opts = RunOptions::new().thread_id("h").durability(durability);
        let out = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
        assert_eq!(out.state().count, 5);
        let history = graph.state_history(&opts, None).await.unwrap();
        if durability == Durability::Exit {
            assert_eq!(history.len(), 1, "exit writes only the final checkpoint");
            assert_eq!(history[0].values.items.len(), 5);
            continue;
        }
        assert_eq!(history.len(), 6, "{durability:?}: input + 5 steps");
        let steps: Vec<i64> = history.iter().map(|h| h.checkpoint.step).collect();
        assert_eq!(steps, [4, 3, 2, 1, 0, -1]);
        let counts: Vec<i64> = history.iter().map(|h| h.values.count).collect();
        assert_eq!(counts, [5, 4, 3, 2, 1, 0]);
        assert_eq!(history[5].next, ["n0"]);
        // Time travel: the state at step 2 and a fork from it.
        let at = RunOptions::new()
            .thread_id("h")
            .checkpoint_id(history[2].checkpoint.id.clone());
        let old = graph.get_state(&at).await.unwrap().unwrap();
        assert_eq!(old.values.items, ["n0", "n1", "n2"]);
        let forked = graph.fork(&at).await.unwrap();
        let head = graph
            .get_state(&RunOptions::new().thread_id("h"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.checkpoint.id, forked);
        assert_eq!(head.next, ["n3"]);
        let out = graph.resume(Resume::Continue).thread_id("h").await.unwrap();
        assert_eq!(out.state().count, 5);
        assert_eq!(out.state().items, ["n0", "n1", "n2", "n3", "n4"]);
    }
}

#[tokio::test]
async fn memory_across_invocations_and_update_state() {
    let graph = chain(2).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new().thread_id("mem");
    graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    let out = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    assert_eq!(
        out.state().count,
        4,
        "the second invoke continues the thread"
    );
    assert_eq!(out.state().items.len(), 4);
    graph
        .update_state(&opts, SUpdate::new().last("edited"), None)
        .await
        .unwrap();
    let snap = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snap.values.last, "edited");
    assert_eq!(snap.values.count, 4);
}

#[tokio::test]
async fn static_interrupts_before_and_after() {
    let base = chain(3).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let _ = base;
    let cp = Arc::new(MemoryCheckpointer::new());
    let mut b = GraphBuilder::<S>::new("static");
    for n in ["a", "b", "c"] {
        b = b.sync_node(n, move |_: &S, _: &NodeContext| {
            SUpdate::new().items(item(n))
        });
    }
    let graph = b
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .interrupt_before(["b"])
        .interrupt_after(["c"])
        .checkpointer(cp)
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("s");
    let out = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    assert!(out.is_interrupted());
    assert_eq!(out.state().items, ["a"]);
    assert_eq!(out.interrupts()[0].node, "b");
    let out = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert!(out.is_interrupted());
    assert_eq!(out.state().items, ["a", "b", "c"]);
    assert_eq!(out.interrupts()[0].node, "c");
    let out = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert!(!out.is_interrupted());
}

#[tokio::test]
async fn streaming_emits_envelopes_in_order() {
    let graph = chain(3);
    let events: Vec<kit::Event> = graph
        .stream_events(SUpdate::new(), &RunOptions::new().stream_values(true))
        .collect()
        .await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| format!("{}:{}", e.kind(), e.name))
        .collect();
    assert_eq!(
        kinds,
        [
            "run_start:chain",
            "node_start:n0",
            "node_end:n0",
            "values:chain",
            "node_start:n1",
            "node_end:n1",
            "values:chain",
            "node_start:n2",
            "node_end:n2",
            "values:chain",
            "run_end:chain",
        ]
    );
    assert_eq!(events[2].data.to_json()["update"]["count"], 1);
    assert_eq!(events[2].data.to_json()["update"]["items"], json!(["n0"]));
    assert_eq!(events[2].metadata.node.as_deref(), Some("n0"));
    assert_eq!(
        events[1].run_id, events[2].run_id,
        "start and end share the task run id"
    );
    assert_eq!(events[2].parent_ids, [events[0].run_id.clone()]);
    assert_eq!(events.last().unwrap().data.to_json()["status"], "done");
    let json = events[2].to_json();
    for key in ["event", "name", "run_id", "parent_ids", "data", "metadata"] {
        assert!(json.get(key).is_some());
    }
}

#[tokio::test]
async fn checkpoint_events_come_once_durable_after_their_steps_node_end() {
    // Sync and Async (memory writes finish at once): one event per step, each after the
    // step's node_end, each naming a checkpoint the checkpointer already holds.
    for durability in [Durability::Sync, Durability::Async] {
        let cp = Arc::new(MemoryCheckpointer::new());
        let graph = chain(3).with_checkpointer(cp.clone());
        let opts = RunOptions::new().thread_id("t").durability(durability);
        let events: Vec<kit::Event> = graph.stream_events(SUpdate::new(), &opts).collect().await;
        let kinds: Vec<String> = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind(),
                    kit::EventKind::NodeEnd | kit::EventKind::Checkpoint
                )
            })
            .map(|e| format!("{}:{}", e.kind(), e.metadata.node.as_deref().unwrap_or("-")))
            .collect();
        assert_eq!(
            kinds,
            [
                "checkpoint:-",
                "node_end:n0",
                "checkpoint:-",
                "node_end:n1",
                "checkpoint:-",
                "node_end:n2",
                "checkpoint:-",
            ],
            "{durability:?}"
        );
        let history = graph.state_history(&opts, None).await.unwrap();
        for e in events
            .iter()
            .filter(|e| e.kind() == kit::EventKind::Checkpoint)
        {
            let id = e.data.to_json()["checkpoint_id"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                history.iter().any(|h| h.checkpoint.id == id),
                "{durability:?}: reported checkpoint {id} is not stored"
            );
        }
    }
    // Exit: the run writes one checkpoint, at the end, and reports exactly that one.
    let cp = Arc::new(MemoryCheckpointer::new());
    let graph = chain(3).with_checkpointer(cp.clone());
    let opts = RunOptions::new()
        .thread_id("t")
        .durability(Durability::Exit);
    let events: Vec<kit::Event> = graph.stream_events(SUpdate::new(), &opts).collect().await;
    let checkpoints: Vec<&kit::Event> = events
        .iter()
        .filter(|e| e.kind() == kit::EventKind::Checkpoint)
        .collect();
    assert_eq!(checkpoints.len(), 1);
    let last_node_end = events
        .iter()
        .rposition(|e| e.kind() == kit::EventKind::NodeEnd)
        .unwrap();
    let position = events
        .iter()
        .position(|e| e.kind() == kit::EventKind::Checkpoint)
        .unwrap();
    assert!(position > last_node_end);
    let head = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(
        checkpoints[0].data.to_json()["checkpoint_id"].as_str(),
        Some(head.checkpoint.id.as_str())
    );
}

#[tokio::test]
async fn custom_events_and_errors_are_streamed() {
    let graph = GraphBuilder::<S>::new("custom")
        .node("work", |_: Arc<S>, ctx: NodeContext| async move {
            ctx.emit("progress", json!({"pct": 50})).await;
            Err::<SUpdate, _>(NodeError::msg("broken"))
        })
        .edge(START, "work")
        .edge("work", END)
        .compile()
        .unwrap();
    let events: Vec<kit::Event> = graph
        .stream_events(SUpdate::new(), &RunOptions::new())
        .collect()
        .await;
    let custom = events
        .iter()
        .find(|e| e.kind() == kit::EventKind::Custom)
        .unwrap();
    assert_eq!(custom.name, "progress");
    assert_eq!(custom.data.to_json()["pct"], 50);
    let last = events.last().unwrap();
    assert_eq!(last.kind(), kit::EventKind::Error);
    assert!(
        last.data.to_json()["message"]
            .as_str()
            .unwrap()
            .contains("broken")
    );
}

#[tokio::test]
async fn dynamic_state_with_run_time_reducers() {
    let graph = GraphBuilder::<DynState>::new("dyn")
        .add_reducer("log", |cur, upd| {
            if let (Some(a), Some(b)) = (cur.as_array_mut(), upd.as_array()) {
                a.extend(b.iter().cloned());
            } else {
                *cur = upd;
            }
        })
        .sync_node("a", |_: &DynState, _: &NodeContext| {
            DynUpdate::new().set("log", json!(["a"]))
        })
        .sync_node("b", |_: &DynState, _: &NodeContext| {
            DynUpdate::new().set("log", json!(["b"])).set("who", "b")
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("d");
    let out = graph
        .invoke(DynUpdate::new().set("log", json!(["in"])))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(out.state().get("log"), Some(&json!(["in", "a", "b"])));
    let restored = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(restored.values, *out.state());
}

#[tokio::test]
async fn builder_rejects_bad_definitions_with_clear_messages() {
    let err = GraphBuilder::<S>::new("bad")
        .sync_node("a", |_: &S, _: &NodeContext| ())
        .edge(START, "a")
        .compile()
        .unwrap_err();
    assert!(err.to_string().contains("node `a` has no way out"), "{err}");
    let err = GraphBuilder::<S>::new("bad")
        .sync_node("a", |_: &S, _: &NodeContext| ())
        .edge(START, "a")
        .edge("a", "b")
        .compile()
        .unwrap_err();
    assert!(err.to_string().contains("unknown node `b`"), "{err}");
    let err = GraphBuilder::<S>::new("bad")
        .sync_node("a", |_: &S, _: &NodeContext| ())
        .sync_node("a", |_: &S, _: &NodeContext| ())
        .compile()
        .unwrap_err();
    assert!(err.to_string().contains("declared twice"), "{err}");
}

#[tokio::test]
async fn two_writers_on_one_thread_conflict_instead_of_corrupting() {
    let cp = Arc::new(MemoryCheckpointer::new());
    let graph = GraphBuilder::<S>::new("race")
        .node("slow", |s: Arc<S>, _| async move {
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            SUpdate::new().count(s.count + 1)
        })
        .edge(START, "slow")
        .edge("slow", END)
        .checkpointer(cp)
        .compile()
        .unwrap();
    let opts = RunOptions::new()
        .thread_id("race")
        .durability(Durability::Sync);
    graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    let (a, b) = tokio::join!(
        graph.invoke(SUpdate::new()).options(&opts),
        graph.invoke(SUpdate::new()).options(&opts)
    );
    let conflicts = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(e) if e.is_conflict()))
        .count();
    assert_eq!(conflicts, 1, "exactly one writer loses: {a:?} / {b:?}");
    let state = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(state.values.count, 2);
}
