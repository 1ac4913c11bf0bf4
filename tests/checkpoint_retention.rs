//! Checkpoint retention on every back-end (memory, a SQLite file, a PostgreSQL server): pruning
//! a thread's history never breaks what a pause needs to resume, frees what nothing reads, and
//! a time to live deletes whole threads that went idle.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use kit::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    Checkpointer, LoadedCheckpoint, PendingWrite, PruneReport, PruneStrategy, Retention,
};
use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::{END, Graph, Outcome, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[macro_use]
#[path = "support/storages.rs"]
mod storages;
use storages::Storage;

suite!(
    keep_latest_keeps_the_heads_branch_and_every_blob_it_reads,
    pruning_twice_removes_nothing_more,
    pruning_an_unknown_thread_removes_nothing,
    keep_latest_zero_still_keeps_the_head,
    a_missing_head_is_reported_and_nothing_is_pruned,
    prune_drops_a_branch_left_behind_by_a_fork,
    prune_during_a_chain_of_interrupts_keeps_every_answer_so_far,
    prune_keeps_a_pause_two_subgraphs_deep,
    a_long_thread_pruned_to_its_head_holds_a_bounded_footprint,
    pruning_while_runs_write_the_thread_loses_nothing,
    delete_threads_before_deletes_only_threads_idle_since_the_cutoff,
    deleting_a_thread_frees_its_storage,
    retention_sweeps_on_a_schedule_until_stopped,
);

// ---------------------------------------------------------------------------------------------
// raw records

/// A checkpoint of thread `thread` in namespace `ns`, written at `created_at`.
struct Raw<'a> {
    thread: &'a str,
    ns: &'a str,
    id: &'a str,
    parent: Option<&'a str>,
    versions: &'a [(&'a str, &'a str)],
    blobs: Vec<ChannelBlob>,
    created_at: String,
}

fn raw(r: Raw<'_>) -> CheckpointWrite {
    CheckpointWrite {
        thread_id: r.thread.to_string(),
        ns: r.ns.to_string(),
        meta: CheckpointMeta {
            id: r.id.to_string(),
            parent_id: r.parent.map(String::from),
            step: 0,
            source: CheckpointSource::Loop,
            created_at: r.created_at,
            next: vec![],
            metadata: json!({}),
        },
        channel_versions: std::sync::Arc::new(
            r.versions
                .iter()
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect(),
        ),
        blobs: r.blobs,
        body: b"{}".to_vec(),
        expected_head: r.parent.map(String::from),
    }
}

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

fn stamp() -> String {
    kit::ids::now_rfc3339_millis()
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|_| kit::ids::time_ordered()).collect()
}

fn pending(task: &str, value: &str) -> PendingWrite {
    PendingWrite {
        task_id: task.to_string(),
        channel: kit::checkpoint::pending::OUTPUT.to_string(),
        value: json!(value),
    }
}

/// Writes thread `thread`: five checkpoints c0..c4 in a line. Channel `m` is a full value at
/// c0, a delta at c1, a full value again at c2 and deltas at c3 and c4; channel `x` is written
/// once, at c0, and read by every checkpoint after. Returns the ids.
async fn five_checkpoints(cp: &dyn Checkpointer, thread: &str) -> Vec<String> {
    let c = ids(5);
    let (c0, c1, c2, c3, c4) = (&*c[0], &*c[1], &*c[2], &*c[3], &*c[4]);
    let full = BlobKind::Full;
    let delta = BlobKind::Delta;
    let writes = [
        (
            c0,
            None,
            vec![("m", c0), ("x", c0)],
            vec![
                blob("m", c0, None, full, "[\"a\"]"),
                blob("x", c0, None, full, "\"X\""),
            ],
        ),
        (
            c1,
            Some(c0),
            vec![("m", c1), ("x", c0)],
            vec![blob("m", c1, Some(c0), delta, "[\"b\"]")],
        ),
        (
            c2,
            Some(c1),
            vec![("m", c2), ("x", c0)],
            vec![blob("m", c2, None, full, "[\"a\",\"b\",\"c\"]")],
        ),
        (
            c3,
            Some(c2),
            vec![("m", c3), ("x", c0)],
            vec![blob("m", c3, Some(c2), delta, "[\"d\"]")],
        ),
        (
            c4,
            Some(c3),
            vec![("m", c4), ("x", c0)],
            vec![blob("m", c4, Some(c3), delta, "[\"e\"]")],
        ),
    ];
    for (id, parent, versions, blobs) in writes {
        cp.put(raw(Raw {
            thread,
            ns: "",
            id,
            parent,
            versions: &versions,
            blobs,
            created_at: stamp(),
        }))
        .await
        .unwrap();
    }
    c
}

