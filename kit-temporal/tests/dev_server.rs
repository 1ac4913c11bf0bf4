//! kit graphs on a real Temporal dev server (`temporal server start-dev`, started by
//! `.ci/temporal.sh`): an interrupt resumed by signal, a worker process killed mid-node with the
//! run finished by a second worker process, cancellation (running and paused), rolling deploys
//! and a changed graph's replay, replay on every workflow task, payload sizes, a node holding
//! its thread, and the errors of misuse.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kit::graph::{GraphBuilder, NodeError, Resume};
use kit::{END, Graph, START};
use kit_temporal::{NodeActivityOptions, TemporalError, TemporalRuns, TemporalWorker};
use serde_json::json;

#[derive(kit::State, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Review {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
    draft: String,
    answer: String,
}

/// draft → (check ‖ polish) → approve (interrupts) → publish: a fan-out whose writes merge in
/// declaration order, then a pause for a human.
fn review_graph() -> Graph<Review> {
    GraphBuilder::<Review>::new("review")
        .node("draft", |_s, _ctx| async {
            ReviewUpdate::new()
                .log(vec!["draft".into()])
                .draft("Dear customer")
        })
        .node("check", |_s, _ctx| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            ReviewUpdate::new().log(vec!["check".into()])
        })
        .node("polish", |s, _ctx| async move {
            ReviewUpdate::new()
                .log(vec!["polish".into()])
                .draft(format!("{}, thank you.", s.draft))
        })
        .node("approve", |s, ctx| async move {
            let answer = ctx.interrupt(json!({"question": "send it?", "draft": s.draft}))?;
            Ok::<_, NodeError>(
                ReviewUpdate::new()
                    .log(vec!["approve".into()])
                    .answer(answer.as_str().unwrap_or_default().to_string()),
            )
        })
        .node("publish", |_s, _ctx| async {
            ReviewUpdate::new().log(vec!["publish".into()])
        })
        .edge(START, "draft")
        .edge("draft", "check")
        .edge("draft", "polish")
        .join(["check", "polish"], "approve")
        .edge("approve", "publish")
        .edge("publish", END)
        .compile()
        .unwrap()
}

/// Runs a worker for `graph` on `queue` in this process until the handle is dropped.
fn spawn_worker<S: kit::State>(
    connection: &kit_temporal::TemporalConnection,
    queue: &str,
    graph: Graph<S>,
) -> kit_temporal::WorkerHandle {
    TemporalWorker::new(connection, queue)
        .graph(graph)
        .unwrap()
        .spawn()
        .unwrap()
}

