//! Warm threads on every back-end (memory, a SQLite file, a PostgreSQL server): a graph goes on
//! from the state its last run on a thread left instead of loading the thread, and only while
//! nothing else moved the thread. Whatever moved it (another writer, `update_state`, a delete, a
//! fork) is seen: a warm thread is never staler than a loaded one.

use std::sync::Arc;

use kit::graph::{GraphBuilder, NodeContext};
use kit::{END, Graph, Outcome, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};

#[macro_use]
#[path = "support/storages.rs"]
mod storages;
use storages::{Counting, Cp, Storage};

suite!(
    head_is_the_checkpoint_a_load_reads,
    a_warm_thread_goes_on_exactly_as_a_loaded_one,
    a_warm_invoke_reads_the_head_instead_of_the_thread,
    a_thread_moved_by_another_writer_is_loaded_again,
    an_update_between_runs_is_seen,
    a_deleted_thread_starts_afresh,
    running_from_an_older_checkpoint_ignores_the_warm_state,
    a_paused_run_leaves_nothing_warm_and_resumes_from_storage,
    an_update_that_was_not_saved_is_not_kept_warm,
);

#[derive(State, Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
struct Log {
    #[state(reducer = kit::reducers::append)]
    lines: Vec<String>,
    n: i64,
}

/// `count` adds one line per run, numbered by the runs so far.
fn counter(checkpointer: Cp, warm_threads: usize) -> Graph<Log> {
    GraphBuilder::<Log>::new("counter")
        .sync_node("count", |s: &Log, _: &NodeContext| {
            LogUpdate::new()
                .lines(vec![format!("run {}", s.n + 1)])
                .n(s.n + 1)
        })
        .edge(START, "count")
        .edge("count", END)
        .checkpointer(checkpointer)
        .warm_threads(warm_threads)
        .compile()
        .unwrap()
}

fn on(thread: &str) -> RunOptions {
    RunOptions::new().thread_id(thread)
}

async fn run(graph: &Graph<Log>, thread: &str, line: &str) -> Log {
    graph
        .invoke(LogUpdate::new().lines(vec![line.to_string()]))
        .options(&on(thread))
        .await
        .unwrap()
        .into_state()
}

fn lines(log: &Log) -> Vec<&str> {
    log.lines.iter().map(String::as_str).collect()
}

async fn head_is_the_checkpoint_a_load_reads(s: &Storage) {
    // The back-end's own head, and the default a back-end without one gets.
    head_matches_loads(s.reopen().await).await;
    head_matches_loads(Arc::new(
        Counting::new(s.reopen().await).with_default_head(),
    ))
    .await;
}

async fn head_matches_loads(cp: Cp) {
    assert_eq!(cp.head("nobody", "").await.unwrap(), None);
    let graph = counter(cp.clone(), 0);
    for i in 0..3 {
        run(&graph, "t1", &format!("in {i}")).await;
        let loaded = cp.load("t1", "", None).await.unwrap().unwrap();
        assert_eq!(cp.head("t1", "").await.unwrap(), Some(loaded.head.clone()));
        assert_eq!(loaded.head, loaded.meta.id);
    }
    assert_eq!(cp.head("t1", "other ns").await.unwrap(), None);
    cp.delete_thread("t1").await.unwrap();
    assert_eq!(cp.head("t1", "").await.unwrap(), None);
}

async fn a_warm_thread_goes_on_exactly_as_a_loaded_one(s: &Storage) {
    let cp = s.reopen().await;
    let warm = counter(cp.clone(), 8);
    let cold = counter(cp.clone(), 0);
    for i in 0..25 {
        let a = run(&warm, "warm", &format!("in {i}")).await;
        let b = run(&cold, "cold", &format!("in {i}")).await;
        assert_eq!(a, b, "after invoke {i}");
    }
    // What is stored is the same too: the same steps, sources and channels, checkpoint by
    // checkpoint, and the same state read back from a new instance.
    let (warm_history, cold_history) = (
        cp.history("warm", "", None).await.unwrap(),
        cp.history("cold", "", None).await.unwrap(),
    );
    assert_eq!(warm_history.len(), cold_history.len());
    for (a, b) in warm_history.iter().zip(&cold_history) {
        assert_eq!((a.step, a.source, &a.next), (b.step, b.source, &b.next));
    }
    let reread = counter(s.reopen().await, 0);
    let a = reread.get_state(&on("warm")).await.unwrap().unwrap();
    let b = reread.get_state(&on("cold")).await.unwrap().unwrap();
    assert_eq!(a.values, b.values);
    assert_eq!(a.values.n, 25);
    assert_eq!(a.values.lines.len(), 50);
}

async fn a_warm_invoke_reads_the_head_instead_of_the_thread(s: &Storage) {
    let counting = Arc::new(Counting::new(s.reopen().await));
    let graph = counter(counting.clone(), 8);
    run(&graph, "t1", "first").await;
    assert_eq!(counting.loads(), 1, "a new thread is looked up once");
    for i in 0..5 {
        run(&graph, "t1", &format!("again {i}")).await;
    }
    assert_eq!(counting.loads(), 1, "warm invokes load nothing");
    assert_eq!(counting.heads(), 5, "each warm invoke checks the head once");

    // Turned off, every invoke loads and none asks for the head.
    let counting = Arc::new(Counting::new(s.reopen().await));
    let graph = counter(counting.clone(), 0);
    for i in 0..4 {
        run(&graph, "t2", &format!("in {i}")).await;
    }
    assert_eq!((counting.loads(), counting.heads()), (4, 0));
}