/// A loaded checkpoint's channels as text: name -> (full value, deltas).
fn channels(loaded: &LoadedCheckpoint) -> Vec<(String, Option<String>, Vec<String>)> {
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    loaded
        .channels
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.full.as_deref().map(text),
                c.deltas.iter().map(|d| text(d)).collect(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// pruning raw histories

async fn keep_latest_keeps_the_heads_branch_and_every_blob_it_reads(s: &Storage) {
    let cp = s.reopen().await;
    let c = five_checkpoints(cp.as_ref(), "t").await;
    cp.put_writes("t", "", &c[1], vec![pending("a", "1"), pending("b", "2")])
        .await
        .unwrap();
    cp.put_writes("t", "", &c[4], vec![pending("head", "due")])
        .await
        .unwrap();
    let head_before = cp.load("t", "", None).await.unwrap().unwrap();
    let footprint_before = s.footprint("t").await;

    let removed = cp.prune("t", PruneStrategy::KeepLatest(2)).await.unwrap();
    assert_eq!(
        removed,
        PruneReport {
            checkpoints: 3,
            blobs: 2,
            writes: 2,
        },
        "{}: c0..c2 go with c1's writes; m@c0 and m@c1 go; m@c2 (the full value c3 and c4 \
         extend) and x@c0 (read by c4) stay",
        s.name
    );

    // Reopened, as a new process would see it.
    let cp = s.reopen().await;
    let history: Vec<String> = cp
        .history("t", "", None)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(history, [c[4].clone(), c[3].clone()], "{}", s.name);
    let head = cp.load("t", "", None).await.unwrap().unwrap();
    assert_eq!(channels(&head), channels(&head_before), "{}", s.name);
    assert_eq!(
        channels(&head),
        [
            (
                "m".to_string(),
                Some("[\"a\",\"b\",\"c\"]".to_string()),
                vec!["[\"d\"]".to_string(), "[\"e\"]".to_string()]
            ),
            ("x".to_string(), Some("\"X\"".to_string()), vec![]),
        ],
        "{}",
        s.name
    );
    assert_eq!(
        head.pending_writes, head_before.pending_writes,
        "{}",
        s.name
    );
    assert_eq!(head.pending_writes.len(), 1);
    let c3 = cp.load("t", "", Some(&c[3])).await.unwrap().unwrap();
    assert_eq!(channels(&c3)[0].2, ["[\"d\"]"], "{}", s.name);
    let gone = cp.load("t", "", Some(&c[0])).await.unwrap_err();
    assert!(
        matches!(gone, CheckpointError::NotFound { .. }),
        "{}: {gone}",
        s.name
    );
    let threads = cp.threads().await.unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].checkpoints, 2, "{}: the count follows", s.name);
    assert!(
        s.footprint("t").await < footprint_before,
        "{}: storage shrank",
        s.name
    );
}

async fn pruning_twice_removes_nothing_more(s: &Storage) {
    let cp = s.reopen().await;
    five_checkpoints(cp.as_ref(), "t").await;
    let first = cp.prune("t", PruneStrategy::KeepLatest(1)).await.unwrap();
    assert_eq!(first.checkpoints, 4, "{}", s.name);
    let footprint = s.footprint("t").await;
    let second = cp.prune("t", PruneStrategy::KeepLatest(1)).await.unwrap();
    assert!(second.is_empty(), "{}: {second:?}", s.name);
    assert_eq!(s.footprint("t").await, footprint, "{}", s.name);
    // Keeping more than there is removes nothing either.
    let more = cp.prune("t", PruneStrategy::KeepLatest(50)).await.unwrap();
    assert!(more.is_empty(), "{}: {more:?}", s.name);
}