/// Runs `graph` once on a worker of its own and returns how the run failed (the run must fail
/// within a minute).
async fn failure_of(
    connection: &kit_temporal::TemporalConnection,
    graph: Graph<Review>,
) -> TemporalError {
    let queue = support::unique(&format!("kit-{}", graph.name()));
    let worker = spawn_worker(connection, &queue, graph.clone());
    let runs = TemporalRuns::new(connection, &queue);
    let id = support::unique(graph.name());
    runs.start(&graph, &id, ReviewUpdate::new()).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), runs.result_json(&id))
        .await
        .expect("the run ended")
        .unwrap_err();
    drop(worker);
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_waits_for_the_resume_signal_and_the_run_finishes() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-review");
    let worker = spawn_worker(&connection, &queue, review_graph());
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("review");
    runs.start(&review_graph(), &id, ReviewUpdate::new())
        .await
        .unwrap();

    let pending = support::eventually(Duration::from_secs(30), "the interrupt", || async {
        let pending = runs.pending_interrupts(&id).await.unwrap();
        (!pending.is_empty()).then_some(pending)
    })
    .await;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].node, "approve");
    assert_eq!(
        pending[0].value,
        json!({"question": "send it?", "draft": "Dear customer, thank you."})
    );

    // A value addressed to no pending interrupt is refused before anything is sent.
    let err = runs
        .resume(&id, Resume::by_ids([("not-an-interrupt", "yes")]))
        .await
        .unwrap_err();
    assert!(matches!(err, TemporalError::BadResume { .. }), "{err}");
    assert!(err.to_string().contains(&pending[0].id), "{err}");

    runs.resume(&id, json!("yes")).await.unwrap();
    let state: Review = runs.result(&id).await.unwrap();
    assert_eq!(
        state,
        Review {
            log: ["draft", "check", "polish", "approve", "publish"]
                .map(String::from)
                .to_vec(),
            draft: "Dear customer, thank you.".into(),
            answer: "yes".into(),
        }
    );
    assert!(runs.rejected_resumes(&id).await.unwrap().is_empty());

    // Finished: nothing waits for a resume any more.
    let err = runs.resume(&id, json!("again")).await.unwrap_err();
    assert!(matches!(err, TemporalError::NothingPending { .. }), "{err}");
    assert!(err.to_string().contains("pending_interrupts"), "{err}");
    drop(worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_or_cancelling_an_unknown_run_names_it() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let runs = TemporalRuns::new(&connection, support::unique("kit-nobody"));
    let id = support::unique("no-such-run");
    let err = runs.resume(&id, json!("yes")).await.unwrap_err();
    assert!(matches!(err, TemporalError::UnknownRun { .. }), "{err}");
    assert!(err.to_string().contains(&id), "{err}");
    assert!(err.to_string().contains("namespace `default`"), "{err}");
    let err = runs.cancel(&id).await.unwrap_err();
    assert!(matches!(err, TemporalError::UnknownRun { .. }), "{err}");
    let err = runs.result_json(&id).await.unwrap_err();
    assert!(matches!(err, TemporalError::UnknownRun { .. }), "{err}");
}

