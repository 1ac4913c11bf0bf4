//! The run stores' contract, the same cases on SQLite (a real file) and PostgreSQL (a real
//! server, `KIT_TEST_POSTGRES_URL`; without it the PostgreSQL case fails when `CI` is set and
//! otherwise skips loudly).

use kit::server::store::{
    Finish, NewEvent, NewRun, PostgresRunStore, RecoverAction, RunInput, RunStatus, RunStore,
    SqliteRunStore, StoreError,
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
        owner: String::new(),
    }
}

fn owned_run(id: &str, thread: &str, owner: &str) -> NewRun {
    NewRun {
        owner: owner.to_string(),
        ..new_run(id, thread, "g")
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
        events: vec![NewEvent::new("lifecycle", json!({"event": "completed"}))],
    };
    assert!(!store.finish("a", "w2", &done).await.unwrap());
    assert!(store.finish("a", "w1", &done).await.unwrap());
    assert!(!store.finish("a", "w1", &done).await.unwrap(), "only once");
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
    let t = store
        .create_thread("t9", "", json!({"k": 1}))
        .await
        .unwrap();
    assert_eq!(t.graph_id, None);
    assert_eq!(t.metadata, json!({"k": 1}));
    let again = store
        .create_thread("t9", "", json!({"k": 2}))
        .await
        .unwrap();
    assert_eq!(again.metadata, json!({"k": 1}));
    assert!(store.get_thread("nope").await.unwrap().is_none());

    // Owners: a thread and its runs keep the identity that created them; a run of another
    // identity on it is refused, and creating it again does not change its owner.
    let mine = store
        .create_run(owned_run("m1", "tm", "alice"))
        .await
        .unwrap();
    assert_eq!(mine.owner, "alice");
    assert_eq!(
        store.get_thread("tm").await.unwrap().unwrap().owner,
        "alice"
    );
    assert!(matches!(
        store.create_run(owned_run("m2", "tm", "bob")).await,
        Err(StoreError::ForeignThread(id)) if id == "tm"
    ));
    assert!(matches!(
        store.create_run(owned_run("m3", "tm", "")).await,
        Err(StoreError::ForeignThread(_))
    ));
    assert!(
        store.get_run("m2").await.unwrap().is_none(),
        "nothing was written"
    );
    store
        .create_run(owned_run("m4", "tm", "alice"))
        .await
        .unwrap();
    // A thread's runs that have not ended, oldest first; none for a thread whose runs all
    // ended or an unknown one.
    assert_eq!(
        ids(&store.active_thread_runs("tm").await.unwrap()),
        ["m1", "m4"]
    );
    assert!(store.active_thread_runs("t1").await.unwrap().is_empty());
    assert!(store.active_thread_runs("none").await.unwrap().is_empty());
    let taken = store.create_thread("tm", "bob", json!({})).await.unwrap();
    assert_eq!(taken.owner, "alice", "an existing thread keeps its owner");
    let bobs = store.create_thread("tb", "bob", json!({})).await.unwrap();
    assert_eq!(bobs.owner, "bob");
    assert!(matches!(
        store.create_run(owned_run("m5", "tb", "alice")).await,
        Err(StoreError::ForeignThread(_))
    ));
    assert_eq!(t.owner, "", "the shared identity is the empty owner");

    // The event log: numbered 1, 2, 3, ... per thread, read from a cursor, finished runs'
    // events included (a's `completed` above was number 1 of t1), woken listeners.
    let mut notices = store.event_notices().await.unwrap();
    let first = store.read_events("t1", 0, 10).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].seq, first[0].run_id.as_str()), (1, "a"));
    assert_eq!(first[0].data, json!({"event": "completed"}));
    let events = (0..5)
        .map(|i| NewEvent::new("updates", json!({"i": i})))
        .collect::<Vec<_>>();
    assert_eq!(store.append_events("t1", "b", &events).await.unwrap(), 6);
    // A notice names the thread; an empty one (PostgreSQL, when its `LISTEN` connection is
    // (re)established) means "anything may have changed". Once listening, appends are heard.
    let mut heard = tokio::time::timeout(std::time::Duration::from_secs(30), notices.recv())
        .await
        .unwrap()
        .unwrap();
    if heard.is_empty() {
        // Only now is the listener surely listening: append once more and hear it.
        store
            .append_events("t1", "b", &[NewEvent::new("updates", json!({"i": 5}))])
            .await
            .unwrap();
        while heard.is_empty() {
            heard = tokio::time::timeout(std::time::Duration::from_secs(30), notices.recv())
                .await
                .unwrap()
                .unwrap();
        }
    } else {
        store
            .append_events("t1", "b", &[NewEvent::new("updates", json!({"i": 5}))])
            .await
            .unwrap();
    }
    assert_eq!(heard, "t1");
    let page = store.read_events("t1", 2, 2).await.unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(page[0].data, json!({"i": 1}));
    assert_eq!(page[0].channel(), "updates");
    assert!(store.read_events("t1", 7, 10).await.unwrap().is_empty());
    assert!(store.read_events("t2", 0, 10).await.unwrap().is_empty());
    assert_eq!(store.append_events("t2", "c", &[]).await.unwrap(), 0);
    assert!(matches!(
        store
            .append_events("no-thread", "x", &[NewEvent::new("values", json!({}))])
            .await,
        Err(StoreError::Corrupt(_))
    ));
    // Pruning by age keeps the numbering going.
    assert_eq!(store.prune_events(u64::MAX / 2).await.unwrap(), 7);
    assert!(store.read_events("t1", 0, 10).await.unwrap().is_empty());
    let next = vec![NewEvent::new("values", json!({}))];
    assert_eq!(store.append_events("t1", "b", &next).await.unwrap(), 8);
    assert_eq!(store.prune_events(0).await.unwrap(), 0);
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