async fn pruning_an_unknown_thread_removes_nothing(s: &Storage) {
    let cp = s.reopen().await;
    five_checkpoints(cp.as_ref(), "kept").await;
    let removed = cp
        .prune("nobody", PruneStrategy::KeepLatest(1))
        .await
        .unwrap();
    assert!(removed.is_empty(), "{}", s.name);
    assert_eq!(
        cp.history("kept", "", None).await.unwrap().len(),
        5,
        "{}",
        s.name
    );
}

async fn keep_latest_zero_still_keeps_the_head(s: &Storage) {
    let cp = s.reopen().await;
    let c = five_checkpoints(cp.as_ref(), "t").await;
    let removed = cp.prune("t", PruneStrategy::KeepLatest(0)).await.unwrap();
    assert_eq!(removed.checkpoints, 4, "{}", s.name);
    let head = cp.load("t", "", None).await.unwrap().unwrap();
    assert_eq!(head.meta.id, c[4], "{}", s.name);
    assert_eq!(
        channels(&head)[0].2.len(),
        2,
        "{}: the chain c4 reads is whole",
        s.name
    );
}

async fn a_missing_head_is_reported_and_nothing_is_pruned(s: &Storage) {
    let cp = s.reopen().await;
    five_checkpoints(cp.as_ref(), "t").await;
    // A namespace whose first checkpoint never arrived: pending writes only, no head.
    cp.put_writes("t", "sub:1", "not-yet", vec![pending("x", "y")])
        .await
        .unwrap();
    let removed = cp.prune("t", PruneStrategy::KeepLatest(1)).await.unwrap();
    assert_eq!(removed.checkpoints, 4, "{}", s.name);
    assert_eq!(
        removed.writes, 0,
        "{}: writes of a checkpoint not stored yet are not pruned",
        s.name
    );
}

// ---------------------------------------------------------------------------------------------
// pruning what graphs wrote

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Doc {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

/// START -> {ask, work} -> END: `ask` asks twice in a row, `work` counts its runs.
fn asking(cp: Arc<dyn Checkpointer>, work_runs: &Arc<AtomicUsize>) -> Graph<Doc> {
    let runs = work_runs.clone();
    GraphBuilder::<Doc>::new("asking")
        .sync_node(
            "ask",
            |_: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                let first = ctx.interrupt(json!("first?"))?;
                let second = ctx.interrupt(json!("second?"))?;
                Ok(DocUpdate::new().log(vec![format!("{first} then {second}")]))
            },
        )
        .sync_node("work", move |_: &Doc, _: &NodeContext| {
            runs.fetch_add(1, Ordering::SeqCst);
            DocUpdate::new().log(vec!["worked".into()])
        })
        .edge(START, "ask")
        .edge(START, "work")
        .edge("ask", END)
        .edge("work", END)
        .checkpointer(cp)
        .compile()
        .unwrap()
}

async fn prune_during_a_chain_of_interrupts_keeps_every_answer_so_far(s: &Storage) {
    let work_runs = Arc::new(AtomicUsize::new(0));
    let opts = RunOptions::new().thread_id("chain");
    // Some history before the pause, so pruning has something to remove.
    let graph = asking(s.reopen().await, &work_runs);
    let Outcome::Interrupted(paused) = graph.invoke(DocUpdate::new()).options(&opts).await.unwrap()
    else {
        panic!("{}: `ask` pauses", s.name);
    };
    assert_eq!(paused.interrupts[0].value, json!("first?"));

    let cp = s.reopen().await;
    cp.prune("chain", PruneStrategy::KeepLatest(1))
        .await
        .unwrap();
    let graph = asking(s.reopen().await, &work_runs);
    let Outcome::Interrupted(paused) = graph
        .resume(Resume::value("yes"))
        .options(&opts)
        .await
        .unwrap()
    else {
        panic!("{}: the second question pauses again", s.name);
    };
    assert_eq!(paused.interrupts[0].value, json!("second?"), "{}", s.name);

    // The first answer is a pending write of the head: pruning keeps it.
    let removed = cp
        .prune("chain", PruneStrategy::KeepLatest(1))
        .await
        .unwrap();
    assert_eq!(removed.writes, 0, "{}: {removed:?}", s.name);
    let graph = asking(s.reopen().await, &work_runs);
    let done = graph
        .resume(Resume::value("sure"))
        .options(&opts)
        .await
        .unwrap();
    let Outcome::Done(state) = done else {
        panic!("{}: both answers given, the run ends", s.name);
    };
    let mut log = state.log.clone();
    log.sort();
    assert_eq!(log, ["\"yes\" then \"sure\"", "worked"], "{}", s.name);
    assert_eq!(
        work_runs.load(Ordering::SeqCst),
        1,
        "{}: the sibling's output was kept, not recomputed",
        s.name
    );
}

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