/// A one-node graph named `late`, which the first worker of the rolling-deploy test lacks.
fn late_graph() -> Graph<Review> {
    GraphBuilder::<Review>::new("late")
        .node("only", |_s, _ctx| async {
            ReviewUpdate::new().log(vec!["only".into()])
        })
        .edge(START, "only")
        .edge("only", END)
        .compile()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_the_workers_do_not_have_waits_for_a_worker_that_has_it() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-unregistered");
    let worker = spawn_worker(&connection, &queue, review_graph());
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("unregistered");
    runs.start_named("late", &id, &json!({})).await.unwrap();
    // A rolling deploy: the worker without the graph fails the workflow task (retried), not
    // the run.
    let waited = tokio::time::timeout(Duration::from_secs(3), runs.result_json(&id)).await;
    assert!(waited.is_err(), "the run ended: {waited:?}");
    worker.shutdown().await.unwrap();
    let deployed = TemporalWorker::new(&connection, &queue)
        .graph(review_graph())
        .unwrap()
        .graph(late_graph())
        .unwrap()
        .spawn()
        .unwrap();
    let state: Review = tokio::time::timeout(Duration::from_secs(60), runs.result(&id))
        .await
        .expect("a worker that has the graph took the run")
        .unwrap();
    assert_eq!(state.log, ["only"]);
    let worker = deployed;

    // Starting a second run under a live id is refused.
    let id = support::unique("twice");
    runs.start(&review_graph(), &id, ReviewUpdate::new())
        .await
        .unwrap();
    let err = runs
        .start(&review_graph(), &id, ReviewUpdate::new())
        .await
        .unwrap_err();
    assert!(matches!(err, TemporalError::AlreadyStarted { .. }), "{err}");
    runs.cancel(&id).await.unwrap();
    drop(worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_node_fails_the_run_with_its_error() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let graph = GraphBuilder::<Review>::new("fails")
        .node("broken", |_s, _ctx| async {
            Err::<ReviewUpdate, _>(NodeError::msg("the mail server said no"))
        })
        .edge(START, "broken")
        .edge("broken", END)
        .compile()
        .unwrap();
    let err = failure_of(&connection, graph).await;
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(
        text.contains("node `broken` failed in step 0: the mail server said no"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_route_fails_the_run_instead_of_wedging_it() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let graph = GraphBuilder::<Review>::new("bad-route")
        .node("a", |_s, _ctx| async { ReviewUpdate::new() })
        .node("b", |_s, _ctx| async { ReviewUpdate::new() })
        .edge(START, "a")
        .route("a", ["b"], |_s: &Review| -> kit::graph::Route {
            panic!("this route has a bug")
        })
        .edge("b", END)
        .compile()
        .unwrap();
    let err = failure_of(&connection, graph).await;
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(
        text.contains("panicked while applying the step: this route has a bug"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_while_starting_the_run_fails_it() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let graph = GraphBuilder::<Review>::new("bad-start")
        .node("a", |_s, _ctx| async { ReviewUpdate::new() })
        .route(START, ["a"], |_s: &Review| -> kit::graph::Route {
            panic!("this start route has a bug")
        })
        .edge("a", END)
        .compile()
        .unwrap();
    let err = failure_of(&connection, graph).await;
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(
        text.contains("panicked while starting the run: this start route has a bug"),
        "{text}"
    );
}

#[derive(kit::State, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Blobs {
    #[state(reducer = kit::reducers::append)]
    blobs: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_over_the_size_limit_fail_the_run_with_a_clear_message() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let mb = |n: f64| "x".repeat((n * 1024.0 * 1024.0) as usize);
    // One node's output over 2 MB: a failed node, not an activity retried forever.
    let huge = GraphBuilder::<Blobs>::new("huge-output")
        .node("big", move |_s, _ctx| {
            let blob = mb(2.5);
            async move { BlobsUpdate::new().blobs(vec![blob]) }
        })
        .edge(START, "big")
        .edge("big", END)
        .compile()
        .unwrap();
    // Two outputs under it, but the state they make is over it: the run fails before the next
    // node is scheduled.
    let grows = GraphBuilder::<Blobs>::new("huge-state")
        .node("a", move |_s, _ctx| {
            let blob = mb(1.2);
            async move { BlobsUpdate::new().blobs(vec![blob]) }
        })
        .node("b", move |_s, _ctx| {
            let blob = mb(1.2);
            async move { BlobsUpdate::new().blobs(vec![blob]) }
        })
        .node("c", |_s, _ctx| async { BlobsUpdate::new() })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .compile()
        .unwrap();
    let queue = support::unique("kit-sizes");
    let worker = TemporalWorker::new(&connection, &queue)
        .graph(huge.clone())
        .unwrap()
        .graph(grows.clone())
        .unwrap()
        .spawn()
        .unwrap();
    let runs = TemporalRuns::new(&connection, &queue);

    let id = support::unique("huge-output");
    runs.start(&huge, &id, BlobsUpdate::new()).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), runs.result_json(&id))
        .await
        .expect("the run ended")
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(text.contains("the output of node `big`"), "{text}");
    assert!(
        text.contains("over Temporal's 2 MB payload limit"),
        "{text}"
    );
    assert!(text.contains("keep large data in the store"), "{text}");

    let id = support::unique("huge-state");
    runs.start(&grows, &id, BlobsUpdate::new()).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), runs.result_json(&id))
        .await
        .expect("the run ended")
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(text.contains("the input of node `c`"), "{text}");
    assert!(
        text.contains("over Temporal's 2 MB payload limit"),
        "{text}"
    );
    assert_eq!(runs.node_activities(&id).await.unwrap(), ["a", "b"]);
    drop(worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_paused_at_an_interrupt_ends_it_cancelled() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-cancel-paused");
    let worker = spawn_worker(&connection, &queue, review_graph());
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("cancel-paused");
    runs.start(&review_graph(), &id, ReviewUpdate::new())
        .await
        .unwrap();
    support::eventually(Duration::from_secs(30), "the interrupt", || async {
        (!runs.pending_interrupts(&id).await.unwrap().is_empty()).then_some(())
    })
    .await;
    runs.cancel(&id).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), runs.result_json(&id))
        .await
        .expect("the run ended")
        .unwrap_err();
    assert!(matches!(err, TemporalError::Cancelled { .. }), "{err}");
    // Nothing after the pause ran.
    assert_eq!(
        runs.node_activities(&id).await.unwrap(),
        ["draft", "check", "polish", "approve"]
    );
    drop(worker);
}

