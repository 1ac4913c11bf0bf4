//! One conformance suite for every checkpointer, written once and run against memory, SQLite
//! (a real file in a temporary directory) and PostgreSQL (a real server, `KIT_TEST_POSTGRES_URL`;
//! each test gets a schema of its own).
//!
//! Every case is an `async fn(&Storage)`. A [`Storage`] makes checkpointer instances on the same
//! underlying storage: [`Storage::reopen`] is a "restart" (a new instance, as a new process
//! would open it). The memory back-end can only hand out the same instance again, so its
//! restarts test the executor side alone.
//!
//! PostgreSQL: without `KIT_TEST_POSTGRES_URL` the PostgreSQL cases fail when `CI` is set, and
//! otherwise print a loud `SKIPPED` line and pass. `.ci/run` starts a server and sets both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kit::checkpoint::sqlite::{SqliteOptions, SqliteSynchronous};
use kit::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    Checkpointer, LoadedCheckpoint, PendingWrite, PostgresCheckpointer, PruneReport, PruneStrategy,
    SqliteCheckpointer, ThreadInfo, pending,
};
use kit::graph::{Durability, GraphBuilder, NodeContext, NodeError, Route};
use kit::{END, Graph, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[macro_use]
#[path = "support/storages.rs"]
mod storages;
use storages::{Counting, Cp, Storage, postgres_url, sqlite_storage, unique_schema};

suite!(
    round_trip_with_full_blobs_and_delta_chains,
    unknown_threads_and_checkpoints,
    history_is_newest_first_with_limit,
    ids_of_every_form_list_in_text_order,
    a_parent_reads_back_as_written_whether_or_not_it_is_the_head,
    pending_writes_upsert_in_first_appearance_order,
    a_step_of_many_tasks_keeps_every_pending_write_in_order,
    stale_expected_head_is_a_conflict,
    a_checkpoint_id_is_never_written_twice,
    concurrent_writers_on_one_thread_race_and_one_loses,
    different_threads_are_written_concurrently,
    delete_thread_removes_every_namespace,
    threads_are_listed_most_recent_first,
    interrupt_then_resume_after_restart,
    failed_node_resumed_after_restart_reruns_only_it,
    get_state_at_a_checkpoint_and_fork,
    durability_modes_write_the_right_history,
    two_runs_resuming_one_thread_conflict,
    agent_conversation_continues_after_restart,
    todos_and_files_survive_a_restart,
    appending_a_message_writes_constant_bytes,
);

// ---------------------------------------------------------------------------------------------
// helpers for raw records

fn blob(
    channel: &str,
    version: &str,
    prev: Option<&str>,
    kind: BlobKind,
    data: &str,
) -> ChannelBlob {
    ChannelBlob {
        channel: channel.to_string(),
        version: version.to_string(),
        prev_version: prev.map(String::from),
        kind,
        data: data.as_bytes().to_vec(),
    }
}

struct W<'a> {
    thread: &'a str,
    ns: &'a str,
    id: &'a str,
    parent: Option<&'a str>,
    expected: Option<&'a str>,
    step: i64,
    versions: &'a [(&'a str, &'a str)],
    blobs: Vec<ChannelBlob>,
}

fn write(w: W<'_>) -> CheckpointWrite {
    CheckpointWrite {
        thread_id: w.thread.to_string(),
        ns: w.ns.to_string(),
        meta: CheckpointMeta {
            id: w.id.to_string(),
            parent_id: w.parent.map(String::from),
            step: w.step,
            source: if w.step < 0 {
                CheckpointSource::Input
            } else {
                CheckpointSource::Loop
            },
            created_at: kit::ids::now_rfc3339_millis(),
            next: vec![format!("node{}", w.step + 1)],
            metadata: json!({"step": w.step, "nested": {"list": [1, 2.5, "x"], "flag": true}}),
        },
        channel_versions: std::sync::Arc::new(
            w.versions
                .iter()
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect(),
        ),
        blobs: w.blobs,
        body: serde_json::to_vec(&json!({"next": [{"node": format!("node{}", w.step + 1)}]}))
            .unwrap(),
        expected_head: w.expected.map(String::from),
    }
}

/// A simple linear write: checkpoint `id` after `expected`, one full blob of channel `c`.
fn simple(thread: &str, id: &str, expected: Option<&str>, step: i64) -> CheckpointWrite {
    write(W {
        thread,
        ns: "",
        id,
        parent: expected,
        expected,
        step,
        versions: &[("c", id)],
        blobs: vec![blob("c", id, None, BlobKind::Full, &format!("\"{id}\""))],
    })
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|_| kit::ids::time_ordered()).collect()
}

fn channel<'a>(loaded: &'a LoadedCheckpoint, name: &str) -> &'a kit::checkpoint::LoadedChannel {
    loaded
        .channels
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("channel {name} missing"))
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

// ---------------------------------------------------------------------------------------------
// raw record cases

