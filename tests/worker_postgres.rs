//! Several workers sharing one PostgreSQL queue (`KIT_TEST_POSTGRES_URL`, started by
//! `.ci/postgres.sh`): no run is executed twice, an expired lease is taken over by a live
//! worker, and a cancel sent to one worker stops a run executing on another.
//!
//! Without `KIT_TEST_POSTGRES_URL` these tests fail when `CI` is set, and otherwise skip
//! with a loud message. Each test uses a PostgreSQL schema of its own and drops it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kit::server::store::{NewRun, PostgresRunStore, RunInput, RunStore};
use kit::server::{Worker, WorkerHandle};
use kit_testing::load::{Counting, LoadStats};
use kit_testing::researcher::{self, Gate};
use kit_testing::worker::wait_for_status;
use serde_json::{Value, json};

fn postgres_url() -> Option<String> {
    match std::env::var("KIT_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("CI").is_some() => panic!(
            "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL worker tests must run \
             in CI; start a server with `source .ci/postgres.sh`"
        ),
        Err(_) => {
            eprintln!(
                "\n!!! SKIPPED: PostgreSQL worker tests need KIT_TEST_POSTGRES_URL (run `source \
                 .ci/postgres.sh` first) !!!\n"
            );
            None
        }
    }
}

fn schema() -> String {
    format!("kw_{}", kit::ids::random().replace('-', "_"))
}

async fn store(url: &str, schema: &str) -> PostgresRunStore {
    PostgresRunStore::connect_in_schema(url, schema)
        .await
        .unwrap()
}

async fn start(
    store: PostgresRunStore,
    gate: Gate,
    stats: Arc<LoadStats>,
    lease: Duration,
) -> WorkerHandle {
    Worker::builder()
        .host(
            "research",
            Counting {
                inner: researcher::agent(gate),
                stats,
            },
        )
        .store(store)
        .capacity(4)
        .lease(lease)
        .poll_interval(Duration::from_millis(50))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap()
}

fn body(topic: &str) -> Value {
    json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": topic}]}})
}

async fn wait_status(url: &str, id: &str, statuses: &[&str]) -> Value {
    wait_for_status(url, id, statuses, Duration::from_secs(30))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_one_queue_and_never_run_a_run_twice() {
    let Some(url) = postgres_url() else { return };
    let schema = schema();
    let stats = Arc::new(LoadStats::default());
    let lease = Duration::from_secs(30);
    let a = start(
        store(&url, &schema).await,
        Gate::open(),
        stats.clone(),
        lease,
    )
    .await;
    let b = start(
        store(&url, &schema).await,
        Gate::open(),
        stats.clone(),
        lease,
    )
    .await;
    let urls = [a.url(), b.url()];
    let http = reqwest::Client::new();
    const RUNS: usize = 200;
    let ids: Vec<String> = futures::stream::iter(0..RUNS)
        .map(|i| {
            let (http, url) = (http.clone(), urls[i % 2].clone());
            async move {
                let r: Value = http
                    .post(format!("{url}/runs"))
                    .json(&body(&format!("t{i}")))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                r["run_id"].as_str().unwrap().to_string()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    stats.wait_finished(RUNS).await;
    let mut workers = HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        // Either worker answers for any run: they share the store.
        let run = wait_status(&urls[(i + 1) % 2], id, &["success"]).await;
        assert_eq!(run["attempts"], 1);
        let record = a.store().get_run(id).await.unwrap().unwrap();
        workers.insert(record.worker_id.unwrap());
    }
    let executions = stats.executions();
    assert_eq!(executions.len(), RUNS);
    assert!(executions.values().all(|n| *n == 1), "a run executed twice");
    assert_eq!(workers.len(), 2, "both workers took runs from the queue");
    assert!(stats.peak() <= 8);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    store(&url, &schema).await.drop_schema().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_worker_takes_over_the_runs_of_a_dead_one_after_its_lease() {
    let Some(url) = postgres_url() else { return };
    let schema = schema();
    let s = store(&url, &schema).await;
    // A run a dead worker claimed, with a lease ending soon.
    let run = s
        .create_run(NewRun {
            run_id: kit::ids::random(),
            thread_id: kit::ids::random(),
            graph_id: "research".into(),
            input: RunInput::Input(json!({"messages": [{"role": "user", "content": "orphan"}]})),
            metadata: json!({}),
            multitask_strategy: None,
            owner: String::new(),
        })
        .await
        .unwrap();
    let claimed = s
        .claim(
            "dead-worker",
            &["research".to_string()],
            1,
            kit::ids::now_millis() + 500,
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let stats = Arc::new(LoadStats::default());
    let w = start(
        store(&url, &schema).await,
        Gate::open(),
        stats,
        Duration::from_millis(300),
    )
    .await;
    // Not taken at start (the lease is live: the dead worker might not be dead), but once
    // the lease expires.
    let done = wait_status(&w.url(), &run.run_id, &["success"]).await;
    assert_eq!(done["attempts"], 2);
    assert_eq!(
        done["result"],
        "Report on orphan: 3 sources agree about orphan"
    );
    w.shutdown().await.unwrap();
    s.drop_schema().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_to_one_worker_stops_the_run_on_another() {
    let Some(url) = postgres_url() else { return };
    let schema = schema();
    let gate = Gate::closed();
    let stats = Arc::new(LoadStats::default());
    let lease = Duration::from_millis(600);
    let a = start(
        store(&url, &schema).await,
        gate.clone(),
        stats.clone(),
        lease,
    )
    .await;
    let r: Value = reqwest::Client::new()
        .post(format!("{}/runs", a.url()))
        .json(&body("long"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = r["run_id"].as_str().unwrap().to_string();
    wait_status(&a.url(), &id, &["running"]).await;
    // B starts after the run is claimed by A, and has nothing to execute.
    let b = start(
        store(&url, &schema).await,
        gate.clone(),
        stats.clone(),
        lease,
    )
    .await;
    let cancelled: Value = reqwest::Client::new()
        .post(format!("{}/runs/{id}/cancel", b.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(stats.executions().len(), 1);
    gate.release();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    store(&url, &schema).await.drop_schema().await.unwrap();
}