/// plan —Send×3→ square → ask (interrupts) → END: a fan-out and a pause.
fn fan_out_graph() -> Graph<Review> {
    use kit::graph::{Route, Send};
    GraphBuilder::<Review>::new("fan-out")
        .node("plan", |_s, _ctx| async {
            ReviewUpdate::new().log(vec!["plan".into()])
        })
        .node("square", |_s, ctx| async move {
            let n: i64 = ctx.arg()?;
            Ok::<_, NodeError>(ReviewUpdate::new().log(vec![format!("square {}", n * n)]))
        })
        .node("ask", |_s, ctx| async move {
            let answer = ctx.interrupt("go on?")?;
            Ok::<_, NodeError>(
                ReviewUpdate::new().answer(answer.as_str().unwrap_or_default().to_string()),
            )
        })
        .edge(START, "plan")
        .route("plan", ["square"], |_s: &Review| {
            Route::Sends((1..=3_i64).map(|n| Send::new("square", n)).collect())
        })
        .edge("square", "ask")
        .edge("ask", END)
        .compile()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_replayed_on_every_workflow_task_gives_the_same_result() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-replay");
    // No cache: every workflow task replays the run's history from the start.
    let worker = TemporalWorker::new(&connection, &queue)
        .max_cached_workflows(0)
        .graph(fan_out_graph())
        .unwrap()
        .spawn()
        .unwrap();
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("replay");
    runs.start(&fan_out_graph(), &id, ReviewUpdate::new())
        .await
        .unwrap();
    support::eventually(Duration::from_secs(30), "the interrupt", || async {
        (!runs.pending_interrupts(&id).await.unwrap().is_empty()).then_some(())
    })
    .await;
    runs.resume(&id, json!("yes")).await.unwrap();
    let state: Review = tokio::time::timeout(Duration::from_secs(60), runs.result(&id))
        .await
        .expect("the run finished")
        .unwrap();
    assert_eq!(
        state.log,
        ["plan", "square 1", "square 4", "square 9"].map(String::from)
    );
    assert_eq!(state.answer, "yes");
    assert_eq!(
        runs.node_activities(&id).await.unwrap(),
        ["plan", "square", "square", "square", "ask", "ask"]
    );
    drop(worker);
}

static STARTED: AtomicUsize = AtomicUsize::new(0);
static SAW_CANCEL: AtomicBool = AtomicBool::new(false);

/// Sets `SAW_CANCEL` when dropped with the run's cancel token fired.
struct CancelWitness(kit::graph::CancelToken);