async fn round_trip_with_full_blobs_and_delta_chains(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(4);
    let (c0, c1, c2, c3) = (&id[0], &id[1], &id[2], &id[3]);
    let w0 = write(W {
        thread: "rt",
        ns: "",
        id: c0,
        parent: None,
        expected: None,
        step: -1,
        versions: &[("msgs", c0), ("todo", c0)],
        blobs: vec![
            blob("msgs", c0, None, BlobKind::Full, "[\"a\"]"),
            blob("todo", c0, None, BlobKind::Full, "{\"t\":1}"),
        ],
    });
    cp.put(w0.clone()).await.unwrap();
    // Only `msgs` changes: a delta on top of c0; `todo` keeps its version.
    cp.put(write(W {
        thread: "rt",
        ns: "",
        id: c1,
        parent: Some(c0),
        expected: Some(c0),
        step: 0,
        versions: &[("msgs", c1), ("todo", c0)],
        blobs: vec![blob("msgs", c1, Some(c0), BlobKind::Delta, "[\"b\"]")],
    }))
    .await
    .unwrap();
    cp.put(write(W {
        thread: "rt",
        ns: "",
        id: c2,
        parent: Some(c1),
        expected: Some(c1),
        step: 1,
        versions: &[("msgs", c2), ("todo", c2), ("new", c2)],
        blobs: vec![
            blob("msgs", c2, Some(c1), BlobKind::Delta, "[\"c\"]"),
            blob("todo", c2, None, BlobKind::Full, "{\"t\":2}"),
            // A delta on an empty channel has no previous version.
            blob("new", c2, None, BlobKind::Delta, "[1]"),
        ],
    }))
    .await
    .unwrap();
    // A snapshot: `msgs` in full again, its chain starts over. (An empty body is kept too.)
    let mut w3 = write(W {
        thread: "rt",
        ns: "",
        id: c3,
        parent: Some(c2),
        expected: Some(c2),
        step: 2,
        versions: &[("msgs", c3), ("todo", c2), ("new", c2)],
        blobs: vec![blob(
            "msgs",
            c3,
            None,
            BlobKind::Full,
            "[\"a\",\"b\",\"c\",\"d\"]",
        )],
    });
    w3.body = Vec::new();
    cp.put(w3).await.unwrap();

    // A new instance sees the same thing (for memory: the same instance).
    let cp = s.reopen().await;
    let head = cp.load("rt", "", None).await.unwrap().unwrap();
    assert_eq!(head.meta.id, *c3, "{}", s.name);
    assert_eq!(head.head, *c3);
    assert!(head.body.is_empty());
    let msgs = channel(&head, "msgs");
    assert_eq!(
        text(msgs.full.as_deref().unwrap()),
        "[\"a\",\"b\",\"c\",\"d\"]"
    );
    assert!(msgs.deltas.is_empty());

    let at2 = cp.load("rt", "", Some(c2)).await.unwrap().unwrap();
    assert_eq!(at2.meta.id, *c2);
    assert_eq!(
        at2.head, *c3,
        "the head is reported whatever checkpoint is loaded"
    );
    assert_eq!(at2.meta.parent_id.as_deref(), Some(c1.as_str()));
    assert_eq!(at2.meta.step, 1);
    assert_eq!(at2.meta.source, CheckpointSource::Loop);
    assert_eq!(at2.meta.next, ["node2"]);
    assert_eq!(
        at2.meta.metadata,
        json!({"step": 1, "nested": {"list": [1, 2.5, "x"], "flag": true}})
    );
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&at2.body).unwrap(),
        json!({"next": [{"node": "node2"}]})
    );
    let msgs = channel(&at2, "msgs");
    assert_eq!(msgs.version, *c2);
    assert_eq!(text(msgs.full.as_deref().unwrap()), "[\"a\"]");
    let deltas: Vec<&str> = msgs.deltas.iter().map(|d| text(d)).collect();
    assert_eq!(deltas, ["[\"b\"]", "[\"c\"]"], "deltas oldest first");
    let todo = channel(&at2, "todo");
    assert_eq!(text(todo.full.as_deref().unwrap()), "{\"t\":2}");
    let new = channel(&at2, "new");
    assert!(new.full.is_none());
    assert_eq!(new.deltas.len(), 1);
    assert_eq!(at2.channels.len(), 3);

    let at0 = cp.load("rt", "", Some(c0)).await.unwrap().unwrap();
    assert_eq!(at0.meta.source, CheckpointSource::Input);
    assert_eq!(at0.meta.step, -1);
    assert_eq!(at0.meta.parent_id, None);
    assert_eq!(at0.meta.created_at, w0.meta.created_at);
    assert_eq!(at0.channel_versions, *w0.channel_versions);
    assert_eq!(at0.body, w0.body, "the body comes back byte for byte");
    assert_eq!(
        text(channel(&at0, "todo").full.as_deref().unwrap()),
        "{\"t\":1}"
    );

    // Namespaces are separate heads on the same thread.
    let sub = ids(1);
    cp.put(write(W {
        thread: "rt",
        ns: "tools:call_1",
        id: &sub[0],
        parent: None,
        expected: None,
        step: -1,
        versions: &[("msgs", &sub[0])],
        blobs: vec![blob("msgs", &sub[0], None, BlobKind::Full, "[]")],
    }))
    .await
    .unwrap();
    let sub_head = cp.load("rt", "tools:call_1", None).await.unwrap().unwrap();
    assert_eq!(sub_head.meta.id, sub[0]);
    assert_eq!(cp.load("rt", "", None).await.unwrap().unwrap().meta.id, *c3);
}

async fn unknown_threads_and_checkpoints(s: &Storage) {
    let cp = s.reopen().await;
    assert!(cp.load("nobody", "", None).await.unwrap().is_none());
    let err = cp.load("nobody", "", Some("c-1")).await.unwrap_err();
    assert!(
        matches!(&err, CheckpointError::NotFound { thread_id, checkpoint_id }
            if thread_id == "nobody" && checkpoint_id == "c-1"),
        "{}: {err}",
        s.name
    );
    let id = ids(1);
    cp.put(simple("known", &id[0], None, -1)).await.unwrap();
    let err = cp
        .load("known", "", Some("no-such-checkpoint"))
        .await
        .unwrap_err();
    assert!(matches!(err, CheckpointError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("no-such-checkpoint"));
    assert!(cp.history("nobody", "", None).await.unwrap().is_empty());
    assert!(cp.load("known", "other-ns", None).await.unwrap().is_none());
}

async fn history_is_newest_first_with_limit(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(6);
    let mut expected = None;
    for (step, c) in id.iter().enumerate() {
        cp.put(simple("h", c, expected, step as i64 - 1))
            .await
            .unwrap();
        expected = Some(c.as_str());
    }
    let other = ids(1);
    cp.put(simple("h-other", &other[0], None, -1))
        .await
        .unwrap();

    let cp = s.reopen().await;
    let all = cp.history("h", "", None).await.unwrap();
    let got: Vec<&str> = all.iter().map(|m| m.id.as_str()).collect();
    let mut want: Vec<&str> = id.iter().map(String::as_str).collect();
    want.reverse();
    assert_eq!(got, want, "{}: newest first", s.name);
    let steps: Vec<i64> = all.iter().map(|m| m.step).collect();
    assert_eq!(steps, [4, 3, 2, 1, 0, -1]);
    for pair in all.windows(2) {
        assert_eq!(pair[0].parent_id.as_deref(), Some(pair[1].id.as_str()));
    }
    let two = cp.history("h", "", Some(2)).await.unwrap();
    assert_eq!(two, all[..2].to_vec());
    assert!(cp.history("h", "", Some(0)).await.unwrap().is_empty());
    assert_eq!(cp.history("h", "", Some(100)).await.unwrap().len(), 6);
    assert!(cp.history("h", "sub", None).await.unwrap().is_empty());
}

/// A thread whose ids are kit's UUIDs and ids of the caller's own (text, and a UUID in upper
/// case, which is not kit's form): history and rollbacks order them as their texts order.
async fn ids_of_every_form_list_in_text_order(s: &Storage) {
    let cp = s.reopen().await;
    let kit_ids = ids(2);
    let upper = kit::ids::time_ordered().to_uppercase();
    // Written in this order; as texts: "0-a" < upper < kit_ids[0] < kit_ids[1] < "z".
    let written = [
        kit_ids[0].clone(),
        "z".to_string(),
        "0-a".to_string(),
        upper.clone(),
        kit_ids[1].clone(),
    ];
    let mut expected: Option<&str> = None;
    for (step, id) in written.iter().enumerate() {
        cp.put(simple("mixed", id, expected, step as i64))
            .await
            .unwrap();
        expected = Some(id);
    }
    let mut by_text: Vec<&str> = written.iter().map(String::as_str).collect();
    by_text.sort_unstable_by(|a, b| b.cmp(a));
    let listed = |h: Vec<CheckpointMeta>| h.into_iter().map(|m| m.id).collect::<Vec<_>>();
    let cp = s.reopen().await;
    assert_eq!(
        listed(cp.history("mixed", "", None).await.unwrap()),
        by_text,
        "{}",
        s.name
    );
    for limit in [1, 2, 3] {
        assert_eq!(
            listed(cp.history("mixed", "", Some(limit)).await.unwrap()),
            by_text[..limit],
            "{}: limit {limit}",
            s.name
        );
    }
    // A rollback after kit_ids[0] drops what sorts after it: kit_ids[1] and "z". The head
    // moves back to the newest left, kit_ids[0], though "0-a" and upper were written later.
    let dropped = cp.rollback_after("mixed", &kit_ids[0]).await.unwrap();
    assert_eq!(dropped, 2, "{}", s.name);
    let left = listed(cp.history("mixed", "", None).await.unwrap());
    assert_eq!(
        left,
        [kit_ids[0].as_str(), upper.as_str(), "0-a"],
        "{}",
        s.name
    );
    assert_eq!(
        cp.head("mixed", "").await.unwrap().as_deref(),
        Some(kit_ids[0].as_str())
    );
    let head = cp.load("mixed", "", None).await.unwrap().unwrap();
    assert_eq!(
        text(&channel(&head, "c").full.clone().unwrap()),
        format!("\"{}\"", kit_ids[0])
    );
}

/// A planned write: (id, parent, expected head).
type Planned<'a> = (&'a str, Option<&'a str>, Option<&'a str>);

