//! A bounded load test: 1000 runs submitted concurrently to one worker with capacity 16 on
//! 127.0.0.1. Every run reaches a terminal status, each executed exactly once, never more
//! than 16 at a time. Completeness only: speed is measured by `examples/bench.rs` (`w7`).

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kit::server::Worker;
use kit::server::store::{RunStatus, SqliteRunStore};
use kit_testing::load::{Counting, LoadStats, Recording};
use kit_testing::researcher::{self, Gate};
use serde_json::{Value, json};

const RUNS: usize = 1000;
const CAPACITY: usize = 16;
/// Submissions in flight at once (bounds the sockets the test opens).
const IN_FLIGHT: usize = 256;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_runs_all_finish_exactly_once() {
    let stats = Arc::new(LoadStats::default());
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::builder()
        .host("research", counted(&stats))
        .sqlite(dir.path().join("load.sqlite"))
        .unwrap()
        .capacity(CAPACITY)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let url = worker.url();
    let http = reqwest::Client::new();

    let submitted: Vec<(String, String)> = futures::stream::iter(0..RUNS)
        .map(|i| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let topic = format!("topic {i}");
                (submit(&http, &url, &topic).await, topic)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    assert_eq!(submitted.len(), RUNS);
    let ids: HashSet<&str> = submitted.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), RUNS, "every submission got its own run id");

    stats.wait_finished(RUNS).await;

    let runs: Vec<(Value, String)> = futures::stream::iter(submitted.iter().cloned())
        .map(|(id, topic)| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let run: Value = http
                    .get(format!("{url}/runs/{id}"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                (run, topic)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for (run, topic) in &runs {
        // The last execution may have ended a moment before its status was stored.
        let status = run["status"].as_str().unwrap();
        if status != "success" {
            let id = run["run_id"].as_str().unwrap();
            let again = wait_terminal(&http, &url, id).await;
            assert_eq!(again["status"], "success", "{again}");
            continue;
        }
        assert_eq!(
            run["result"],
            format!("Report on {topic}: 3 sources agree about {topic}")
        );
        assert_eq!(run["attempts"], 1);
    }
    let executions = stats.executions();
    assert_eq!(executions.len(), RUNS, "no run lost");
    assert!(
        executions.values().all(|n| *n == 1),
        "no run executed twice"
    );
    assert!(
        executions.keys().all(|id| ids.contains(id.as_str())),
        "only submitted runs executed"
    );
    assert!(
        stats.peak() <= CAPACITY,
        "at most {CAPACITY} at once, saw {}",
        stats.peak()
    );
    worker.shutdown().await.unwrap();
}

/// A run whose execution ended frees its slot while its end is written (the next claim
/// shares that write), but only one capacity's worth of ends may wait to be written: a store
/// slow to record them holds new claims back instead of piling them up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_frees_when_execution_ends_and_unwritten_ends_are_bounded() {
    let stats = Arc::new(LoadStats::default());
    let writes = Gate::closed();
    let worker = Worker::builder()
        .host("research", counted(&stats))
        .store(Recording::gated(
            SqliteRunStore::in_memory().unwrap(),
            stats.clone(),
            writes.clone(),
        ))
        .capacity(1)
        .poll_interval(std::time::Duration::from_millis(20))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(submit(&http, &worker.url(), &format!("t{i}")).await);
    }
    // Capacity 1, yet the second run executes while the first one's end waits to be written.
    tokio::time::timeout(std::time::Duration::from_secs(30), stats.wait_finished(2))
        .await
        .expect("the second run never executed: the first one's unwritten end held its slot");
    // Two ends wait (twice the capacity): no third run is claimed, however long we wait (the
    // queue is polled every 20 ms).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(stats.finished(), 2, "a third run executed");
    let store = worker.store();
    let status = |id: &str| {
        let (store, id) = (store.clone(), id.to_string());
        async move { store.get_run(&id).await.unwrap().unwrap().status }
    };
    assert_eq!(
        status(&ids[0]).await,
        RunStatus::Running,
        "end not written yet"
    );
    assert_eq!(
        status(&ids[1]).await,
        RunStatus::Running,
        "end not written yet"
    );
    assert_eq!(status(&ids[2]).await, RunStatus::Pending);
    assert_eq!(status(&ids[3]).await, RunStatus::Pending);
    assert_eq!(stats.recorded(), 0);

    writes.release();
    stats.wait_recorded(4).await;
    for id in &ids {
        assert_eq!(status(id).await, RunStatus::Success);
    }
    assert!(stats.executions().values().all(|n| *n == 1));
    assert_eq!(stats.peak(), 1, "never more than the capacity executing");
    worker.shutdown().await.unwrap();
}

/// The researcher agent, its gate open, counting into `stats`.
fn counted(stats: &Arc<LoadStats>) -> Counting<kit::Agent> {
    Counting {
        inner: researcher::agent(Gate::open()),
        stats: stats.clone(),
    }
}

/// Starts a researcher run on `topic`; returns its id.
async fn submit(http: &reqwest::Client, url: &str, topic: &str) -> String {
    let r: Value = http
        .post(format!("{url}/runs"))
        .json(&json!({"assistant_id": "research",
                      "input": {"messages": [{"role": "user", "content": topic}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["run_id"].as_str().unwrap().to_string()
}

async fn wait_terminal(http: &reqwest::Client, url: &str, id: &str) -> Value {
    for _ in 0..1000 {
        let run: Value = http
            .get(format!("{url}/runs/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if !matches!(run["status"].as_str(), Some("pending" | "running")) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("run {id} never ended");
}