/// The layout of a store written before owners were recorded.
const OLD_SQLITE_LAYOUT: &str = "
CREATE TABLE kit_worker_threads (
    thread_id TEXT PRIMARY KEY, graph_id TEXT, metadata TEXT NOT NULL DEFAULT '{}',
    values_json TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE kit_worker_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL, graph_id TEXT NOT NULL, status TEXT NOT NULL,
    input_kind TEXT NOT NULL, input TEXT NOT NULL, output TEXT, error TEXT,
    metadata TEXT NOT NULL DEFAULT '{}', multitask_strategy TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_id TEXT, lease_until INTEGER, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER);
INSERT INTO kit_worker_threads VALUES ('old-t', 'g', '{}', NULL, 1, 1);
INSERT INTO kit_worker_runs (run_id, thread_id, graph_id, status, input_kind, input,
    created_at, updated_at) VALUES ('old-r', 'old-t', 'g', 'pending', 'input', '{}', 1, 1);
";

#[tokio::test]
async fn a_sqlite_store_from_before_owners_is_migrated_to_the_shared_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(OLD_SQLITE_LAYOUT)
        .unwrap();
    let store = SqliteRunStore::open(&path).unwrap();
    let run = store.get_run("old-r").await.unwrap().unwrap();
    assert_eq!(run.owner, "");
    assert_eq!(store.get_thread("old-t").await.unwrap().unwrap().owner, "");
    // The old thread takes runs of the shared identity only.
    store
        .create_run(new_run("new-r", "old-t", "g"))
        .await
        .unwrap();
    assert!(matches!(
        store.create_run(owned_run("x", "old-t", "alice")).await,
        Err(StoreError::ForeignThread(_))
    ));
    // Opening again changes nothing.
    drop(store);
    let again = SqliteRunStore::open(&path).unwrap();
    assert_eq!(again.thread_runs("old-t", 10, 0).await.unwrap().len(), 2);
}