async fn a_parent_reads_back_as_written_whether_or_not_it_is_the_head(s: &Storage) {
    let cp = s.reopen().await;
    let k = ids(6);
    // The in-memory store reuses its head's parsed id when the parent is the head; every other
    // parent is read from its text.
    let plan: Vec<Planned<'_>> = vec![
        (&k[0], None, None),
        (&k[1], Some(&k[0]), Some(&k[0])),
        // An older checkpoint than the head: a fork.
        (&k[2], Some(&k[0]), Some(&k[1])),
        // A text id, then a UUID whose parent (the head) is that text.
        ("text-3", Some(&k[2]), Some(&k[2])),
        (&k[4], Some("text-3"), Some("text-3")),
        (&k[5], Some(&k[4]), Some(&k[4])),
    ];
    put_planned(&cp, &plan, 0).await;
    parents_read_back(&s.reopen().await, s.name, &plan).await;
    // A rollback moves the head back to k[1]; then a child of that head, and a child of k[0].
    let cp = s.reopen().await;
    assert_eq!(
        cp.rollback_after("parents", &k[1]).await.unwrap(),
        4,
        "{}",
        s.name
    );
    let (k6, k7) = (kit::ids::time_ordered(), kit::ids::time_ordered());
    let after: Vec<Planned<'_>> = vec![
        (&k6, Some(&k[1]), Some(&k[1])),
        (&k7, Some(&k[0]), Some(&k6)),
    ];
    put_planned(&cp, &after, 10).await;
    parents_read_back(&s.reopen().await, s.name, &after).await;
}

/// Writes each planned checkpoint on thread `parents`, with the parent given.
async fn put_planned(cp: &Cp, plan: &[Planned<'_>], first_step: i64) {
    for (step, (id, parent, expected)) in (first_step..).zip(plan) {
        let mut w = simple("parents", id, *expected, step);
        w.meta.parent_id = parent.map(String::from);
        cp.put(w).await.unwrap();
    }
}

/// Loads each planned checkpoint and checks its parent.
async fn parents_read_back(cp: &Cp, name: &str, plan: &[Planned<'_>]) {
    for (id, parent, _) in plan {
        let loaded = cp.load("parents", "", Some(id)).await.unwrap().unwrap();
        assert_eq!(loaded.meta.parent_id.as_deref(), *parent, "{name}: {id}");
    }
}

async fn pending_writes_upsert_in_first_appearance_order(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(2);
    cp.put(simple("pw", &id[0], None, -1)).await.unwrap();
    let pw = |task: &str, channel: &str, value: serde_json::Value| PendingWrite {
        task_id: task.to_string(),
        channel: channel.to_string(),
        value,
    };
    cp.put_writes(
        "pw",
        "",
        &id[0],
        vec![
            pw("t1", pending::OUTPUT, json!({"updates": [1]})),
            pw("t2", pending::ERROR, json!("boom")),
        ],
    )
    .await
    .unwrap();
    cp.put_writes(
        "pw",
        "",
        &id[0],
        vec![
            pw(
                "t3",
                pending::INTERRUPT,
                json!([{"id": "i1", "value": "ok?"}]),
            ),
            pw("t1", pending::OUTPUT, json!({"updates": [2]})),
            pw("t3", pending::RESUME, json!({"i1": "yes"})),
        ],
    )
    .await
    .unwrap();

    let cp = s.reopen().await;
    let loaded = cp.load("pw", "", None).await.unwrap().unwrap();
    assert_eq!(
        loaded.pending_writes,
        vec![
            pw("t1", pending::OUTPUT, json!({"updates": [2]})),
            pw("t2", pending::ERROR, json!("boom")),
            pw(
                "t3",
                pending::INTERRUPT,
                json!([{"id": "i1", "value": "ok?"}])
            ),
            pw("t3", pending::RESUME, json!({"i1": "yes"})),
        ],
        "{}",
        s.name
    );
    // Writes belong to their checkpoint: the next checkpoint starts clean, the old one keeps
    // them.
    cp.put(simple("pw", &id[1], Some(&id[0]), 0)).await.unwrap();
    assert!(
        cp.load("pw", "", None)
            .await
            .unwrap()
            .unwrap()
            .pending_writes
            .is_empty()
    );
    let old = cp.load("pw", "", Some(&id[0])).await.unwrap().unwrap();
    assert_eq!(old.pending_writes.len(), 4);
}

/// A step of 10,000 tasks stopped by an interrupt writes 10,000 pending writes at once; a
/// second batch replaces every third and adds more. Each write once searched (or, in SQL,
/// scanned for the next position) all the checkpoint's writes before it.
async fn a_step_of_many_tasks_keeps_every_pending_write_in_order(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(1);
    cp.put(simple("many", &id[0], None, -1)).await.unwrap();
    let n = 10_000;
    let pw = |task: usize, round: u32| PendingWrite {
        task_id: format!("t{task}"),
        channel: pending::OUTPUT.to_string(),
        value: json!({"round": round}),
    };
    cp.put_writes("many", "", &id[0], (0..n).map(|t| pw(t, 1)).collect())
        .await
        .unwrap();
    let second: Vec<PendingWrite> = (0..n)
        .step_by(3)
        .map(|t| pw(t, 2))
        .chain((n..n + 100).map(|t| pw(t, 2)))
        .collect();
    cp.put_writes("many", "", &id[0], second).await.unwrap();
    // A batch naming one new task twice: it keeps its first place and its last value.
    let third = vec![pw(n + 100, 3), pw(n + 101, 3), pw(n + 100, 4)];
    cp.put_writes("many", "", &id[0], third).await.unwrap();
    let cp = s.reopen().await;
    let loaded = cp.load("many", "", None).await.unwrap().unwrap();
    let mut expected: Vec<PendingWrite> = (0..n + 100)
        .map(|t| pw(t, if t % 3 == 0 || t >= n { 2 } else { 1 }))
        .collect();
    expected.extend([pw(n + 100, 4), pw(n + 101, 3)]);
    assert!(
        loaded.pending_writes == expected,
        "{}: writes differ",
        s.name
    );
}

async fn stale_expected_head_is_a_conflict(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(4);
    cp.put(simple("cf", &id[0], None, -1)).await.unwrap();
    // A writer that thinks the thread is new.
    let err = cp.put(simple("cf", &id[1], None, -1)).await.unwrap_err();
    match &err {
        CheckpointError::Conflict {
            thread_id,
            expected,
            found,
        } => {
            assert_eq!(thread_id, "cf");
            assert_eq!(*expected, None);
            assert_eq!(found.as_deref(), Some(id[0].as_str()));
        }
        other => panic!("{}: expected a conflict, got {other}", s.name),
    }
    assert!(err.to_string().contains("another writer"), "{err}");
    cp.put(simple("cf", &id[2], Some(&id[0]), 0)).await.unwrap();
    // A writer one step behind.
    let err = cp
        .put(simple("cf", &id[3], Some(&id[0]), 0))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Conflict { found: Some(f), .. } if *f == id[2]),
        "{err}"
    );
    // The losers left nothing behind.
    let history = cp.history("cf", "", None).await.unwrap();
    let got: Vec<&str> = history.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got, [id[2].as_str(), id[0].as_str()]);
    assert!(matches!(
        cp.load("cf", "", Some(&id[3])).await,
        Err(CheckpointError::NotFound { .. })
    ));
    assert!(matches!(
        cp.load("cf", "", Some(&id[1])).await,
        Err(CheckpointError::NotFound { .. })
    ));
    assert_eq!(cp.load("cf", "", None).await.unwrap().unwrap().head, id[2]);
}

