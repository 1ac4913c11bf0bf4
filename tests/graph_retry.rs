//! Retry policies per node: attempts until success or until the policy gives up, pauses that
//! grow, only the failures the policy names, never an interrupt, never a failed attempt's
//! writes; attempts visible in events and traces; set from the builder and from `graph!`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::event::EventData;
use kit::graph::{GraphBuilder, NodeContext, NodeError, RetryPolicy};
use kit::trace::{Collector, RunKind, RunStatus, Tracer};
use kit::{END, EventKind, Graph, GraphError, MemoryCheckpointer, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Job {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

/// A node that fails `failures` times, then writes once.
fn flaky(calls: &Arc<AtomicUsize>, failures: usize, policy: RetryPolicy) -> Graph<Job> {
    let calls = calls.clone();
    GraphBuilder::<Job>::new("flaky")
        .sync_node(
            "fetch",
            move |_: &Job, _: &NodeContext| -> Result<JobUpdate, NodeError> {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                if n < failures {
                    return Err(NodeError::from(std::io::Error::other(format!(
                        "timeout #{}",
                        n + 1
                    ))));
                }
                Ok(JobUpdate::new().log(vec![format!("fetched on attempt {}", n + 1)]))
            },
        )
        .retry("fetch", policy)
        .edge(START, "fetch")
        .edge("fetch", END)
        .compile()
        .unwrap()
}

fn fast() -> RetryPolicy {
    RetryPolicy::new()
        .initial_interval(Duration::from_millis(2))
        .jitter(false)
}

#[tokio::test]
async fn a_failing_node_is_retried_until_it_succeeds_and_only_the_success_is_written() {
    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(&calls, 2, fast().max_attempts(3));
    let events: Vec<kit::Event> = graph
        .stream_events(JobUpdate::new(), &RunOptions::new())
        .collect()
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let retries: Vec<(u32, String, u64)> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::NodeRetry {
                attempt,
                error,
                delay_ms,
                ..
            } => Some((*attempt, error.clone(), *delay_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [
            (2, "timeout #1".to_string(), 2),
            (3, "timeout #2".to_string(), 4)
        ],
        "each retry announced, the pause doubling"
    );
    let end = events.last().unwrap();
    assert_eq!(end.kind(), EventKind::RunEnd);
    assert_eq!(
        end.data.to_json()["output"]["log"],
        json!(["fetched on attempt 3"])
    );
}

#[tokio::test]
async fn when_the_attempts_run_out_the_step_fails_with_the_last_error() {
    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(&calls, 10, fast().max_attempts(4));
    let err = graph.invoke(JobUpdate::new()).await.unwrap_err();
    assert!(matches!(err, GraphError::NodeFailed { ref node, .. } if node == "fetch"));
    assert!(err.to_string().contains("timeout #4"), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn only_the_failures_the_policy_names_are_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(&calls, 1, fast().retry_on_error::<std::fmt::Error>());
    assert!(graph.invoke(JobUpdate::new()).await.is_err());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "an io::Error is not a fmt::Error"
    );

    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(&calls, 1, fast().retry_on_error::<std::io::Error>());
    assert!(graph.invoke(JobUpdate::new()).await.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(
        &calls,
        1,
        fast().retry_on(|e| e.to_string().starts_with("timeout")),
    );
    assert!(graph.invoke(JobUpdate::new()).await.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_interrupt_is_not_a_failure_and_is_not_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let graph = GraphBuilder::<Job>::new("asks")
        .sync_node(
            "ask",
            move |_: &Job, ctx: &NodeContext| -> Result<JobUpdate, NodeError> {
                c.fetch_add(1, Ordering::SeqCst);
                ctx.interrupt("ok?")?;
                Ok(JobUpdate::new())
            },
        )
        .retry("ask", fast().max_attempts(5))
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let out = graph
        .invoke(JobUpdate::new())
        .thread_id("ask")
        .await
        .unwrap();
    assert!(out.is_interrupted());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn each_attempt_is_its_own_trace_run() {
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let calls = Arc::new(AtomicUsize::new(0));
    let graph = flaky(&calls, 1, fast());
    graph
        .invoke(JobUpdate::new())
        .tracer(tracer.clone())
        .await
        .unwrap();
    let attempts: Vec<_> = collector
        .runs()
        .into_iter()
        .filter(|r| r.kind == RunKind::Node && r.name == "fetch")
        .collect();
    assert_eq!(attempts.len(), 2);
    let failed = attempts
        .iter()
        .find(|r| r.status == RunStatus::Error)
        .unwrap();
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("timeout #1")
    );
    let retried = attempts.iter().find(|r| r.status == RunStatus::Ok).unwrap();
    assert_eq!(retried.inputs["attempt"], 2);
}

#[tokio::test]
async fn a_retry_policy_is_set_in_graph_too() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    async fn fetch(_: &Job, _: &NodeContext) -> Result<JobUpdate, NodeError> {
        if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(NodeError::msg("flaky"));
        }
        Ok(JobUpdate::new().log(vec!["ok".into()]))
    }
    let graph = kit::graph! {
        state: Job;
        node fetch;
        retry fetch = RetryPolicy::new().initial_interval(Duration::from_millis(1));
        edge START -> fetch;
        edge fetch -> END;
    };
    let out = graph.invoke(JobUpdate::new()).await.unwrap();
    assert_eq!(out.state().log, ["ok"]);
    assert_eq!(CALLS.load(Ordering::SeqCst), 2);
}

#[test]
fn a_retry_policy_for_an_unknown_node_is_refused() {
    let err = GraphBuilder::<Job>::new("typo")
        .sync_node("fetch", |_: &Job, _: &NodeContext| JobUpdate::new())
        .retry("fecth", RetryPolicy::new())
        .edge(START, "fetch")
        .edge("fetch", END)
        .compile()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown node `fecth`; did you mean `fetch`?"),
        "{err}"
    );
}