/// The event log of a store from before batches: a row per event in `kit_worker_events`.
const OLD_EVENT_LOG: &str = "
CREATE TABLE kit_worker_threads (
    thread_id TEXT PRIMARY KEY, graph_id TEXT, metadata TEXT NOT NULL DEFAULT '{}',
    values_json TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '', event_seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE kit_worker_events (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL,
    method TEXT NOT NULL, namespace TEXT NOT NULL, data TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID;
CREATE INDEX kit_worker_events_age ON kit_worker_events (created_at);
INSERT INTO kit_worker_threads VALUES ('t', 'g', '{}', NULL, 1, 1, '', 5);
INSERT INTO kit_worker_events VALUES
    ('t', 1, 'r', 'lifecycle', '[]', '{\"event\":\"running\"}', 10),
    ('t', 2, 'r', 'updates', '[\"sub:1\"]', '{\"node\":\"a\"}', 11),
    ('t', 3, 'r', 'custom', 'not json', 'not json either', 12),
    ('t', 4, 'r', 'custom', '{\"not\":\"a list\"}', '1', 13),
    ('t', 5, 'r', 'custom', '[\"a\", 2]', '2', 14);
";

#[tokio::test]
async fn a_sqlite_event_log_of_one_row_per_event_is_moved_to_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old-events.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(OLD_EVENT_LOG)
        .unwrap();
    let store = SqliteRunStore::open(&path).unwrap();
    let events = store.read_events("t", 0, 10).await.unwrap();
    let seen: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e.seq,
                e.method.as_str(),
                e.namespace.clone(),
                e.data.clone(),
                e.created_at,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, "lifecycle", vec![], json!({"event": "running"}), 10),
            (
                2,
                "updates",
                vec!["sub:1".to_string()],
                json!({"node": "a"}),
                11
            ),
            // Unreadable before (the namespace read as the root, the data failed every read).
            (3, "custom", vec![], json!("not json either"), 12),
            // JSON, but not a list of strings: the root, as it was read before.
            (4, "custom", vec![], json!(1), 13),
            (5, "custom", vec![], json!(2), 14),
        ]
    );
    // The numbering goes on from the thread's counter, and the old table is gone.
    let more = [NewEvent::new("values", json!({}))];
    assert_eq!(store.append_events("t", "r2", &more).await.unwrap(), 6);
    assert_eq!(store.read_events("t", 5, 10).await.unwrap()[0].run_id, "r2");
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let old: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'kit_worker_events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(old, 0);
    drop(conn);
    // Opening again moves nothing twice.
    let again = SqliteRunStore::open(&path).unwrap();
    assert_eq!(again.read_events("t", 0, 10).await.unwrap().len(), 6);
}

/// Appends two batches of five events to `thread` (its run is `run`), of 1 KiB events and then
/// of 1 MiB ones, numbered 1..=10, and reads them back from inside a batch and across the two.
async fn batches_of_any_size(store: &dyn RunStore, thread: &str, run: &str) {
    for size in [1024, 1024 * 1024] {
        let text = "x".repeat(size);
        let batch: Vec<NewEvent> = (0..5)
            .map(|i| NewEvent {
                method: "custom".into(),
                namespace: vec![format!("sub:{i}")],
                data: json!({"i": i, "text": text}),
            })
            .collect();
        let last = store.append_events(thread, run, &batch).await.unwrap();
        let middle = store.read_events(thread, last - 3, 2).await.unwrap();
        assert_eq!(
            middle.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [last - 2, last - 1]
        );
        assert_eq!(middle[0].data["i"], 2);
        assert_eq!(middle[0].namespace, ["sub:2"]);
        assert_eq!(middle[1].data["text"].as_str().unwrap().len(), size);
    }
    // Across batches: the end of the first and the start of the second.
    let across = store.read_events(thread, 3, 4).await.unwrap();
    assert_eq!(
        across.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [4, 5, 6, 7]
    );
}

