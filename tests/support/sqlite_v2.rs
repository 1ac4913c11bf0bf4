//! A SQLite file written by kit's schema version 2 (one row per checkpoint and per blob, ids as
//! text), kept in `tests/fixtures/`, and what that kit read back from it.
//!
//! `tests/fixtures/sqlite-v2.sqlite` was written by kit at commit 4c914dd (the last with
//! schema 2) running [`write_threads`]; `tests/fixtures/sqlite-v2.json` is [`dump`] of it by
//! that same kit. A later kit must migrate the file and read back exactly the same.

#![allow(dead_code)]

use std::sync::Arc;

use kit::checkpoint::{
    BlobKind, ChannelBlob, CheckpointMeta, CheckpointSource, CheckpointWrite, Checkpointer,
    LoadedCheckpoint, PendingWrite, PruneStrategy,
};
use kit::graph::{Durability, GraphBuilder, NodeContext, NodeError};
use kit::{END, Graph, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
pub struct Doc {
    pub n: i64,
    #[state(reducer = kit::reducers::append)]
    pub log: Vec<String>,
}

fn step(name: &'static str) -> impl Fn(&Doc, &NodeContext) -> DocUpdate + Send + Sync {
    move |d: &Doc, _: &NodeContext| DocUpdate::new().n(d.n + 1).log(vec![name.to_string()])
}

/// START -> a -> b -> c -> END; each node adds one to `n` and its name to `log`.
pub fn chain(cp: Arc<dyn Checkpointer>) -> Graph<Doc> {
    GraphBuilder::<Doc>::new("chain")
        .sync_node("a", step("a"))
        .sync_node("b", step("b"))
        .sync_node("c", step("c"))
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .checkpointer(cp)
        .compile()
        .expect("the chain compiles")
}

/// START -> ask -> END; `ask` asks for a name and logs it.
pub fn asking(cp: Arc<dyn Checkpointer>) -> Graph<Doc> {
    GraphBuilder::<Doc>::new("asking")
        .sync_node(
            "ask",
            |_: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                let name = ctx.interrupt(json!("name?"))?;
                Ok(DocUpdate::new().log(vec![format!("hello {name}")]))
            },
        )
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(cp)
        .compile()
        .expect("the asking graph compiles")
}

/// The (thread, namespace) pairs the fixture holds.
pub const THREADS: &[(&str, &str)] = &[
    ("chain", ""),
    ("big", ""),
    ("forked", ""),
    ("exit", ""),
    ("pruned", ""),
    ("paused", ""),
    ("custom", ""),
    ("custom", "sub:1"),
];

fn opts(thread: &str) -> RunOptions {
    RunOptions::new().thread_id(thread)
}

/// What the fixture's threads went through.
pub async fn write_threads(cp: Arc<dyn Checkpointer>) {
    let graph = chain(cp.clone());
    for _ in 0..3 {
        graph
            .invoke(DocUpdate::new())
            .options(&opts("chain"))
            .await
            .expect("chain runs");
    }
    // A value past the snapshot threshold: full values and deltas after them.
    for i in 0..3 {
        let big = format!("{i}:{}", "x".repeat(9_000));
        graph
            .invoke(DocUpdate::new().log(vec![big]))
            .options(&opts("big"))
            .await
            .expect("big runs");
    }
    graph
        .invoke(DocUpdate::new())
        .options(&opts("forked"))
        .await
        .expect("forked runs");
    let history = graph
        .state_history(&opts("forked"), None)
        .await
        .expect("history");
    let at = history[2].checkpoint.id.clone();
    graph
        .fork(&opts("forked").checkpoint_id(at))
        .await
        .expect("forks");
    graph
        .update_state(&opts("forked"), DocUpdate::new().n(100), Some("a"))
        .await
        .expect("updates");
    graph
        .invoke(DocUpdate::new())
        .options(&opts("forked"))
        .await
        .expect("forked runs on");
    for _ in 0..2 {
        graph
            .invoke(DocUpdate::new())
            .options(&opts("exit").durability(Durability::Exit))
            .await
            .expect("exit runs");
    }
    for _ in 0..4 {
        graph
            .invoke(DocUpdate::new())
            .options(&opts("pruned"))
            .await
            .expect("pruned runs");
    }
    cp.prune("pruned", PruneStrategy::KeepLatest(2))
        .await
        .expect("prunes");
    let asking = asking(cp.clone());
    let out = asking
        .invoke(DocUpdate::new())
        .options(&opts("paused"))
        .await
        .expect("asks");
    assert!(out.is_interrupted());
    write_custom(cp.as_ref()).await;
}

fn blob(
    channel: &str,
    version: &str,
    prev: Option<&str>,
    kind: BlobKind,
    data: &str,
) -> ChannelBlob {
    ChannelBlob {
        channel: channel.into(),
        version: version.into(),
        prev_version: prev.map(String::from),
        kind,
        data: data.as_bytes().to_vec(),
    }
}