impl Drop for CancelWitness {
    fn drop(&mut self) {
        if self.0.is_cancelled() {
            SAW_CANCEL.store(true, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_cancels_its_running_node() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let graph = GraphBuilder::<Review>::new("forever")
        .node("wait", |_s, ctx| async move {
            let token = ctx.cancel_token().cloned().expect("a cancel token");
            let _witness = CancelWitness(token.clone());
            STARTED.fetch_add(1, Ordering::SeqCst);
            token.cancelled().await;
            ReviewUpdate::new().log(vec!["cancelled".into()])
        })
        .edge(START, "wait")
        .edge("wait", END)
        .compile()
        .unwrap();
    let queue = support::unique("kit-cancel");
    let worker = spawn_worker(&connection, &queue, graph.clone());
    let runs = TemporalRuns::new(&connection, &queue)
        .node_activity(NodeActivityOptions::default().heartbeat(Duration::from_secs(1)));
    let id = support::unique("cancel");
    runs.start(&graph, &id, ReviewUpdate::new()).await.unwrap();
    support::eventually(Duration::from_secs(30), "the node to start", || async {
        (STARTED.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    runs.cancel(&id).await.unwrap();
    let err = runs.result_json(&id).await.unwrap_err();
    assert!(matches!(err, TemporalError::Cancelled { .. }), "{err}");
    assert_eq!(err.to_string(), format!("run `{id}` was cancelled"));
    // The run ends only once the node stopped (the activity's cancellation completed).
    assert!(
        SAW_CANCEL.load(Ordering::SeqCst),
        "the node was not stopped with its cancel token fired"
    );
    drop(worker);
}

// --- a worker killed mid-node -------------------------------------------------------------

#[derive(kit::State, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Job {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

/// first (appends `first ran` to the marker file) → slow (appends a line each time it starts,
/// then works for 3 s) → finish.
fn job_graph(marker: std::path::PathBuf) -> Graph<Job> {
    let first_marker = marker.clone();
    GraphBuilder::<Job>::new("job")
        .node("first", move |_s, _ctx| {
            let marker = first_marker.clone();
            async move {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&marker)?;
                writeln!(file, "first ran")?;
                Ok::<_, NodeError>(JobUpdate::new().log(vec!["first".into()]))
            }
        })
        .node("slow", move |_s, _ctx| {
            let marker = marker.clone();
            async move {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&marker)?;
                writeln!(file, "started in process {}", std::process::id())?;
                drop(file);
                tokio::time::sleep(Duration::from_secs(3)).await;
                Ok::<_, NodeError>(JobUpdate::new().log(vec!["slow".into()]))
            }
        })
        .node("finish", |_s, _ctx| async {
            JobUpdate::new().log(vec!["finish".into()])
        })
        .edge(START, "first")
        .edge("first", "slow")
        .edge("slow", "finish")
        .edge("finish", END)
        .compile()
        .unwrap()
}

/// Not a test of its own: the worker process the kill test starts (twice) by running this test
/// binary again with `KIT_TEMPORAL_TEST_WORKER` set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the worker process of a_run_survives_its_worker_process_being_killed_mid_node"]
async fn worker_process() {
    let (Ok(queue), Ok(marker)) = (
        std::env::var("KIT_TEMPORAL_TEST_WORKER"),
        std::env::var("KIT_TEMPORAL_TEST_MARKER"),
    ) else {
        return;
    };
    let connection = support::connect().await.expect("a Temporal address");
    TemporalWorker::new(&connection, queue)
        .graph(job_graph(marker.into()))
        .unwrap()
        .run()
        .await
        .unwrap();
}

fn start_worker_process(queue: &str, marker: &std::path::Path) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker_process", "--ignored", "--nocapture"])
        .env("KIT_TEMPORAL_TEST_WORKER", queue)
        .env("KIT_TEMPORAL_TEST_MARKER", marker)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

fn starts(marker: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_its_worker_process_being_killed_mid_node() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-kill");
    let marker = std::env::temp_dir().join(format!("{}.log", support::unique("kit-kill")));
    let mut first = start_worker_process(&queue, &marker);
    let runs = TemporalRuns::new(&connection, &queue).node_activity(
        NodeActivityOptions::default()
            .heartbeat(Duration::from_secs(2))
            .initial_retry_interval(Duration::from_millis(200)),
    );
    let id = support::unique("job");
    runs.start_named("job", &id, &JobUpdate::new())
        .await
        .unwrap();

    // The node is running in the first worker process: kill that process.
    support::eventually(Duration::from_secs(60), "the node to start", || async {
        (starts(&marker).len() >= 2).then_some(())
    })
    .await;
    let first_pid = first.id().unwrap();
    first.kill().await.unwrap();
    let mut second = start_worker_process(&queue, &marker);
    let second_pid = second.id().unwrap();

    let state: Job = tokio::time::timeout(Duration::from_secs(90), runs.result(&id))
        .await
        .expect("the run finished on the second worker")
        .unwrap();
    assert_eq!(
        state,
        Job {
            log: vec!["first".into(), "slow".into(), "finish".into()]
        }
    );
    let started = starts(&marker);
    assert_eq!(
        started,
        vec![
            "first ran".to_string(),
            format!("started in process {first_pid}"),
            format!("started in process {second_pid}"),
        ],
        "`first` ran exactly once (the second worker did not run the steps before again); \
         `slow` once in each worker process"
    );
    // One activity for `first`, one for `slow` (two attempts), one for `finish`.
    assert_eq!(
        runs.node_activities(&id).await.unwrap(),
        ["first", "slow", "finish"]
    );
    second.kill().await.unwrap();
    let _ = std::fs::remove_file(&marker);
}

// --- an agent: its model calls and tool calls are activities --------------------------------

static TOOL_CALLS: AtomicUsize = AtomicUsize::new(0);

/// An agent with the scripted model (offline): it calls `stock` once, then answers with what
/// the tool said.
fn stock_agent() -> kit::Agent {
    use kit::message::Role;
    use kit::{Message, ToolCall};
    let model = kit::testing::ScriptedModel::from_fn(|request| {
        Ok(match request.messages.last() {
            Some(m) if m.role == Role::Tool => {
                Message::assistant(format!("In stock: {}", m.text()))
            }
            _ => Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id("c1", "stock", json!({"sku": "A-17"}))],
            ),
        })
    });
    let stock = kit::tool::Tool::from_fn(
        "stock",
        "Units in stock of a product.",
        json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}),
        |args: serde_json::Value, _ctx| async move {
            TOOL_CALLS.fetch_add(1, Ordering::SeqCst);
            Ok::<_, kit::tool::ToolError>(format!("12 units of {}", args["sku"].as_str().unwrap()))
        },
    );
    kit::Agent::builder()
        .name("stock-agent")
        .model(model)
        .tool(stock)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_its_model_and_tool_calls_as_activities() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let agent = stock_agent();
    let queue = support::unique("kit-agent");
    let worker = spawn_worker(&connection, &queue, agent.graph().clone());
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("agent");
    let input = kit::agent::AgentStateUpdate::new()
        .messages(vec![kit::Message::user("How many A-17 do we have?")]);
    runs.start(agent.graph(), &id, input).await.unwrap();
    let state: kit::agent::AgentState = runs.result(&id).await.unwrap();
    let texts: Vec<String> = state.messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        [
            "How many A-17 do we have?",
            "",
            "12 units of A-17",
            "In stock: 12 units of A-17"
        ]
    );
    assert_eq!(TOOL_CALLS.load(Ordering::SeqCst), 1);
    // Each model call and the round of tool calls was an activity of its own.
    assert_eq!(
        runs.node_activities(&id).await.unwrap(),
        ["model", "tools", "model"]
    );
    drop(worker);
}