/// A checkpoint written again under an id its thread already has: refused on every back-end
/// (LangGraph's savers overwrite it), and nothing changes. The same id in another thread or
/// namespace is a different checkpoint and is accepted.
async fn a_checkpoint_id_is_never_written_twice(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(3);
    let (x, y) = (&id[0], &id[1]);
    cp.put(simple("dup", x, None, -1)).await.unwrap();
    cp.put(simple("dup", y, Some(x), 0)).await.unwrap();
    // Other content under an id the thread has: the older checkpoint, then the head itself.
    let again = |id: &str, expected: &str| {
        let mut w = simple("dup", id, Some(expected), 5);
        w.blobs = vec![blob("c", id, None, BlobKind::Full, "\"changed\"")];
        w
    };
    for (reused, expected) in [(x, y), (y, y)] {
        let err = cp.put(again(reused, expected)).await.unwrap_err();
        match &err {
            CheckpointError::DuplicateId {
                thread_id,
                ns,
                checkpoint_id,
            } => {
                assert_eq!((thread_id.as_str(), ns.as_str()), ("dup", ""));
                assert_eq!(checkpoint_id, reused);
            }
            other => panic!("{}: expected a duplicate id, got {other}", s.name),
        }
        let text = err.to_string();
        assert!(
            text.contains("never replaced") && text.contains("fresh id"),
            "{text}"
        );
    }
    // A stale head is reported as the conflict it is, before the id is looked at.
    let err = cp.put(simple("dup", x, None, -1)).await.unwrap_err();
    assert!(matches!(err, CheckpointError::Conflict { .. }), "{err}");

    // Nothing changed: history, head, contents, the thread's count.
    let cp = s.reopen().await;
    let history = cp.history("dup", "", None).await.unwrap();
    let got: Vec<&str> = history.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got, [y.as_str(), x.as_str()], "{}", s.name);
    for c in [x, y] {
        let loaded = cp.load("dup", "", Some(c)).await.unwrap().unwrap();
        assert_eq!(loaded.meta.step, if c == x { -1 } else { 0 });
        assert_eq!(
            text(channel(&loaded, "c").full.as_deref().unwrap()),
            format!("\"{c}\"")
        );
    }
    assert_eq!(cp.load("dup", "", None).await.unwrap().unwrap().head, *y);
    let info = cp.threads().await.unwrap();
    let dup = info.iter().find(|t| t.thread_id == "dup").unwrap();
    assert_eq!(dup.checkpoints, 2, "{}", s.name);

    // Not a duplicate: the same id in another thread, and in another namespace of this one.
    cp.put(simple("dup-other", x, None, -1)).await.unwrap();
    let mut sub = simple("dup", x, None, -1);
    sub.ns = "sub:1".into();
    cp.put(sub).await.unwrap();
    // A namespace's own duplicate names that namespace.
    let mut sub = simple("dup", y, Some(x), 0);
    sub.ns = "sub:1".into();
    cp.put(sub.clone()).await.unwrap();
    sub.expected_head = Some(y.clone());
    match cp.put(sub).await.unwrap_err() {
        CheckpointError::DuplicateId { ns, .. } => assert_eq!(ns, "sub:1"),
        other => panic!("{}: expected a duplicate id, got {other}", s.name),
    }
    assert_eq!(
        cp.history("dup", "sub:1", None).await.unwrap().len(),
        2,
        "{}",
        s.name
    );
    // The next checkpoint after a refused one goes on as usual.
    cp.put(simple("dup", &id[2], Some(y), 1)).await.unwrap();
    assert_eq!(cp.history("dup", "", None).await.unwrap().len(), 3);

    // An id of the caller's own (text, not a UUID) is refused the same way, and a refused
    // write keeps none of what it carried: here an exit-durability blob of an earlier step
    // (a version that names no checkpoint), which would otherwise be stored beside it.
    cp.put(simple("dup-text", "cp-1", None, -1)).await.unwrap();
    let mut again = simple("dup-text", "cp-1", Some("cp-1"), 0);
    again.channel_versions = std::sync::Arc::new(
        [("c".to_string(), "cp-1".to_string())]
            .into_iter()
            .collect(),
    );
    again
        .blobs
        .push(blob("d", "cp-0.5", None, BlobKind::Full, "\"kept?\""));
    match cp.put(again).await.unwrap_err() {
        CheckpointError::DuplicateId { checkpoint_id, .. } => assert_eq!(checkpoint_id, "cp-1"),
        other => panic!("{}: expected a duplicate id, got {other}", s.name),
    }
    // A later checkpoint that reads channel `d` at that version finds nothing stored.
    let mut next = write(W {
        thread: "dup-text",
        ns: "",
        id: "cp-2",
        parent: Some("cp-1"),
        expected: Some("cp-1"),
        step: 1,
        versions: &[("c", "cp-1"), ("d", "cp-0.5")],
        blobs: vec![],
    });
    next.meta.next = vec![];
    cp.put(next).await.unwrap();
    let loaded = cp.load("dup-text", "", Some("cp-2")).await;
    let d_stored = matches!(&loaded, Ok(Some(l)) if l.channels.iter().any(|c| c.name == "d" && c.full.is_some()));
    assert!(
        !d_stored,
        "{}: the refused write's blob was kept: {loaded:?}",
        s.name
    );
    assert_eq!(cp.history("dup-text", "", None).await.unwrap().len(), 2);
}

async fn concurrent_writers_on_one_thread_race_and_one_loses(s: &Storage) {
    // Two instances, as two processes would have.
    let a = s.reopen().await;
    let b = s.reopen().await;
    let mut head: Option<String> = None;
    for round in 0..20 {
        let id = ids(2);
        let wa = simple("race", &id[0], head.as_deref(), round - 1);
        let wb = simple("race", &id[1], head.as_deref(), round - 1);
        let (a2, b2) = (a.clone(), b.clone());
        let ta = tokio::spawn(async move { a2.put(wa).await });
        let tb = tokio::spawn(async move { b2.put(wb).await });
        let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
        let winner = match (&ra, &rb) {
            (Ok(()), Err(CheckpointError::Conflict { .. })) => &id[0],
            (Err(CheckpointError::Conflict { .. }), Ok(())) => &id[1],
            _ => panic!(
                "{} round {round}: exactly one writer must win: {ra:?} / {rb:?}",
                s.name
            ),
        };
        let loaded = a.load("race", "", None).await.unwrap().unwrap();
        assert_eq!(&loaded.head, winner);
        head = Some(winner.clone());
    }
    let history = b.history("race", "", None).await.unwrap();
    assert_eq!(history.len(), 20, "one checkpoint per round");
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_id.as_deref(), Some(pair[1].id.as_str()));
    }
}

async fn different_threads_are_written_concurrently(s: &Storage) {
    let mut tasks = Vec::new();
    for t in 0..6 {
        let cp = s.reopen().await;
        tasks.push(tokio::spawn(async move {
            let thread = format!("par-{t}");
            let mut head: Option<String> = None;
            for step in 0..25 {
                let id = kit::ids::time_ordered();
                cp.put(simple(&thread, &id, head.as_deref(), step - 1))
                    .await
                    .unwrap();
                head = Some(id);
            }
            head
        }));
    }
    let heads: Vec<Option<String>> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let cp = s.reopen().await;
    for (t, head) in heads.iter().enumerate() {
        let thread = format!("par-{t}");
        assert_eq!(
            cp.history(&thread, "", None).await.unwrap().len(),
            25,
            "{}",
            s.name
        );
        let loaded = cp.load(&thread, "", None).await.unwrap().unwrap();
        assert_eq!(Some(loaded.head), head.clone());
    }
}