async fn a_thread_moved_by_another_writer_is_loaded_again(s: &Storage) {
    // Two graphs with caches of their own: two processes, as far as each can tell.
    let first = counter(s.reopen().await, 8);
    let second = counter(s.reopen().await, 8);
    run(&first, "t1", "from first").await;
    run(&second, "t1", "from second").await;
    run(&second, "t1", "from second again").await;
    let state = run(&first, "t1", "first again").await;
    assert_eq!(
        lines(&state),
        [
            "from first",
            "run 1",
            "from second",
            "run 2",
            "from second again",
            "run 3",
            "first again",
            "run 4"
        ]
    );
}

async fn an_update_between_runs_is_seen(s: &Storage) {
    let graph = counter(s.reopen().await, 8);
    run(&graph, "t1", "in").await;
    graph
        .update_state(&on("t1"), LogUpdate::new().n(100), None)
        .await
        .unwrap();
    let state = run(&graph, "t1", "after the update").await;
    assert_eq!(state.n, 101);
    assert_eq!(
        lines(&state),
        ["in", "run 1", "after the update", "run 101"]
    );
}

async fn a_deleted_thread_starts_afresh(s: &Storage) {
    let cp = s.reopen().await;
    let graph = counter(cp.clone(), 8);
    run(&graph, "t1", "old").await;
    run(&graph, "t1", "old again").await;
    cp.delete_thread("t1").await.unwrap();
    let state = run(&graph, "t1", "new").await;
    assert_eq!(
        lines(&state),
        ["new", "run 1"],
        "nothing of the deleted thread comes back"
    );
}

async fn running_from_an_older_checkpoint_ignores_the_warm_state(s: &Storage) {
    let cp = s.reopen().await;
    let graph = counter(cp.clone(), 8);
    run(&graph, "t1", "a").await;
    let after_first = cp.head("t1", "").await.unwrap().unwrap();
    run(&graph, "t1", "b").await;
    let forked = graph
        .invoke(LogUpdate::new().lines(vec!["c".into()]))
        .options(&on("t1").checkpoint_id(after_first))
        .await
        .unwrap()
        .into_state();
    assert_eq!(lines(&forked), ["a", "run 1", "c", "run 2"]);
    // The fork is the thread's head now, and the next invoke goes on from it.
    let state = run(&graph, "t1", "d").await;
    assert_eq!(lines(&state), ["a", "run 1", "c", "run 2", "d", "run 3"]);
}

async fn a_paused_run_leaves_nothing_warm_and_resumes_from_storage(s: &Storage) {
    let counting = Arc::new(Counting::new(s.reopen().await));
    let graph = GraphBuilder::<Log>::new("asks")
        .node("ask", |s: Arc<Log>, ctx: NodeContext| async move {
            let answer = ctx.interrupt(format!("line {}?", s.n + 1))?;
            let line = answer.as_str().unwrap_or("not a string").to_string();
            Ok::<_, kit::graph::NodeError>(LogUpdate::new().lines(vec![line]).n(s.n + 1))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(counting.clone())
        .compile()
        .unwrap();
    let out = graph
        .invoke(LogUpdate::new())
        .options(&on("t1"))
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Interrupted(_)));
    let loads = counting.loads();
    let out = graph
        .resume(Resume::value("yes"))
        .options(&on("t1"))
        .await
        .unwrap();
    assert_eq!(
        counting.loads(),
        loads + 1,
        "a resume reads the pause from storage"
    );
    assert_eq!(lines(&out.into_state()), ["yes"]);
}

/// A resume with an update on a finished thread runs no step, so the update is not in the head
/// checkpoint: the next invoke must see what loading the head gives, warm or not.
async fn an_update_that_was_not_saved_is_not_kept_warm(s: &Storage) {
    let cp = s.reopen().await;
    let warm = counter(cp.clone(), 8);
    let cold = counter(cp.clone(), 0);
    let mut states = Vec::new();
    for (graph, thread) in [(&warm, "warm"), (&cold, "cold")] {
        run(graph, thread, "first").await;
        // Whatever the resume does with nothing paused, it must not leave a state behind that
        // the stored thread does not hold.
        let _ = graph
            .resume_with(
                Resume::value("late"),
                LogUpdate::new().lines(vec!["unsaved".into()]),
            )
            .options(&on(thread))
            .await;
        states.push(run(graph, thread, "second").await);
    }
    assert_eq!(states[0], states[1], "warm and cold runs agree");
    let reread = counter(s.reopen().await, 0);
    let stored = reread.get_state(&on("warm")).await.unwrap().unwrap();
    assert_eq!(
        stored.values, states[0],
        "what the warm run returned is what is stored"
    );
}