/// One append of 1,000 events (a model answer with hundreds of tool calls maps to that many)
/// reads back whole and in order from any cursor, a page at a time; it is stored as batches
/// of at most 128, so a page never parses more than two.
async fn one_append_of_many_events(store: &dyn RunStore, thread: &str, run: &str) {
    let events: Vec<NewEvent> = (0..1000)
        .map(|i| NewEvent::new("custom", json!({"i": i})))
        .collect();
    let last = store.append_events(thread, run, &events).await.unwrap();
    let first = last - 999;
    for cursor in [first - 1, first + 126, first + 127, first + 500, last - 1] {
        let mut seen = Vec::new();
        let mut after = cursor;
        loop {
            let page = store.read_events(thread, after, 128).await.unwrap();
            let Some(end) = page.last() else { break };
            after = end.seq;
            seen.extend(page.iter().map(|e| (e.seq, e.data["i"].as_u64().unwrap())));
        }
        let expected: Vec<(u64, u64)> = (cursor + 1..=last).map(|s| (s, s - first)).collect();
        assert_eq!(seen, expected, "from {cursor}");
    }
}

#[tokio::test]
async fn sqlite_one_append_of_many_events_is_stored_in_batches_of_128() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.sqlite");
    let store = SqliteRunStore::open(&path).unwrap();
    store.create_run(new_run("r", "t", "g")).await.unwrap();
    store
        .append_events("t", "r", &[NewEvent::new("values", json!({}))])
        .await
        .unwrap();
    one_append_of_many_events(&store, "t", "r").await;
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<(i64, i64)> = conn
        .prepare("SELECT first_seq, last_seq FROM kit_worker_event_batches ORDER BY last_seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut expected = vec![(1, 1)];
    expected.extend((0..8).map(|b| (2 + 128 * b, (1 + 128 * (b + 1)).min(1001))));
    assert_eq!(rows, expected);
}

/// A batch is one row: events of 1 KiB and of 1 MiB go in and come out whole, a read may
/// start and end anywhere inside a batch, and a batch row that is not what kit wrote is an
/// error naming it, not a panic or a silent gap.
#[tokio::test]
async fn sqlite_event_batches_of_any_size_read_from_any_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batches.sqlite");
    let store = SqliteRunStore::open(&path).unwrap();
    store.create_run(new_run("r", "t", "g")).await.unwrap();
    batches_of_any_size(&store, "t", "r").await;
    assert_eq!(store.prune_events(u64::MAX / 2).await.unwrap(), 10);

    // Rows kit did not write: not JSON, and a count that does not match the numbers. A read
    // takes only the batches its events need: one that ends before a bad row still works.
    for event in ["a", "b"] {
        store
            .append_events("t", "r", &[NewEvent::new("values", json!({"e": event}))])
            .await
            .unwrap();
    }
    drop(store);
    let corrupt = |events: &str| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE kit_worker_event_batches SET events = ?1 WHERE last_seq = 12",
            [events],
        )
        .unwrap();
    };
    corrupt("[oops");
    let store = SqliteRunStore::open(&path).unwrap();
    let first = store.read_events("t", 0, 1).await.unwrap();
    assert_eq!((first[0].seq, &first[0].data), (11, &json!({"e": "a"})));
    let err = store.read_events("t", 0, 10).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("12..=12"), "{err}");
    drop(store);
    corrupt(r#"[["a",[],1],["b",[],2]]"#);
    let store = SqliteRunStore::open(&path).unwrap();
    let err = store.read_events("t", 11, 10).await.unwrap_err();
    assert!(err.to_string().contains("holds 2 events"), "{err}");
}