async fn delete_thread_removes_every_namespace(s: &Storage) {
    let cp = s.reopen().await;
    let id = ids(4);
    cp.put(simple("del", &id[0], None, -1)).await.unwrap();
    cp.put(simple("del", &id[1], Some(&id[0]), 0))
        .await
        .unwrap();
    let mut sub = simple("del", &id[2], None, -1);
    sub.ns = "child".to_string();
    cp.put(sub).await.unwrap();
    cp.put_writes(
        "del",
        "",
        &id[1],
        vec![PendingWrite {
            task_id: "t".into(),
            channel: pending::ERROR.into(),
            value: json!("x"),
        }],
    )
    .await
    .unwrap();
    cp.put(simple("keep", &id[3], None, -1)).await.unwrap();

    cp.delete_thread("del").await.unwrap();
    cp.delete_thread("never-existed").await.unwrap();
    let cp = s.reopen().await;
    assert!(
        cp.load("del", "", None).await.unwrap().is_none(),
        "{}",
        s.name
    );
    assert!(cp.load("del", "child", None).await.unwrap().is_none());
    assert!(cp.history("del", "", None).await.unwrap().is_empty());
    assert!(matches!(
        cp.load("del", "", Some(&id[0])).await,
        Err(CheckpointError::NotFound { .. })
    ));
    let threads: Vec<String> = cp
        .threads()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    assert_eq!(threads, ["keep"]);
    assert_eq!(
        cp.load("keep", "", None).await.unwrap().unwrap().head,
        id[3]
    );
    // The thread id can be used again from scratch.
    let fresh = ids(1);
    cp.put(simple("del", &fresh[0], None, -1)).await.unwrap();
    assert_eq!(cp.history("del", "", None).await.unwrap().len(), 1);
}

async fn threads_are_listed_most_recent_first(s: &Storage) {
    let cp = s.reopen().await;
    let at = |minute: u32| format!("2026-11-21T10:{minute:02}:00.000Z");
    let put = |thread: &'static str, ns: &'static str, minute: u32, expected: Option<String>| {
        let id = kit::ids::time_ordered();
        let mut w = simple(thread, &id, expected.as_deref(), 0);
        w.ns = ns.to_string();
        w.meta.created_at = at(minute);
        (w, id)
    };
    let (w, a1) = put("alpha", "", 1, None);
    cp.put(w).await.unwrap();
    let (w, _b1) = put("beta", "", 2, None);
    cp.put(w).await.unwrap();
    let (w, _c1) = put("gamma", "", 3, None);
    cp.put(w).await.unwrap();
    // alpha is updated last.
    let (w, _a2) = put("alpha", "", 4, Some(a1));
    cp.put(w).await.unwrap();
    // A thread with checkpoints only in a sub-namespace is not listed, nor one with only
    // pending writes.
    let (w, _) = put("only-sub", "sub", 5, None);
    cp.put(w).await.unwrap();
    cp.put_writes("only-writes", "", "x", vec![]).await.unwrap();

    let cp = s.reopen().await;
    let threads = cp.threads().await.unwrap();
    let expected = vec![
        ThreadInfo {
            thread_id: "alpha".into(),
            updated_at: at(4),
            checkpoints: 2,
        },
        ThreadInfo {
            thread_id: "gamma".into(),
            updated_at: at(3),
            checkpoints: 1,
        },
        ThreadInfo {
            thread_id: "beta".into(),
            updated_at: at(2),
            checkpoints: 1,
        },
    ];
    assert_eq!(threads, expected, "{}", s.name);
}

// ---------------------------------------------------------------------------------------------
// graph-level cases

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

fn chain(n: usize) -> Graph<S> {
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

async fn interrupt_then_resume_after_restart(s: &Storage) {
    let runs = Arc::new(AtomicUsize::new(0));
    let build = |cp: Cp| {
        let r = runs.clone();
        GraphBuilder::<S>::new("review")
            .sync_node("draft", |_: &S, _: &NodeContext| {
                SUpdate::new().items(item("draft"))
            })
            .node("ask", move |_: Arc<S>, ctx: NodeContext| {
                let runs = r.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let answer = ctx.interrupt(json!({"question": "approve?"}))?;
                    Ok::<_, NodeError>(
                        SUpdate::new().last(format!("answer: {}", answer.as_str().unwrap_or(""))),
                    )
                }
            })
            .edge(START, "draft")
            .edge("draft", "ask")
            .edge("ask", END)
            .checkpointer(cp)
            .compile()
            .unwrap()
    };
    let opts = RunOptions::new().thread_id("review-1");
    {
        let graph = build(s.reopen().await);
        let out = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
        assert!(out.is_interrupted(), "{}", s.name);
        assert_eq!(out.interrupts()[0].value["question"], "approve?");
    }
    // "Restart": a new checkpointer instance and a new graph.
    let graph = build(s.reopen().await);
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.next, ["ask"]);
    assert_eq!(snapshot.interrupts.len(), 1);
    assert_eq!(snapshot.interrupts[0].value["question"], "approve?");
    assert_eq!(snapshot.values.items, ["draft"]);
    let done = graph
        .resume(Resume::value("yes"))
        .options(&opts)
        .await
        .unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(done.state().last, "answer: yes");
    assert_eq!(done.state().items, ["draft"], "draft ran once");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "ask ran, paused, and ran again on resume"
    );
    let after = build(s.reopen().await)
        .get_state(&opts)
        .await
        .unwrap()
        .unwrap();
    assert!(after.next.is_empty());
    assert_eq!(after.values.last, "answer: yes");
}

async fn failed_node_resumed_after_restart_reruns_only_it(s: &Storage) {
    let ok_runs = Arc::new(AtomicUsize::new(0));
    let bad_runs = Arc::new(AtomicUsize::new(0));
    let build = |cp: Cp| {
        let (o, b) = (ok_runs.clone(), bad_runs.clone());
        GraphBuilder::<S>::new("failing")
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
            .sync_node("after", |_: &S, _: &NodeContext| {
                SUpdate::new().items(item("after"))
            })
            .edge(START, "ok")
            .edge(START, "bad")
            .join(["ok", "bad"], "after")
            .edge("after", END)
            .checkpointer(cp)
            .compile()
            .unwrap()
    };
    let opts = RunOptions::new().thread_id("fail-1");
    {
        let graph = build(s.reopen().await);
        let err = graph
            .invoke(SUpdate::new())
            .options(&opts)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{}: {err}", s.name);
    }
    let graph = build(s.reopen().await);
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.next, ["bad"], "only the failed task is still due");
    assert_eq!(snapshot.errors.len(), 1);
    assert!(snapshot.errors[0].1.contains("boom"));
    let out = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert_eq!(out.state().items, ["ok", "bad fixed", "after"]);
    assert_eq!(
        ok_runs.load(Ordering::SeqCst),
        1,
        "the sibling's stored output was reused"
    );
    assert_eq!(bad_runs.load(Ordering::SeqCst), 2);
}