// --- not supported: an interrupt inside a subgraph -----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_inside_a_subgraph_fails_the_run_with_kits_error() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let child = GraphBuilder::<Review>::new("child")
        .node("ask", |_s, ctx| async move {
            ctx.interrupt("inside?")?;
            Ok::<_, NodeError>(ReviewUpdate::new())
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile()
        .unwrap();
    let parent = GraphBuilder::<Review>::new("parent")
        .subgraph(
            "inner",
            child,
            |_p: &Review| ReviewUpdate::new(),
            |_c: &Review| ReviewUpdate::new(),
        )
        .edge(START, "inner")
        .edge("inner", END)
        .compile()
        .unwrap();
    let queue = support::unique("kit-subgraph");
    let worker = spawn_worker(&connection, &queue, parent.clone());
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("subgraph");
    runs.start(&parent, &id, ReviewUpdate::new()).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), runs.result_json(&id))
        .await
        .expect("the run ended")
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TemporalError::RunFailed { .. }), "{text}");
    assert!(text.contains("node `inner` failed"), "{text}");
    assert!(
        text.contains("called interrupt() but the run has no checkpointer"),
        "{text}"
    );
    drop(worker);
}

// --- a changed graph replaying an old run ----------------------------------------------------

/// `first` → approve (interrupts) → END, under one name for two builds: `first` is `draft` in
/// the old build and `lookup` in the new one.
fn versioned_graph(first: &'static str) -> Graph<Review> {
    GraphBuilder::<Review>::new("versioned")
        .node(first, move |_s, _ctx| async move {
            ReviewUpdate::new().log(vec![first.to_string()])
        })
        .node("approve", |_s, ctx| async move {
            let answer = ctx.interrupt("ok?")?;
            Ok::<_, NodeError>(
                ReviewUpdate::new()
                    .log(vec!["approve".into()])
                    .answer(answer.as_str().unwrap_or_default().to_string()),
            )
        })
        .edge(START, first)
        .edge(first, "approve")
        .edge("approve", END)
        .compile()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_graph_replaying_a_run_is_detected_not_applied() {
    let Some(connection) = support::connect().await else {
        return;
    };
    let queue = support::unique("kit-diverge");
    let old_worker = |connection| {
        TemporalWorker::new(connection, &queue)
            .max_cached_workflows(0)
            .graph(versioned_graph("draft"))
            .unwrap()
            .spawn()
            .unwrap()
    };
    let worker = old_worker(&connection);
    let runs = TemporalRuns::new(&connection, &queue);
    let id = support::unique("diverge");
    runs.start(&versioned_graph("draft"), &id, ReviewUpdate::new())
        .await
        .unwrap();
    support::eventually(Duration::from_secs(30), "the interrupt", || async {
        (!runs.pending_interrupts(&id).await.unwrap().is_empty()).then_some(())
    })
    .await;
    worker.shutdown().await.unwrap();

    // A worker of the new build replays the run (no cache: for the query): its first task is
    // `0:lookup`, the history's is `0:draft`. The divergence fails the workflow task; it is not
    // applied as `lookup`'s output.
    let new_worker = TemporalWorker::new(&connection, &queue)
        .max_cached_workflows(0)
        .graph(versioned_graph("lookup"))
        .unwrap()
        .spawn()
        .unwrap();
    let queried = tokio::time::timeout(Duration::from_secs(20), runs.pending_interrupts(&id))
        .await
        .expect("the query was answered");
    let Err(err) = queried else {
        panic!("the new build answered a query of a run it cannot replay: {queried:?}");
    };
    // sdk-core's check of the activity id (`0:draft#0` recorded, `0:lookup#0` planned).
    let text = err.to_string();
    assert!(text.contains("Nondeterminism"), "{text}");
    assert!(text.contains("0:draft#0"), "{text}");
    new_worker.shutdown().await.unwrap();

    // The old build goes on with the run, unharmed.
    let worker = old_worker(&connection);
    let pending = support::eventually(Duration::from_secs(60), "the interrupt", || async {
        runs.pending_interrupts(&id)
            .await
            .ok()
            .filter(|p| !p.is_empty())
    })
    .await;
    assert_eq!(pending[0].node, "approve");
    runs.resume(&id, json!("yes")).await.unwrap();
    let state: Review = tokio::time::timeout(Duration::from_secs(60), runs.result(&id))
        .await
        .expect("the run finished")
        .unwrap();
    assert_eq!(state.log, ["draft", "approve"]);
    drop(worker);
}

// --- a node that holds its thread ------------------------------------------------------------

static BLOCKING_RUNS: AtomicUsize = AtomicUsize::new(0);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_holds_its_thread_does_not_starve_the_heartbeats() {
    let Some(connection) = support::connect().await else {
        return;
    };
    // Not how to write a node (use spawn_blocking): it holds a runtime thread for 3 heartbeat
    // timeouts. The heartbeats run in a task of their own, on the worker's other thread, so
    // Temporal does not time the node out and run it again.
    let graph = GraphBuilder::<Review>::new("blocking")
        .node("hold", |_s, _ctx| async {
            BLOCKING_RUNS.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(3));
            ReviewUpdate::new().log(vec!["held".into()])
        })
        .edge(START, "hold")
        .edge("hold", END)
        .compile()
        .unwrap();
    let queue = support::unique("kit-blocking");
    let worker = spawn_worker(&connection, &queue, graph.clone());
    let runs = TemporalRuns::new(&connection, &queue).node_activity(
        NodeActivityOptions::default()
            .heartbeat(Duration::from_secs(1))
            .initial_retry_interval(Duration::from_millis(100)),
    );
    let id = support::unique("blocking");
    runs.start(&graph, &id, ReviewUpdate::new()).await.unwrap();
    let state: Review = tokio::time::timeout(Duration::from_secs(60), runs.result(&id))
        .await
        .expect("the run finished")
        .unwrap();
    assert_eq!(state.log, ["held"]);
    assert_eq!(
        BLOCKING_RUNS.load(Ordering::SeqCst),
        1,
        "the node ran again"
    );
    drop(worker);
}