/// Names of this process's threads (Linux: `/proc/self/task/*/comm`).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|name| name.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_sqlite_store_checkpoints_its_log_on_a_thread_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.sqlite");
    let store = SqliteRunStore::open(&path).unwrap();
    if cfg!(target_os = "linux") {
        assert!(
            thread_names().iter().any(|n| n == "kit-sqlite-wal"),
            "no checkpointing thread: {:?}",
            thread_names()
        );
    }
    store.create_run(new_run("r", "t", "g")).await.unwrap();
    // 8 MiB of events: about 2,000 pages of log, twice what asks for a checkpoint. In WAL
    // mode only a checkpoint writes pages into the database file itself.
    let text = "x".repeat(1024 * 1024);
    for i in 0..8 {
        let event = NewEvent::new("custom", json!({"i": i, "text": text}));
        store.append_events("t", "r", &[event]).await.unwrap();
    }
    let file_size = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while file_size() < 4 * 1024 * 1024 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        file_size() >= 4 * 1024 * 1024,
        "the log was not checkpointed into the file ({} bytes) while the store was open",
        file_size()
    );
    // Nothing written was lost on the way.
    let events = store.read_events("t", 0, 100).await.unwrap();
    assert_eq!(events.len(), 8);
    assert_eq!(events[7].data["i"], 7);
    assert_eq!(events[7].data["text"].as_str().unwrap().len(), text.len());
    // The log starts over once checkpointed: without that, 32 MiB more would leave it above
    // 32 MiB.
    for i in 8..40 {
        let event = NewEvent::new("custom", json!({"i": i, "text": text}));
        store.append_events("t", "r", &[event]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let wal = std::fs::metadata(path.with_extension("sqlite-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(wal < 24 * 1024 * 1024, "the log grew to {wal} bytes");
    assert_eq!(store.read_events("t", 0, 100).await.unwrap().len(), 40);
}

#[tokio::test]
async fn sqlite_store_reports_an_unusable_path() {
    let err = SqliteRunStore::open("/nonexistent-dir/x/runs.sqlite").unwrap_err();
    assert!(
        err.to_string().contains("check that the directory exists"),
        "{err}"
    );
}

/// The test PostgreSQL's URL; `None` (after saying so) when there is none outside CI, where
/// the PostgreSQL tests must run.
fn postgres_url() -> Option<String> {
    let url = std::env::var("KIT_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL store tests must run"
        );
        eprintln!(
            "\n!!! SKIPPED: the PostgreSQL run store tests need KIT_TEST_POSTGRES_URL (run \
             `source .ci/postgres.sh` first) !!!\n"
        );
    }
    url
}

/// A plain client on the test PostgreSQL, to lay out old schemas and break rows by hand.
async fn postgres_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn postgres_store_contract() {
    let Some(url) = postgres_url() else {
        return;
    };
    let schema = format!("kws_{}", kit::ids::random().replace('-', "_"));
    let store = PostgresRunStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    assert!(store.shared());
    contract(&store).await;
    store.drop_schema().await.unwrap();

    // A store from before owners: the columns are added, old rows belong to the shared
    // identity.
    let old = format!("kwo_{}", kit::ids::random().replace('-', "_"));
    let client = postgres_client(&url).await;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {old}; SET search_path TO {old};
             CREATE TABLE kit_worker_threads (thread_id TEXT COLLATE \"C\" PRIMARY KEY,
               graph_id TEXT, metadata TEXT NOT NULL DEFAULT '{{}}', values_json TEXT,
               created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
             CREATE TABLE kit_worker_runs (seq BIGSERIAL PRIMARY KEY,
               run_id TEXT COLLATE \"C\" NOT NULL UNIQUE, thread_id TEXT COLLATE \"C\" NOT NULL,
               graph_id TEXT NOT NULL, status TEXT NOT NULL, input_kind TEXT NOT NULL,
               input TEXT NOT NULL, output TEXT, error TEXT, metadata TEXT NOT NULL DEFAULT '{{}}',
               multitask_strategy TEXT, attempts INTEGER NOT NULL DEFAULT 0,
               cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, worker_id TEXT,
               lease_until BIGINT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
               started_at BIGINT, finished_at BIGINT);
             INSERT INTO kit_worker_threads VALUES ('old-t', 'g', '{{}}', NULL, 1, 1);
             INSERT INTO kit_worker_runs (run_id, thread_id, graph_id, status, input_kind,
               input, created_at, updated_at)
               VALUES ('old-r', 'old-t', 'g', 'pending', 'input', '{{}}', 1, 1);"
        ))
        .await
        .unwrap();
    let migrated = PostgresRunStore::connect_in_schema(&url, &old)
        .await
        .unwrap();
    assert_eq!(migrated.get_run("old-r").await.unwrap().unwrap().owner, "");
    assert!(matches!(
        migrated.create_run(owned_run("x", "old-t", "alice")).await,
        Err(StoreError::ForeignThread(_))
    ));
    migrated
        .create_run(new_run("new-r", "old-t", "g"))
        .await
        .unwrap();
    migrated.drop_schema().await.unwrap();
    let err = PostgresRunStore::connect("postgres://kit:wrong@127.0.0.1:1/none")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not connect"), "{err}");
    assert!(
        !err.to_string().contains("wrong"),
        "no password in errors: {err}"
    );
}

/// A worker joining a fleet whose tables are current only reads their version: it takes no
/// lock on the tables live runs are writing (before, its `CREATE INDEX IF NOT EXISTS` and
/// `ADD COLUMN IF NOT EXISTS` waited for them, and could deadlock with them). Tables from a
/// newer kit are refused by name, before anything is changed.
#[tokio::test]
async fn a_postgres_worker_joining_a_fleet_takes_no_lock_on_the_live_tables() {
    let Some(url) = postgres_url() else {
        return;
    };
    let schema = format!("kwj_{}", kit::ids::random().replace('-', "_"));
    let first = PostgresRunStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    first.create_run(new_run("r", "t", "g")).await.unwrap();
    // A live run's transaction: it writes the runs, the threads and the event log.
    let mut live = postgres_client(&url).await;
    let tx = live.transaction().await.unwrap();
    tx.batch_execute(&format!(
        "SET LOCAL search_path TO {schema};
         LOCK TABLE kit_worker_runs, kit_worker_threads, kit_worker_event_batches
           IN ROW EXCLUSIVE MODE;
         UPDATE kit_worker_runs SET attempts = attempts + 1 WHERE run_id = 'r';"
    ))
    .await
    .unwrap();
    let joined = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        PostgresRunStore::connect_in_schema(&url, &schema),
    )
    .await
    .expect("a joining worker must not wait for the live run's transaction")
    .unwrap();
    assert_eq!(joined.get_run("r").await.unwrap().unwrap().graph_id, "g");
    tx.commit().await.unwrap();

    // Tables from a newer kit.
    live.batch_execute(&format!(
        "UPDATE {schema}.kit_worker_schema_version SET version = 7"
    ))
    .await
    .unwrap();
    let err = PostgresRunStore::connect_in_schema(&url, &schema)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SchemaTooNew {
                found: 7,
                supported: 1
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade kit"), "{err}");
    first.drop_schema().await.unwrap();
}

/// The PostgreSQL event log keeps a row per append, as the SQLite one does: a store that kept a
/// row per event is moved over when it is opened (in pages, so a long log is moved whole), a
/// batch reads back from any event, and a batch row that is not what kit wrote is an error
/// naming it.
#[tokio::test]
async fn postgres_event_log_is_moved_to_batches_and_read_from_any_event() {
    let Some(url) = postgres_url() else {
        return;
    };
    let old = format!("kwe_{}", kit::ids::random().replace('-', "_"));
    let client = postgres_client(&url).await;
    // The layout before batches, with the rows of the SQLite test and a long thread (more
    // rows than one page of the move).
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {old}; SET search_path TO {old};
             CREATE TABLE kit_worker_threads (thread_id TEXT COLLATE \"C\" PRIMARY KEY,
               graph_id TEXT, metadata TEXT NOT NULL DEFAULT '{{}}', values_json TEXT,
               created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
               owner TEXT NOT NULL DEFAULT '', event_seq BIGINT NOT NULL DEFAULT 0);
             CREATE TABLE kit_worker_events (thread_id TEXT COLLATE \"C\" NOT NULL,
               seq BIGINT NOT NULL, run_id TEXT NOT NULL, method TEXT NOT NULL,
               namespace TEXT NOT NULL, data TEXT NOT NULL, created_at BIGINT NOT NULL,
               PRIMARY KEY (thread_id, seq));
             INSERT INTO kit_worker_threads VALUES ('t', 'g', '{{}}', NULL, 1, 1, '', 5),
               ('many', 'g', '{{}}', NULL, 1, 1, '', 2500);
             INSERT INTO kit_worker_events VALUES
               ('t', 1, 'r', 'lifecycle', '[]', '{{\"event\":\"running\"}}', 10),
               ('t', 2, 'r', 'updates', '[\"sub:1\"]', '{{\"node\":\"a\"}}', 11),
               ('t', 3, 'r', 'custom', 'not json', 'not json either', 12),
               ('t', 4, 'r', 'custom', '{{\"not\":\"a list\"}}', '1', 13),
               ('t', 5, 'r', 'custom', '[\"a\", 2]', '2', 14);
             INSERT INTO kit_worker_events
               SELECT 'many', n, 'r', 'custom', '[]', '{{\"n\":' || n || '}}', 20
               FROM generate_series(1, 2500) AS n;"
        ))
        .await
        .unwrap();
    let store = PostgresRunStore::connect_in_schema(&url, &old)
        .await
        .unwrap();
    let seen: Vec<_> = store
        .read_events("t", 0, 10)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.seq, e.method.clone(), e.namespace.clone(), e.data.clone()))
        .collect();
    let root: Vec<String> = Vec::new();
    assert_eq!(
        seen,
        [
            (
                1,
                "lifecycle".into(),
                root.clone(),
                json!({"event": "running"})
            ),
            (
                2,
                "updates".into(),
                vec!["sub:1".to_string()],
                json!({"node": "a"})
            ),
            (3, "custom".into(), root.clone(), json!("not json either")),
            (4, "custom".into(), root.clone(), json!(1)),
            (5, "custom".into(), root, json!(2)),
        ]
    );
    let many = store.read_events("many", 0, 5000).await.unwrap();
    assert_eq!(many.len(), 2500);
    assert!(
        many.iter()
            .zip(1..)
            .all(|(e, n)| e.seq == n && e.data["n"] == n)
    );
    let middle = store.read_events("many", 1234, 2).await.unwrap();
    assert_eq!(
        middle.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1235, 1236]
    );
    let gone: bool = client
        .query_one(
            &format!("SELECT to_regclass('{old}.kit_worker_events') IS NULL"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(gone, "the old table is dropped");
    // Numbering goes on from the counter; opening again moves nothing twice.
    store.create_run(new_run("r2", "t", "g")).await.unwrap();
    let more = [NewEvent::new("values", json!({}))];
    assert_eq!(store.append_events("t", "r2", &more).await.unwrap(), 6);
    let again = PostgresRunStore::connect_in_schema(&url, &old)
        .await
        .unwrap();
    assert_eq!(again.read_events("t", 0, 10).await.unwrap().len(), 6);

    // Batches of 1 KiB and 1 MiB events, read from inside a batch and across batches.
    store.create_run(new_run("rb", "b", "g")).await.unwrap();
    batches_of_any_size(&store, "b", "rb").await;
    store.create_run(new_run("rm", "m", "g")).await.unwrap();
    one_append_of_many_events(&store, "m", "rm").await;

    // A batch row kit did not write: a read ahead of it works, one into it names it.
    client
        .batch_execute(&format!(
            "UPDATE {old}.kit_worker_event_batches SET events = '[oops'
             WHERE thread_id = 'b' AND last_seq = 10"
        ))
        .await
        .unwrap();
    assert_eq!(store.read_events("b", 0, 5).await.unwrap().len(), 5);
    let err = store.read_events("b", 0, 10).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("6..=10"), "{err}");
    client
        .batch_execute(&format!(
            "UPDATE {old}.kit_worker_event_batches SET events = '[[\"a\",[],1]]'
             WHERE thread_id = 'b' AND last_seq = 10"
        ))
        .await
        .unwrap();
    let err = store.read_events("b", 5, 10).await.unwrap_err();
    assert!(err.to_string().contains("holds 1 events"), "{err}");
    // Pruning counts events, not rows: everything was appended before now.
    let pruned = store.prune_events(u64::MAX / 2).await.unwrap();
    assert_eq!(pruned, 5 + 2500 + 1 + 10 + 1000);
    store.drop_schema().await.unwrap();
}