async fn get_state_at_a_checkpoint_and_fork(s: &Storage) {
    let graph = chain(5).with_checkpointer(s.reopen().await);
    let opts = RunOptions::new().thread_id("tt");
    graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
    let graph = chain(5).with_checkpointer(s.reopen().await);
    let history = graph.state_history(&opts, None).await.unwrap();
    assert_eq!(history.len(), 6, "{}", s.name);
    let at = RunOptions::new()
        .thread_id("tt")
        .checkpoint_id(history[2].checkpoint.id.clone());
    let old = graph.get_state(&at).await.unwrap().unwrap();
    assert_eq!(old.values.items, ["n0", "n1", "n2"]);
    assert_eq!(old.values.count, 3);
    assert_eq!(old.next, ["n3"]);
    let forked = graph.fork(&at).await.unwrap();

    let graph = chain(5).with_checkpointer(s.reopen().await);
    let head = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(head.checkpoint.id, forked);
    assert_eq!(head.checkpoint.source, CheckpointSource::Fork);
    assert_eq!(head.values.items, ["n0", "n1", "n2"]);
    assert_eq!(head.next, ["n3"]);
    let out = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert_eq!(out.state().items, ["n0", "n1", "n2", "n3", "n4"]);
    assert_eq!(out.state().count, 5);
    // Both branches stay in the history; the old head is still loadable.
    let all = graph.state_history(&opts, None).await.unwrap();
    assert_eq!(all.len(), 6 + 1 + 2);
    let old_head = RunOptions::new()
        .thread_id("tt")
        .checkpoint_id(history[0].checkpoint.id.clone());
    assert_eq!(
        graph
            .get_state(&old_head)
            .await
            .unwrap()
            .unwrap()
            .values
            .count,
        5
    );
    // Editing the state is a checkpoint too.
    graph
        .update_state(&opts, SUpdate::new().last("edited"), None)
        .await
        .unwrap();
    let edited = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(edited.values.last, "edited");
    assert_eq!(edited.values.items.len(), 5);
}

async fn durability_modes_write_the_right_history(s: &Storage) {
    for (i, durability) in [Durability::Sync, Durability::Async, Durability::Exit]
        .into_iter()
        .enumerate()
    {
        let thread = format!("dur-{i}");
        let opts = RunOptions::new().thread_id(&thread).durability(durability);
        let out = chain(5)
            .with_checkpointer(s.reopen().await)
            .invoke(SUpdate::new())
            .options(&opts)
            .await
            .unwrap();
        assert_eq!(out.state().count, 5);
        // Read back through a new instance: what was reported done is durable.
        let graph = chain(5).with_checkpointer(s.reopen().await);
        let history = graph.state_history(&opts, None).await.unwrap();
        if durability == Durability::Exit {
            assert_eq!(history.len(), 1, "{}: exit writes one checkpoint", s.name);
            assert_eq!(history[0].values.items, ["n0", "n1", "n2", "n3", "n4"]);
            assert_eq!(history[0].values.count, 5);
            assert!(history[0].next.is_empty());
        } else {
            let steps: Vec<i64> = history.iter().map(|h| h.checkpoint.step).collect();
            assert_eq!(steps, [4, 3, 2, 1, 0, -1], "{}: {durability:?}", s.name);
            let counts: Vec<i64> = history.iter().map(|h| h.values.count).collect();
            assert_eq!(counts, [5, 4, 3, 2, 1, 0]);
            assert_eq!(history[5].next, ["n0"]);
            assert_eq!(history[1].values.items.len(), 4);
        }
        // A second invoke continues the thread in every mode.
        let out = graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
        assert_eq!(out.state().count, 10);
        assert_eq!(out.state().items.len(), 10);
    }
}

/// Delegates to a checkpointer, and makes every `load` wait until `n` loads happened, so two
/// runs surely read the same head before either writes.
struct LoadBarrier {
    inner: Cp,
    barrier: Arc<tokio::sync::Barrier>,
}

#[kit::async_trait]
impl Checkpointer for LoadBarrier {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        self.inner.put(write).await
    }
    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        self.inner
            .put_writes(thread_id, ns, checkpoint_id, writes)
            .await
    }
    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        let out = self.inner.load(thread_id, ns, checkpoint_id).await;
        self.barrier.wait().await;
        out
    }
    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError> {
        self.inner.history(thread_id, ns, limit).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(thread_id).await
    }
    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        self.inner.prune(thread_id, strategy).await
    }
    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        self.inner.delete_threads_before(cutoff).await
    }
    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        self.inner.threads().await
    }
}

async fn two_runs_resuming_one_thread_conflict(s: &Storage) {
    let opts = RunOptions::new()
        .thread_id("two-runs")
        .durability(Durability::Sync);
    chain(3)
        .with_checkpointer(s.reopen().await)
        .invoke(SUpdate::new())
        .options(&opts)
        .await
        .unwrap();
    for durability in [Durability::Sync, Durability::Async] {
        let opts = opts.clone().durability(durability);
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let g1 = chain(3).with_checkpointer(Arc::new(LoadBarrier {
            inner: s.reopen().await,
            barrier: barrier.clone(),
        }));
        let g2 = chain(3).with_checkpointer(Arc::new(LoadBarrier {
            inner: s.reopen().await,
            barrier,
        }));
        let (o1, o2) = (opts.clone(), opts.clone());
        let t1 = tokio::spawn(async move { g1.invoke(SUpdate::new()).options(&o1).await });
        let t2 = tokio::spawn(async move { g2.invoke(SUpdate::new()).options(&o2).await });
        let (a, b) = (t1.await.unwrap(), t2.await.unwrap());
        let conflicts = [&a, &b]
            .iter()
            .filter(|r| matches!(r, Err(e) if e.is_conflict()))
            .count();
        let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
        assert_eq!(
            (conflicts, wins),
            (1, 1),
            "{} {durability:?}: exactly one run loses: {a:?} / {b:?}",
            s.name
        );
        let loser = if a.is_err() { &a } else { &b };
        let text = loser.as_ref().unwrap_err().to_string();
        assert!(
            text.contains("two-runs") && text.contains("another writer"),
            "{text}"
        );
    }
    // The history is one straight line: 3 runs of input + 3 steps, parents linked.
    let graph = chain(3).with_checkpointer(s.reopen().await);
    let history = graph.state_history(&opts, None).await.unwrap();
    assert_eq!(history.len(), 12, "{}", s.name);
    for pair in history.windows(2) {
        assert_eq!(
            pair[0].checkpoint.parent_id.as_deref(),
            Some(pair[1].checkpoint.id.as_str())
        );
    }
    assert_eq!(history[0].values.count, 9);
    assert_eq!(history[0].values.items.len(), 9);
}

async fn agent_conversation_continues_after_restart(s: &Storage) {
    use kit::Message;
    use kit::agent::Agent;
    use kit::testing::ScriptedModel;
    let opts = RunOptions::new().thread_id("chat-1");
    {
        let agent = Agent::builder()
            .model(ScriptedModel::new([Message::assistant(
                "Nice to meet you, Ada.",
            )]))
            .checkpointer(s.reopen().await)
            .build()
            .unwrap();
        let out = agent.invoke("Hi, I am Ada.").options(&opts).await.unwrap();
        assert_eq!(out.state().final_text(), "Nice to meet you, Ada.");
    }
    let model = ScriptedModel::new([Message::assistant("Your name is Ada.")]);
    let agent = Agent::builder()
        .model(model.clone())
        .checkpointer(s.reopen().await)
        .build()
        .unwrap();
    let out = agent
        .invoke("What is my name?")
        .options(&opts)
        .await
        .unwrap();
    let texts: Vec<String> = out.state().messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        [
            "Hi, I am Ada.",
            "Nice to meet you, Ada.",
            "What is my name?",
            "Your name is Ada."
        ],
        "{}",
        s.name
    );
    // The model saw the restored conversation.
    let request = &model.requests()[0];
    assert_eq!(request.messages.len(), 3);
}