/// outer: before -> research (middle: lookup (inner: fetch -> ask) -> summarise) -> END
fn nested(cp: Arc<dyn Checkpointer>, fetches: &Arc<AtomicUsize>) -> Graph<Outer> {
    let f = fetches.clone();
    let inner = GraphBuilder::<Inner>::new("inner")
        .sync_node("fetch", move |i: &Inner, _: &NodeContext| {
            f.fetch_add(1, Ordering::SeqCst);
            InnerUpdate::new().answer(format!("data on {}", i.query))
        })
        .sync_node(
            "ask",
            |i: &Inner, ctx: &NodeContext| -> Result<InnerUpdate, NodeError> {
                let verdict = ctx.interrupt(json!({"check": i.answer}))?;
                Ok(InnerUpdate::new().answer(format!("{} ({})", i.answer, verdict)))
            },
        )
        .edge(START, "fetch")
        .edge("fetch", "ask")
        .edge("ask", END)
        .compile()
        .unwrap();
    let middle = GraphBuilder::<Middle>::new("middle")
        .subgraph(
            "lookup",
            inner,
            |m: &Middle| InnerUpdate::new().query(m.question.clone()),
            |i: &Inner| MiddleUpdate::new().notes(vec![i.answer.clone()]),
        )
        .sync_node("summarise", |m: &Middle, _: &NodeContext| {
            MiddleUpdate::new().notes(vec![format!("{} note(s)", m.notes.len())])
        })
        .edge(START, "lookup")
        .edge("lookup", "summarise")
        .edge("summarise", END)
        .compile()
        .unwrap();
    GraphBuilder::<Outer>::new("outer")
        .sync_node("before", |_: &Outer, _: &NodeContext| {
            OuterUpdate::new().log(vec!["before".into()])
        })
        .subgraph(
            "research",
            middle,
            |o: &Outer| MiddleUpdate::new().question(o.topic.clone()),
            |m: &Middle| OuterUpdate::new().log(m.notes.clone()),
        )
        .edge(START, "before")
        .edge("before", "research")
        .edge("research", END)
        .checkpointer(cp)
        .compile()
        .unwrap()
}

async fn prune_keeps_a_pause_two_subgraphs_deep(s: &Storage) {
    let fetches = Arc::new(AtomicUsize::new(0));
    let opts = RunOptions::new().thread_id("deep");
    let graph = nested(s.reopen().await, &fetches);
    let Outcome::Interrupted(paused) = graph
        .invoke(OuterUpdate::new().topic("otters"))
        .options(&opts)
        .await
        .unwrap()
    else {
        panic!("{}: the innermost question pauses the run", s.name);
    };
    let inner_ns = paused.interrupts[0].namespace.join("|");
    let cp = s.reopen().await;
    let inner_before = cp.history("deep", &inner_ns, None).await.unwrap().len();
    assert!(inner_before >= 2, "{}: {inner_before}", s.name);

    let removed = cp
        .prune("deep", PruneStrategy::KeepLatest(1))
        .await
        .unwrap();
    assert!(removed.checkpoints >= 2, "{}: {removed:?}", s.name);
    for ns in ["", inner_ns.as_str()] {
        let left = cp.history("deep", ns, None).await.unwrap().len();
        assert_eq!(left, 1, "{}: namespace `{ns}` keeps its head", s.name);
    }
    let graph = nested(s.reopen().await, &fetches);
    let Outcome::Done(state) = graph
        .resume(Resume::value("verified"))
        .options(&opts)
        .await
        .unwrap()
    else {
        panic!("{}: the innermost pause resumes from the top", s.name);
    };
    assert_eq!(
        state.log,
        ["before", "data on otters (\"verified\")", "1 note(s)"],
        "{}",
        s.name
    );
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        1,
        "{}: the inner work done before the pause is not redone",
        s.name
    );
}