/// Checkpoints written straight to the checkpointer, with ids of the caller's own (text, and
/// an upper-case UUID that is not kit's form), a namespace, a blob no checkpoint owns and
/// pending writes.
async fn write_custom(cp: &dyn Checkpointer) {
    // `next` names the nodes of the body's tasks, as the executor writes them.
    let meta = |id: &str, parent: Option<&str>, step: i64, source, next: &[&str]| CheckpointMeta {
        id: id.into(),
        parent_id: parent.map(String::from),
        step,
        source,
        created_at: format!("2026-11-2{}T10:00:00.000Z", step + 2),
        next: next.iter().map(|n| n.to_string()).collect(),
        metadata: json!({"by": "hand", "step": step}),
    };
    // `into`: a map at schema 2's kit, shared (`Arc`) since.
    let versions = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(c, v)| (c.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into()
    };
    let upper = "01A1FE05-29DA-7000-800C-47C39201259F";
    let writes = [
        CheckpointWrite {
            thread_id: "custom".into(),
            ns: "".into(),
            meta: meta("c-1", None, -1, CheckpointSource::Input, &["a"]),
            channel_versions: versions(&[("n", "c-1"), ("log", "c-1")]),
            blobs: vec![
                blob("n", "c-1", None, BlobKind::Full, "1"),
                blob("log", "c-1", None, BlobKind::Full, r#"["one"]"#),
            ],
            body: br#"{"next":[{"node":"a"}]}"#.to_vec(),
            expected_head: None,
        },
        CheckpointWrite {
            thread_id: "custom".into(),
            ns: "".into(),
            meta: meta("c-2", Some("c-1"), 0, CheckpointSource::Loop, &["b"]),
            channel_versions: versions(&[("n", "c-1"), ("log", "o-1")]),
            blobs: vec![blob(
                "log",
                "o-1",
                Some("c-1"),
                BlobKind::Delta,
                r#"["two"]"#,
            )],
            body: br#"{"next":[{"node":"b","send":0,"arg":{"k":1}}]}"#.to_vec(),
            expected_head: Some("c-1".into()),
        },
        CheckpointWrite {
            thread_id: "custom".into(),
            ns: "".into(),
            meta: meta(upper, Some("c-2"), 1, CheckpointSource::Update, &[]),
            channel_versions: versions(&[("n", upper), ("log", upper)]),
            blobs: vec![
                blob("n", upper, None, BlobKind::Full, "3"),
                blob("log", upper, Some("o-1"), BlobKind::Delta, r#"["three"]"#),
            ],
            body: b"{}".to_vec(),
            expected_head: Some("c-2".into()),
        },
        CheckpointWrite {
            thread_id: "custom".into(),
            ns: "sub:1".into(),
            meta: meta("s-1", None, -1, CheckpointSource::Fork, &["a"]),
            channel_versions: versions(&[("n", "s-1")]),
            blobs: vec![blob("n", "s-1", None, BlobKind::Full, "7")],
            body: br#"{"next":[{"node":"a"}],"joins":[1]}"#.to_vec(),
            expected_head: None,
        },
    ];
    for write in writes {
        cp.put(write).await.expect("custom put");
    }
    cp.put_writes(
        "custom",
        "",
        "c-2",
        vec![PendingWrite {
            task_id: "t1".into(),
            channel: "__interrupt__".into(),
            value: json!([{"value": "why?"}]),
        }],
    )
    .await
    .expect("custom writes");
}

fn loaded(l: &LoadedCheckpoint) -> Value {
    // Long values as their length and hash: the same check, a smaller fixture.
    let text = |b: &[u8]| match b.len() {
        0..=200 => String::from_utf8_lossy(b).into_owned(),
        n => format!("{n} bytes, fnv1a {:016x}", kit::ids::fnv1a(b)),
    };
    json!({
        "meta": l.meta,
        "channel_versions": l.channel_versions,
        "channels": l.channels.iter().map(|c| json!({
            "name": c.name,
            "version": c.version,
            "full": c.full.as_deref().map(text),
            "deltas": c.deltas.iter().map(|d| text(d)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "body": text(&l.body),
        "pending_writes": l.pending_writes,
        "head": l.head,
    })
}

/// Everything a checkpointer reads back of the fixture's threads: each history, and each
/// checkpoint loaded.
pub async fn dump(cp: &dyn Checkpointer) -> Value {
    let mut out = serde_json::Map::new();
    for (thread, ns) in THREADS {
        let history = cp.history(thread, ns, None).await.expect("history");
        let mut loads = serde_json::Map::new();
        for meta in &history {
            let load = cp
                .load(thread, ns, Some(&meta.id))
                .await
                .expect("load")
                .expect("a checkpoint");
            loads.insert(meta.id.clone(), loaded(&load));
        }
        let head = cp
            .load(thread, ns, None)
            .await
            .expect("load head")
            .map(|l| loaded(&l));
        let limited: Vec<String> = cp
            .history(thread, ns, Some(2))
            .await
            .expect("history")
            .into_iter()
            .map(|m| m.id)
            .collect();
        out.insert(
            format!("{thread}|{ns}"),
            json!({"history": history, "history_2": limited, "loads": loads, "head": head}),
        );
    }
    out.insert(
        "threads".into(),
        serde_json::to_value(cp.threads().await.expect("threads")).expect("json"),
    );
    Value::Object(out)
}