async fn todos_and_files_survive_a_restart(s: &Storage) {
    use kit::agent::{Agent, Todo, TodoStatus};
    use kit::middleware::filesystem::FilesystemMiddleware;
    use kit::middleware::todos::TodoMiddleware;
    use kit::testing::ScriptedModel;
    use kit::{Message, ToolCall};
    let agent = |model: ScriptedModel, checkpointer| {
        Agent::builder()
            .model(model)
            .middleware(TodoMiddleware::new())
            .filesystem(FilesystemMiddleware::new())
            .checkpointer(checkpointer)
            .build()
            .unwrap()
    };
    let opts = RunOptions::new().thread_id("plan-1");
    let planner = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "t1",
                    "write_todos",
                    json!({"todos": [{"content": "Draft the report", "status": "in_progress"}]}),
                ),
                ToolCall::with_id(
                    "f1",
                    "write_file",
                    json!({"file_path": "/notes.md", "content": "first notes"}),
                ),
            ],
        ),
        Message::assistant("Planned."),
    ]);
    agent(planner, s.reopen().await)
        .invoke("Plan the report.")
        .options(&opts)
        .await
        .unwrap();
    // A new checkpointer on the same storage (a new process, for the durable back-ends).
    let out = agent(
        ScriptedModel::new([Message::assistant("Still on it.")]),
        s.reopen().await,
    )
    .invoke("Where are we?")
    .options(&opts)
    .await
    .unwrap();
    assert_eq!(
        out.state().todos,
        [Todo {
            content: "Draft the report".into(),
            status: TodoStatus::InProgress
        }],
        "{}",
        s.name
    );
    assert_eq!(
        out.state().files["/notes.md"].content,
        "first notes",
        "{}",
        s.name
    );
}

// ---------------------------------------------------------------------------------------------
// growth: appending a message writes O(1) bytes

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Chat {
    #[state(reducer = kit::reducers::append)]
    messages: Vec<String>,
    n: i64,
    target: i64,
}

const MESSAGE_FILL: usize = 80;

/// One node that appends one message per superstep until `n == target`.
fn chatter() -> Graph<Chat> {
    GraphBuilder::<Chat>::new("chatter")
        .sync_node("say", |s: &Chat, _: &NodeContext| {
            ChatUpdate::new()
                .messages(vec![format!(
                    "message {:06} {}",
                    s.n,
                    "x".repeat(MESSAGE_FILL)
                )])
                .n(s.n + 1)
        })
        .edge(START, "say")
        .route("say", ["say", END], |s: &Chat| {
            if s.n < s.target {
                Route::to("say")
            } else {
                Route::end()
            }
        })
        .compile()
        .unwrap()
}

/// Runs the chatter on `thread` until it has `target` messages.
async fn chat_until(cp: Cp, thread: &str, target: i64) {
    let opts = RunOptions::new()
        .thread_id(thread)
        .durability(Durability::Sync)
        .recursion_limit(100_000);
    let out = chatter()
        .with_checkpointer(cp)
        .invoke(ChatUpdate::new().target(target))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(out.state().messages.len() as i64, target);
}

fn median(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v[v.len() / 2]
}