async fn prune_drops_a_branch_left_behind_by_a_fork(s: &Storage) {
    let work_runs = Arc::new(AtomicUsize::new(0));
    let graph = asking(s.reopen().await, &work_runs);
    let opts = RunOptions::new().thread_id("forked");
    graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    graph
        .resume(Resume::value("a"))
        .options(&opts)
        .await
        .unwrap();
    graph
        .resume(Resume::value("b"))
        .options(&opts)
        .await
        .unwrap();
    let history = graph.state_history(&opts, None).await.unwrap();
    let first = history.last().unwrap().checkpoint.id.clone();
    // Fork from the first checkpoint: everything after it is a branch nobody continues.
    let fork = graph
        .fork(
            &RunOptions::new()
                .thread_id("forked")
                .checkpoint_id(first.clone()),
        )
        .await
        .unwrap();
    let cp = s.reopen().await;
    let before = cp.history("forked", "", None).await.unwrap().len();
    cp.prune("forked", PruneStrategy::KeepLatest(100))
        .await
        .unwrap();
    let kept: Vec<String> = cp
        .history("forked", "", None)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(kept, [fork, first], "{}: {before} before", s.name);
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Chat {
    #[state(reducer = kit::reducers::append)]
    messages: Vec<String>,
    turns: i64,
}

fn chatter(cp: Arc<dyn Checkpointer>) -> Graph<Chat> {
    GraphBuilder::<Chat>::new("chat")
        .sync_node("reply", |c: &Chat, _: &NodeContext| {
            ChatUpdate::new()
                .messages(vec![format!("reply {}", c.turns)])
                .turns(c.turns + 1)
        })
        .edge(START, "reply")
        .edge("reply", END)
        .checkpointer(cp)
        .compile()
        .unwrap()
}

/// A draft rewritten whole on every turn: what history costs when state is overwritten.
#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Draft {
    text: String,
    turns: i64,
}

fn redrafter(cp: Arc<dyn Checkpointer>) -> Graph<Draft> {
    GraphBuilder::<Draft>::new("redraft")
        .sync_node("rewrite", |d: &Draft, _: &NodeContext| {
            let line = format!("draft {} ", d.turns);
            DraftUpdate::new()
                .text(line.repeat(2048 / line.len()))
                .turns(d.turns + 1)
        })
        .edge(START, "rewrite")
        .edge("rewrite", END)
        .checkpointer(cp)
        .compile()
        .unwrap()
}

async fn a_long_thread_pruned_to_its_head_holds_a_bounded_footprint(s: &Storage) {
    let graph = redrafter(s.reopen().await);
    let opts = RunOptions::new().thread_id("long");
    let mut after = Vec::new();
    for round in 0..4 {
        for _ in 0..50 {
            graph
                .invoke(DraftUpdate::new())
                .options(&opts)
                .await
                .unwrap();
        }
        let before = s.footprint("long").await;
        graph
            .prune_thread(&opts, PruneStrategy::KeepLatest(1))
            .await
            .unwrap();
        after.push(s.footprint("long").await);
        assert!(
            after[round] * 20 < before,
            "{}: round {round}: {} bytes after pruning, {before} before",
            s.name,
            after[round]
        );
        if let Some(rows) = s.rows("long").await {
            // The thread, its head and the blobs the head reads.
            assert!(rows <= 4, "{}: round {round}: {rows} rows", s.name);
        }
    }
    assert!(
        after[3] <= after[0] + 64,
        "{}: what stays does not grow with the history: {after:?}",
        s.name
    );
    let state = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(state.values.turns, 200, "{}", s.name);
    assert!(state.values.text.starts_with("draft 199 "), "{}", s.name);
}

