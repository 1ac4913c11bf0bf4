//! The run stores' contract, the same cases on SQLite (a real file) and PostgreSQL (a real
//! server, `KIT_TEST_POSTGRES_URL`; without it the PostgreSQL case fails when `CI` is set and
//! otherwise skips loudly).

use kit::server::store::{
    Finish, NewRun, PostgresRunStore, RecoverAction, RunInput, RunStatus, RunStore, SqliteRunStore,
    StoreError,
};
use serde_json::json;

fn new_run(id: &str, thread: &str, graph: &str) -> NewRun {
    NewRun {
        run_id: id.to_string(),
        thread_id: thread.to_string(),
        graph_id: graph.to_string(),
        input: RunInput::Input(json!({"messages": [{"role": "user", "content": id}]})),
        metadata: json!({"n": id}),
        multitask_strategy: Some("enqueue".into()),
    }
}

fn g() -> Vec<String> {
    vec!["g".to_string()]
}

fn ids(runs: &[kit::server::RunRecord]) -> Vec<&str> {
    runs.iter().map(|r| r.run_id.as_str()).collect()
}

const FAR: u64 = u64::MAX / 2;

async fn contract(store: &dyn RunStore) {
    // Creating runs creates their threads; a thread keeps its graph.
    let a = store.create_run(new_run("a", "t1", "g")).await.unwrap();
    assert_eq!(a.status, RunStatus::Pending);
    assert_eq!(a.attempts, 0);
    assert_eq!(a.metadata, json!({"n": "a"}));
    assert_eq!(a.multitask_strategy.as_deref(), Some("enqueue"));
    let t1 = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(t1.graph_id.as_deref(), Some("g"));
    assert!(matches!(
        store.create_run(new_run("x", "t1", "other")).await,
        Err(StoreError::GraphMismatch { .. })
    ));
    assert!(matches!(
        store.create_run(new_run("a", "t1", "g")).await,
        Err(StoreError::DuplicateRun(_))
    ));
    store.create_run(new_run("b", "t1", "g")).await.unwrap();
    store.create_run(new_run("c", "t2", "g")).await.unwrap();
    store.create_run(new_run("o", "t3", "other")).await.unwrap();

    // One run per thread at a time, oldest first; other graphs are left alone.
    let claimed = store.claim("w1", &g(), 10, FAR).await.unwrap();
    assert_eq!(ids(&claimed), ["a", "c"]);
    assert!(claimed.iter().all(|r| r.status == RunStatus::Running
        && r.attempts == 1
        && r.worker_id.as_deref() == Some("w1")));
    assert!(store.claim("w2", &g(), 10, FAR).await.unwrap().is_empty());

    // Only the worker holding a run finishes it; the thread gets the values.
    let done = Finish {
        status: RunStatus::Success,
        output: Some(json!({"values": {"messages": ["hi"]}, "result": "hi"})),
        error: None,
    };
    assert!(!store.finish("a", "w2", done.clone()).await.unwrap());
    assert!(store.finish("a", "w1", done.clone()).await.unwrap());
    assert!(!store.finish("a", "w1", done).await.unwrap(), "only once");
    let a = store.get_run("a").await.unwrap().unwrap();
    assert_eq!(a.status, RunStatus::Success);
    assert_eq!(a.output.unwrap()["result"], "hi");
    assert!(a.finished_at.is_some());
    assert_eq!(
        store.get_thread("t1").await.unwrap().unwrap().values,
        Some(json!({"messages": ["hi"]}))
    );

    // Now b is next on t1.
    assert_eq!(ids(&store.claim("w2", &g(), 10, FAR).await.unwrap()), ["b"]);

    // Cancels: a pending run ends at once, a running one is flagged for its worker.
    store.create_run(new_run("d", "t4", "g")).await.unwrap();
    let d = store.request_cancel("d").await.unwrap().unwrap();
    assert_eq!(d.status, RunStatus::Cancelled);
    let b = store.request_cancel("b").await.unwrap().unwrap();
    assert_eq!(b.status, RunStatus::Running);
    assert!(b.cancel_requested);
    assert_eq!(store.renew("w2", FAR).await.unwrap(), ["b"]);
    assert!(store.renew("w1", FAR).await.unwrap().is_empty());
    assert!(store.request_cancel("nope").await.unwrap().is_none());

    // Release puts a run back without counting the attempt.
    store.release("c", "w1").await.unwrap();
    let c = store.get_run("c").await.unwrap().unwrap();
    assert_eq!((c.status, c.attempts), (RunStatus::Pending, 0));

    // Recovery: leases still running are left alone unless everything is taken over.
    let c = store.claim("w1", &g(), 10, 1000).await.unwrap();
    assert_eq!(ids(&c), ["c"]);
    let none = store
        .recover("w3", false, 500, RecoverAction::Requeue, 3)
        .await
        .unwrap();
    assert!(none.is_empty(), "lease until 1000 is live at 500");
    let recovered = store
        .recover("w3", false, 2000, RecoverAction::Requeue, 3)
        .await
        .unwrap();
    assert_eq!(ids(&recovered), ["c"]);
    assert_eq!(recovered[0].status, RunStatus::Pending);
    // `all_running` takes b too (its lease is far away): it had a cancel request.
    let recovered = store
        .recover("w3", true, 2000, RecoverAction::Requeue, 3)
        .await
        .unwrap();
    assert_eq!(ids(&recovered), ["b"]);
    assert_eq!(recovered[0].status, RunStatus::Cancelled);
    // Fail: an explicit error.
    store.claim("w1", &g(), 10, 0).await.unwrap();
    let failed = store
        .recover("w3", false, 1, RecoverAction::Fail, 3)
        .await
        .unwrap();
    assert_eq!(ids(&failed), ["c"]);
    assert_eq!(failed[0].status, RunStatus::Error);
    assert!(
        failed[0]
            .error
            .as_deref()
            .unwrap()
            .contains("crashed or was killed")
    );

    // Runs of a thread, newest first, paged.
    let runs = store.thread_runs("t1", 10, 0).await.unwrap();
    assert_eq!(ids(&runs), ["b", "a"]);
    assert_eq!(ids(&store.thread_runs("t1", 1, 1).await.unwrap()), ["a"]);
    assert!(store.thread_runs("none", 10, 0).await.unwrap().is_empty());

    // Threads made on their own, then idempotently.
    let t = store.create_thread("t9", json!({"k": 1})).await.unwrap();
    assert_eq!(t.graph_id, None);
    assert_eq!(t.metadata, json!({"k": 1}));
    let again = store.create_thread("t9", json!({"k": 2})).await.unwrap();
    assert_eq!(again.metadata, json!({"k": 1}));
    assert!(store.get_thread("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn sqlite_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteRunStore::open(dir.path().join("runs.sqlite")).unwrap();
    assert!(!store.shared());
    contract(&store).await;
    // The file keeps everything.
    let reopened = SqliteRunStore::open(dir.path().join("runs.sqlite")).unwrap();
    assert_eq!(
        reopened.get_run("a").await.unwrap().unwrap().status,
        RunStatus::Success
    );
}

#[tokio::test]
async fn sqlite_store_reports_an_unusable_path() {
    let err = SqliteRunStore::open("/nonexistent-dir/x/runs.sqlite").unwrap_err();
    assert!(
        err.to_string().contains("check that the directory exists"),
        "{err}"
    );
}

#[tokio::test]
async fn postgres_store_contract() {
    let Ok(url) = std::env::var("KIT_TEST_POSTGRES_URL") else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL store test must run"
            );
        }
        eprintln!(
            "\n!!! SKIPPED: the PostgreSQL run store test needs KIT_TEST_POSTGRES_URL (run \
             `source .ci/postgres.sh` first) !!!\n"
        );
        return;
    };
    let schema = format!("kws_{}", kit::ids::random().replace('-', "_"));
    let store = PostgresRunStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    assert!(store.shared());
    contract(&store).await;
    store.drop_schema().await.unwrap();
    let err = PostgresRunStore::connect("postgres://kit:wrong@127.0.0.1:1/none")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not connect"), "{err}");
    assert!(
        !err.to_string().contains("wrong"),
        "no password in errors: {err}"
    );
}