async fn appending_a_message_writes_constant_bytes(s: &Storage) {
    const STEPS: usize = 3000;
    let counting = Arc::new(Counting::new(s.reopen().await));
    chat_until(counting.clone(), "grow", STEPS as i64).await;
    let puts = counting.puts();
    // The input checkpoint, then one per message.
    assert_eq!(puts.len(), STEPS + 1, "{}", s.name);
    let per_step = &puts[1..];
    let message = format!("message {:06} {}", 0, "x".repeat(MESSAGE_FILL)).len();

    // Step by step: a typical step at message ~10,000 bytes in writes what one at message ~100
    // writes (the occasional full snapshot is the exception, not the rule).
    let early = median(per_step[50..550].to_vec());
    let late = median(per_step[STEPS - 500..].to_vec());
    assert!(
        late <= early + 16,
        "{}: a typical step writes {early} bytes early and {late} bytes late",
        s.name
    );
    assert!(
        early < 4 * message + 600,
        "{}: {early} bytes for one message",
        s.name
    );

    // Amortised: snapshots included, the average step stays bounded (a back-end or executor
    // that rewrote the whole conversation would write ~3000/2 messages per step here).
    let avg = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
    let first = avg(&per_step[..STEPS / 3]);
    let all = avg(per_step);
    assert!(
        all <= 2.0 * first,
        "{}: average bytes per step grew from {first:.0} to {all:.0}",
        s.name
    );
    assert!(
        all < (5 * message + 600) as f64,
        "{}: {all:.0} bytes per step",
        s.name
    );

    // And what was written reads back.
    let graph = chatter().with_checkpointer(s.reopen().await);
    let state = graph
        .get_state(&RunOptions::new().thread_id("grow"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.values.messages.len(), STEPS);
    assert!(state.values.messages[STEPS - 1].starts_with(&format!("message {:06}", STEPS - 1)));
}

// ---------------------------------------------------------------------------------------------
// back-end specific cases

fn sqlite_rows(path: &std::path::Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_added_per_message_do_not_grow() {
    let s = sqlite_storage();
    let path = s.sqlite_path.clone().unwrap();
    let rows = |path: &std::path::Path| {
        (
            sqlite_rows(path, "kit_checkpoints"),
            sqlite_rows(path, "kit_blobs"),
        )
    };
    // Each invoke applies its input (one checkpoint: `target` changed) and then appends one
    // message per step (one checkpoint row holding two blobs: `messages` and `n`).
    // One instance stays open throughout (so its WAL is not removed on close).
    let cp = s.reopen().await;
    chat_until(cp.clone(), "rows", 100).await;
    let before_early = rows(&path);
    chat_until(cp.clone(), "rows", 200).await;
    let after_early = rows(&path);
    chat_until(cp.clone(), "rows", 2900).await;
    let before_late = rows(&path);
    chat_until(cp.clone(), "rows", 3000).await;
    let after_late = rows(&path);
    let early = (
        after_early.0 - before_early.0,
        after_early.1 - before_early.1,
    );
    let late = (after_late.0 - before_late.0, after_late.1 - before_late.1);
    assert_eq!(
        early, late,
        "rows added for 100 messages: early {early:?}, late {late:?}"
    );
    assert_eq!(
        early,
        (101, 0),
        "1 + 100 checkpoint rows, each holding the blobs it wrote"
    );
    // ~3000 commits of several 4 KiB pages each went through the WAL (about 75 MiB of frames):
    // the background checkpoints keep the file far below that.
    let wal = std::fs::metadata(path.with_extension("sqlite-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(wal < 48 << 20, "the WAL grew to {wal} bytes");
    drop(cp);
}

/// Two processes on one file give channel names their indexes in turn; each reads what the
/// other wrote under the right names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_instances_sharing_a_file_agree_on_channel_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.sqlite");
    let a = SqliteCheckpointer::open(&path).unwrap();
    let b = SqliteCheckpointer::open(&path).unwrap();
    let writes: [(&SqliteCheckpointer, &[&str]); 4] = [
        (&a, &["x"]),
        (&b, &["y"]),
        (&a, &["y", "z"]),
        (&b, &["z", "x", "w"]),
    ];
    for (i, (cp, channels)) in writes.iter().enumerate() {
        let id = kit::ids::time_ordered();
        let versions: Vec<(&str, &str)> = channels.iter().map(|c| (*c, id.as_str())).collect();
        let blobs = channels
            .iter()
            .map(|c| blob(c, &id, None, BlobKind::Full, &format!("\"{c}\"")))
            .collect();
        cp.put(write(W {
            thread: &format!("t{i}"),
            ns: "",
            id: &id,
            parent: None,
            expected: None,
            step: -1,
            versions: &versions,
            blobs,
        }))
        .await
        .unwrap();
    }
    for reader in [&a, &b, &SqliteCheckpointer::open(&path).unwrap()] {
        for (i, (_, channels)) in writes.iter().enumerate() {
            let loaded = reader
                .load(&format!("t{i}"), "", None)
                .await
                .unwrap()
                .unwrap();
            let mut names: Vec<&str> = loaded.channel_versions.keys().map(String::as_str).collect();
            names.sort_unstable();
            let mut want = channels.to_vec();
            want.sort_unstable();
            assert_eq!(names, want, "thread t{i}");
            for c in *channels {
                let full = channel(&loaded, c).full.clone().unwrap();
                assert_eq!(text(&full), format!("\"{c}\""), "thread t{i}, channel {c}");
            }
        }
    }
    let names: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM kit_channels", [], |r| r.get(0))
        .unwrap();
    assert_eq!(names, 4, "one index per name");
}

#[test]
fn sqlite_file_from_a_newer_kit_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.sqlite");
    drop(SqliteCheckpointer::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute("UPDATE kit_schema_version SET version = 999", [])
            .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteCheckpointer::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::SchemaTooNew {
                found: 999,
                supported: kit::checkpoint::sqlite::SQLITE_SCHEMA_VERSION
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade kit"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file was not touched"
    );
    let url = format!("sqlite://{}", path.display());
    assert!(matches!(
        SqliteCheckpointer::open_url(&url),
        Err(CheckpointError::SchemaTooNew { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_urls_and_bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let abs = dir.path().join("url.sqlite");
    let cp: Cp =
        Arc::new(SqliteCheckpointer::open_url(&format!("sqlite://{}", abs.display())).unwrap());
    let id = kit::ids::time_ordered();
    cp.put(simple("u", &id, None, -1)).await.unwrap();
    drop(cp);
    // `sqlite:///abs` is the same file.
    let again = SqliteCheckpointer::open_url(&format!("sqlite://{}", abs.display())).unwrap();
    assert_eq!(again.path(), Some(abs.as_path()));
    assert_eq!(again.load("u", "", None).await.unwrap().unwrap().head, id);
    let mode: String = rusqlite::Connection::open(&abs)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");

    // Full sync: every commit waits for the disk (and runs off the async runtime).
    let full: Cp = Arc::new(
        SqliteCheckpointer::open_with(
            dir.path().join("full.sqlite"),
            SqliteOptions {
                synchronous: SqliteSynchronous::Full,
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    );
    let graph = chain(3).with_checkpointer(full.clone());
    let opts = RunOptions::new()
        .thread_id("full")
        .durability(Durability::Sync);
    assert_eq!(
        graph
            .invoke(SUpdate::new())
            .options(&opts)
            .await
            .unwrap()
            .state()
            .count,
        3
    );
    assert_eq!(full.history("full", "", None).await.unwrap().len(), 4);

    let mem: Cp = Arc::new(SqliteCheckpointer::open_url("sqlite::memory:").unwrap());
    mem.put(simple("m", &id, None, -1)).await.unwrap();
    assert_eq!(mem.history("m", "", None).await.unwrap().len(), 1);

    let err = SqliteCheckpointer::open_url("postgres://x").unwrap_err();
    assert!(err.to_string().contains("sqlite:///absolute/path"), "{err}");
    let err = SqliteCheckpointer::open(dir.path().join("missing-dir/x.sqlite")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("missing-dir") && text.contains("writable"),
        "{text}"
    );
    // Not a database.
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let err = SqliteCheckpointer::open(&junk).unwrap_err();
    assert!(err.to_string().contains("not a kit SQLite"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_schema_from_a_newer_kit_is_refused_untouched() {
    let Some(url) = postgres_url() else { return };
    let schema = unique_schema();
    let cp = PostgresCheckpointer::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "UPDATE {schema}.kit_schema_version SET version = 999"
        ))
        .await
        .unwrap();
    let err = PostgresCheckpointer::connect_in_schema(&url, &schema)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::SchemaTooNew {
                found: 999,
                supported: kit::checkpoint::postgres::POSTGRES_SCHEMA_VERSION
            }
        ),
        "{err}"
    );
    let version: i64 = client
        .query_one(
            &format!("SELECT version FROM {schema}.kit_schema_version"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 999, "left as it was");
    cp.drop_schema().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_errors_are_clear_and_hide_the_password() {
    // Nothing listens on port 1.
    let err = PostgresCheckpointer::connect("postgres://kit:hunter2@127.0.0.1:1/kit")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("127.0.0.1:1") && text.contains("running"),
        "{text}"
    );
    let err = PostgresCheckpointer::connect("not a url at all")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("postgres://user:password@host"),
        "{err}"
    );
    let err = PostgresCheckpointer::connect_in_schema("postgres://x@127.0.0.1:1/x", "Bad; DROP")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("schema name"), "{err}");
}

/// A back-end that writes at once (kit's in-memory one) is handed each step's checkpoint by
/// reference (`Checkpointer::put_now`); one that does not (a wrapper that only forwards `put`)
/// is handed the owned write. Both store the same checkpoints: the same links, steps, nodes
/// due, metadata, bodies and channel data (full values and deltas alike).
#[tokio::test]
async fn a_checkpoint_by_reference_stores_what_an_owned_write_stores() {
    let direct: Arc<kit::checkpoint::MemoryCheckpointer> = Arc::default();
    let wrapped = Arc::new(Counting::new(Arc::new(
        kit::checkpoint::MemoryCheckpointer::new(),
    )));
    // Enough messages for deltas and, past 16 KiB, a new full value.
    let steps = 400;
    chat_until(direct.clone(), "t", steps).await;
    chat_until(wrapped.clone(), "t", steps).await;
    assert_eq!(wrapped.puts().len(), steps as usize + 1, "owned writes");
    let by_ref = direct.history("t", "", None).await.unwrap();
    let owned = wrapped.history("t", "", None).await.unwrap();
    assert_eq!(by_ref.len(), owned.len());
    let mut kinds = std::collections::BTreeSet::new();
    for (a, b) in by_ref.iter().zip(&owned) {
        assert_eq!(
            (
                a.step,
                a.source,
                &a.next,
                &a.metadata,
                a.parent_id.is_some()
            ),
            (
                b.step,
                b.source,
                &b.next,
                &b.metadata,
                b.parent_id.is_some()
            )
        );
        let la = direct.load("t", "", Some(&a.id)).await.unwrap().unwrap();
        let lb = wrapped.load("t", "", Some(&b.id)).await.unwrap().unwrap();
        assert_eq!(la.body, lb.body);
        assert_eq!(la.meta.parent_id, a.parent_id);
        let data = |l: &LoadedCheckpoint| -> Vec<kit::checkpoint::LoadedChannel> {
            l.channels
                .iter()
                .map(|c| kit::checkpoint::LoadedChannel {
                    version: String::new(),
                    ..c.clone()
                })
                .collect()
        };
        assert_eq!(data(&la), data(&lb), "step {}", a.step);
        for c in &la.channels {
            kinds.insert((c.full.is_some(), !c.deltas.is_empty()));
        }
    }
    assert!(
        kinds.contains(&(true, true)),
        "deltas on a full value were compared: {kinds:?}"
    );
}