/// Calls made at once are committed together by the SQLite store (one transaction per group,
/// a savepoint per call): each must still keep its own outcome — a refused call changes
/// nothing and fails nothing else — and appends to one thread stay numbered 1, 2, 3, … with
/// no gap or repeat.
#[tokio::test]
async fn concurrent_calls_keep_their_own_outcomes_when_committed_together() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(SqliteRunStore::open(dir.path().join("runs.sqlite")).unwrap());
    store
        .create_run(new_run("first", "shared", "g"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            match i % 4 {
                // Fresh runs on threads of their own.
                0 => store
                    .create_run(new_run(&format!("r{i}"), &format!("t{i}"), "g"))
                    .await
                    .map(|_| "created"),
                // The same run id again: refused.
                1 => store
                    .create_run(new_run("first", "shared", "g"))
                    .await
                    .map(|_| "created"),
                // A thread of another graph: refused.
                2 => store
                    .create_run(new_run(&format!("x{i}"), "shared", "other"))
                    .await
                    .map(|_| "created"),
                // Events on one thread, two per call.
                _ => store
                    .append_events(
                        "shared",
                        "first",
                        &[
                            NewEvent::new("custom", json!({"i": i, "part": 0})),
                            NewEvent::new("custom", json!({"i": i, "part": 1})),
                        ],
                    )
                    .await
                    .map(|_| "appended"),
            }
        }));
    }
    let mut outcomes = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        outcomes.push((i, task.await.unwrap()));
    }
    for (i, outcome) in &outcomes {
        match i % 4 {
            0 => {
                assert_eq!(outcome.as_ref().ok(), Some(&"created"), "{i}: {outcome:?}");
                let run = store.get_run(&format!("r{i}")).await.unwrap().unwrap();
                assert_eq!(run.thread_id, format!("t{i}"));
            }
            1 => assert!(
                matches!(outcome, Err(StoreError::DuplicateRun(_))),
                "{i}: {outcome:?}"
            ),
            2 => {
                assert!(
                    matches!(outcome, Err(StoreError::GraphMismatch { .. })),
                    "{i}: {outcome:?}"
                );
                assert!(store.get_run(&format!("x{i}")).await.unwrap().is_none());
            }
            _ => assert_eq!(outcome.as_ref().ok(), Some(&"appended"), "{i}: {outcome:?}"),
        }
    }
    let events = store.read_events("shared", 0, 1000).await.unwrap();
    assert_eq!(events.len(), 100);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
    // Each call's two events are adjacent: one call's events are never split by another's.
    for pair in events.chunks(2) {
        assert_eq!(pair[0].data["i"], pair[1].data["i"]);
        assert_eq!(pair[0].data["part"], 0);
        assert_eq!(pair[1].data["part"], 1);
    }
    assert_eq!(
        store.thread_runs("shared", 100, 0).await.unwrap().len(),
        1,
        "the refused runs left nothing behind"
    );
}