async fn pruning_while_runs_write_the_thread_loses_nothing(s: &Storage) {
    let graph = chatter(s.reopen().await);
    let cp = s.reopen().await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (started, running) = tokio::sync::oneshot::channel();
    let pruner = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut prunes = 0;
            let mut started = Some(started);
            while !stop.load(Ordering::SeqCst) {
                cp.prune("busy", PruneStrategy::KeepLatest(2))
                    .await
                    .unwrap();
                prunes += 1;
                if let Some(started) = started.take() {
                    let _ = started.send(());
                }
                tokio::task::yield_now().await;
            }
            prunes
        })
    };
    // The runs start once the pruner is running (they can be faster than its first turn).
    running.await.unwrap();
    let opts = RunOptions::new().thread_id("busy");
    for _ in 0..60 {
        graph
            .invoke(ChatUpdate::new().messages(vec!["hi".into()]))
            .options(&opts)
            .await
            .unwrap();
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::SeqCst);
    let prunes = pruner.await.unwrap();
    assert!(prunes > 0, "{}", s.name);
    let graph = chatter(s.reopen().await);
    let state = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(state.values.turns, 60, "{}: every turn counted", s.name);
    assert_eq!(state.values.messages.len(), 120, "{}", s.name);
}

// ---------------------------------------------------------------------------------------------
// time to live

/// A thread of one checkpoint written at `at`.
async fn thread_at(cp: &dyn Checkpointer, thread: &str, at: SystemTime) {
    let id = kit::ids::time_ordered();
    let millis = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    cp.put(raw(Raw {
        thread,
        ns: "",
        id: &id,
        parent: None,
        versions: &[("m", &id)],
        blobs: vec![blob("m", &id, None, BlobKind::Full, "[]")],
        created_at: kit::ids::rfc3339_from_millis(millis, true),
    }))
    .await
    .unwrap();
}

async fn delete_threads_before_deletes_only_threads_idle_since_the_cutoff(s: &Storage) {
    let cp = s.reopen().await;
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    thread_at(cp.as_ref(), "last-month", now - 24 * 30 * hour).await;
    thread_at(cp.as_ref(), "two-hours-ago", now - 2 * hour).await;
    thread_at(cp.as_ref(), "just-now", now).await;
    // A thread whose top level is old but whose subgraph namespace was written just now is
    // not idle.
    thread_at(cp.as_ref(), "busy-below", now - 48 * hour).await;
    let sub = kit::ids::time_ordered();
    cp.put(raw(Raw {
        thread: "busy-below",
        ns: "sub:1",
        id: &sub,
        parent: None,
        versions: &[],
        blobs: vec![],
        created_at: stamp(),
    }))
    .await
    .unwrap();

    let mut deleted = cp.delete_threads_before(now - hour).await.unwrap();
    deleted.sort();
    assert_eq!(deleted, ["last-month", "two-hours-ago"], "{}", s.name);
    let mut left: Vec<String> = cp
        .threads()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    left.sort();
    assert_eq!(left, ["busy-below", "just-now"], "{}", s.name);
    assert!(cp.load("last-month", "", None).await.unwrap().is_none());
    assert_eq!(s.footprint("last-month").await, 0, "{}", s.name);
    assert!(s.footprint("just-now").await > 0, "{}", s.name);
    // Nothing is older than a cutoff in the distant past.
    let none = cp
        .delete_threads_before(SystemTime::UNIX_EPOCH)
        .await
        .unwrap();
    assert!(none.is_empty(), "{}", s.name);
}

async fn deleting_a_thread_frees_its_storage(s: &Storage) {
    let graph = nested(s.reopen().await, &Arc::new(AtomicUsize::new(0)));
    let opts = RunOptions::new().thread_id("gone");
    graph
        .invoke(OuterUpdate::new().topic("otters"))
        .options(&opts)
        .await
        .unwrap();
    assert!(s.footprint("gone").await > 0, "{}", s.name);
    graph.delete_thread(&opts).await.unwrap();
    assert_eq!(
        s.footprint("gone").await,
        0,
        "{}: checkpoints, blobs and pending writes all go",
        s.name
    );
    if let Some(rows) = s.rows("gone").await {
        assert_eq!(rows, 0, "{}: every namespace's row goes too", s.name);
    }
    assert!(graph.get_state(&opts).await.unwrap().is_none());
    // The thread id can be used again from scratch.
    let out = graph
        .invoke(OuterUpdate::new().topic("seals"))
        .options(&opts)
        .await
        .unwrap();
    assert!(out.is_interrupted(), "{}", s.name);
}

async fn retention_sweeps_on_a_schedule_until_stopped(s: &Storage) {
    let cp = s.reopen().await;
    let now = SystemTime::now();
    thread_at(cp.as_ref(), "stale", now - Duration::from_secs(7200)).await;
    five_checkpoints(cp.as_ref(), "live").await;
    // Timestamps have millisecond resolution, and a thread written in the millisecond a sweep
    // starts counts as written since it: the first sweep starts in a later one.
    tokio::time::sleep(Duration::from_millis(5)).await;

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = Retention::new()
        .thread_ttl(Duration::from_secs(3600))
        .keep_latest(2)
        .sweep_every(Duration::from_millis(20))
        .on_sweep(move |result| {
            let report = result.as_ref().expect("a sweep succeeds");
            let _ = tx.send((
                report.deleted_threads.clone(),
                report.removed,
                report.pruned_threads,
            ));
        })
        .spawn(cp.clone());

    let (deleted, removed, pruned) = rx.recv().await.unwrap();
    assert_eq!(deleted, ["stale"], "{}", s.name);
    assert_eq!(removed.checkpoints, 3, "{}", s.name);
    assert_eq!(pruned, 1, "{}", s.name);
    assert_eq!(cp.history("live", "", None).await.unwrap().len(), 2);

    // The next sweeps look only at threads written since: none.
    let (deleted, removed, pruned) = rx.recv().await.unwrap();
    assert!(
        deleted.is_empty() && removed.is_empty() && pruned == 0,
        "{}",
        s.name
    );

    // New checkpoints are pruned by a later sweep.
    let head = cp.load("live", "", None).await.unwrap().unwrap().meta.id;
    let mut parent = head;
    for _ in 0..3 {
        let id = kit::ids::time_ordered();
        cp.put(raw(Raw {
            thread: "live",
            ns: "",
            id: &id,
            parent: Some(&parent),
            versions: &[("m", &id)],
            blobs: vec![blob("m", &id, None, BlobKind::Full, "[]")],
            created_at: stamp(),
        }))
        .await
        .unwrap();
        parent = id;
    }
    loop {
        let (_, removed, _) = rx.recv().await.unwrap();
        if removed.checkpoints > 0 {
            assert_eq!(removed.checkpoints, 3, "{}", s.name);
            break;
        }
    }
    assert_eq!(cp.history("live", "", None).await.unwrap().len(), 2);

    task.stop();
    // Once stopped, the callback (and its sender) is gone with the task.
    assert!(
        tokio::time::timeout(Duration::from_secs(10), async {
            while rx.recv().await.is_some() {}
        })
        .await
        .is_ok(),
        "{}: the sweeps stopped",
        s.name
    );
}

#[tokio::test]
async fn pruning_through_a_graph_needs_its_checkpointer_and_a_thread() {
    let graph = GraphBuilder::<Doc>::new("stateless")
        .sync_node("a", |_: &Doc, _: &NodeContext| DocUpdate::new())
        .edge(START, "a")
        .edge("a", END)
        .compile()
        .unwrap();
    let err = graph
        .prune_thread(
            &RunOptions::new().thread_id("t"),
            PruneStrategy::KeepLatest(1),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("prune_thread"), "{err}");
    let graph = chatter(Arc::new(kit::MemoryCheckpointer::new()));
    let err = graph
        .prune_thread(&RunOptions::new(), PruneStrategy::KeepLatest(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("thread id"), "{err}");
}
