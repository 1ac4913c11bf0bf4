//! The human-in-the-loop flows LangGraph users rely on: edit the state at a breakpoint and go
//! on, resume with an update (`Command`), and a snapshot that tells the truth about a step that
//! stopped half-way.

use std::sync::{Arc, Mutex};

use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::{END, Graph, MemoryCheckpointer, Outcome, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Doc {
    text: String,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

/// draft -> review -> END; `review` records the text it saw.
fn pipeline(seen: &Arc<Mutex<Vec<String>>>, before: &[&str], after: &[&str]) -> Graph<Doc> {
    let seen = seen.clone();
    GraphBuilder::<Doc>::new("pipeline")
        .sync_node("draft", |_: &Doc, _: &NodeContext| {
            DocUpdate::new()
                .text("first draft")
                .log(vec!["draft".into()])
        })
        .node("review", move |d: Arc<Doc>, _| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(d.text.clone());
                DocUpdate::new().log(vec![format!("reviewed: {}", d.text)])
            }
        })
        .edge(START, "draft")
        .edge("draft", "review")
        .edge("review", END)
        .interrupt_before(before.iter().copied())
        .interrupt_after(after.iter().copied())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap()
}

#[tokio::test]
async fn update_state_at_a_breakpoint_then_one_continue_runs_the_paused_node_which_sees_the_edit() {
    for as_node in [Some("draft"), None] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let graph = pipeline(&seen, &["review"], &[]);
        let opts = RunOptions::new().thread_id("edit");
        let paused = graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
        assert!(paused.is_interrupted(), "pauses before review");
        assert_eq!(
            graph.get_state(&opts).await.unwrap().unwrap().next,
            ["review"]
        );

        graph
            .update_state(&opts, DocUpdate::new().text("edited by a human"), as_node)
            .await
            .unwrap();
        let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
        assert_eq!(
            snapshot.next,
            ["review"],
            "{as_node:?}: review is still due"
        );

        let done = graph.resume(Resume::Continue).options(&opts).await.unwrap();
        assert!(
            !done.is_interrupted(),
            "{as_node:?}: one continue runs review"
        );
        assert_eq!(*seen.lock().unwrap(), ["edited by a human"], "{as_node:?}");
        assert_eq!(
            done.state().log.last().map(String::as_str),
            Some("reviewed: edited by a human")
        );
    }
}

#[tokio::test]
async fn update_state_after_an_interrupt_after_is_seen_by_the_next_node() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let graph = pipeline(&seen, &[], &["draft"]);
    let opts = RunOptions::new().thread_id("after");
    let paused = graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    assert!(paused.is_interrupted(), "pauses after draft");
    assert_eq!(paused.state().text, "first draft");
    graph
        .update_state(&opts, DocUpdate::new().text("polished"), Some("draft"))
        .await
        .unwrap();
    let done = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(*seen.lock().unwrap(), ["polished"]);
}

/// `update_state` naming a node that does not exist, from an older checkpoint, fails without
/// writing anything: the thread's head stays where it was (it once forked the thread first).
#[tokio::test]
async fn update_state_with_an_unknown_node_leaves_the_thread_as_it_was() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let graph = pipeline(&seen, &[], &["draft"]);
    let opts = RunOptions::new().thread_id("typo");
    graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    let history = graph.state_history(&opts, None).await.unwrap();
    let head = history[0].checkpoint.id.clone();
    let older = history.last().unwrap().checkpoint.id.clone();
    assert_ne!(head, older);
    let at_older = opts.clone().checkpoint_id(older);
    let err = graph
        .update_state(&at_older, DocUpdate::new().text("x"), Some("drafft"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("drafft"), "{err}");
    let after = graph.state_history(&opts, None).await.unwrap();
    assert_eq!(after.len(), history.len(), "nothing was written");
    assert_eq!(after[0].checkpoint.id, head, "the head did not move");
}

#[tokio::test]
async fn going_on_after_an_interrupt_after_does_not_stop_again_before_the_next_node() {
    // LangGraph: nothing ran since the last pause, so the breakpoint before `review` does not
    // fire on the way on.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let graph = pipeline(&seen, &["review"], &["draft"]);
    let opts = RunOptions::new().thread_id("both");
    assert!(
        graph
            .invoke(DocUpdate::new())
            .options(&opts)
            .await
            .unwrap()
            .is_interrupted()
    );
    let done = graph.resume(Resume::Continue).options(&opts).await.unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(*seen.lock().unwrap(), ["first draft"]);
}

#[tokio::test]
async fn a_resume_with_an_update_at_a_breakpoint_is_seen_by_the_paused_node() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let graph = pipeline(&seen, &["review"], &[]);
    let opts = RunOptions::new().thread_id("command");
    assert!(
        graph
            .invoke(DocUpdate::new())
            .options(&opts)
            .await
            .unwrap()
            .is_interrupted()
    );
    let done = graph
        .resume_with(Resume::Continue, DocUpdate::new().text("from the command"))
        .options(&opts)
        .await
        .unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(*seen.lock().unwrap(), ["from the command"]);
    // The update was saved with the step: the thread holds it.
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.values.text, "from the command");
}

#[tokio::test]
async fn a_resume_with_an_update_answers_a_node_interrupt_and_the_node_sees_both() {
    let graph = GraphBuilder::<Doc>::new("ask")
        .sync_node(
            "ask",
            |d: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                let answer = ctx.interrupt(json!({"question": "ok?"}))?;
                Ok(DocUpdate::new().log(vec![format!("{} / {}", d.text, answer)]))
            },
        )
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("ask");
    assert!(
        graph
            .invoke(DocUpdate::new().text("before"))
            .options(&opts)
            .await
            .unwrap()
            .is_interrupted()
    );
    let done = graph
        .resume_with(Resume::value("yes"), DocUpdate::new().text("after"))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(done.state().log, ["after / \"yes\""]);
}

/// A pending interrupt write that does not read (a tampered store) is a clear error naming the
/// checkpoint and task, not an interrupt silently forgotten (the task would run again and
/// its answer vanish).
#[tokio::test]
async fn an_unreadable_pending_interrupt_is_an_error() {
    use kit::checkpoint::{Checkpointer, PendingWrite, pending};
    let checkpointer = Arc::new(MemoryCheckpointer::new());
    let graph = GraphBuilder::<Doc>::new("ask")
        .sync_node(
            "ask",
            |_: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                ctx.interrupt(json!({"question": "ok?"}))?;
                Ok(DocUpdate::new())
            },
        )
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(checkpointer.clone())
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("tampered");
    graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    let loaded = checkpointer
        .load("tampered", "", None)
        .await
        .unwrap()
        .unwrap();
    let task = loaded
        .pending_writes
        .iter()
        .find(|w| w.channel == pending::INTERRUPT)
        .map(|w| w.task_id.clone())
        .unwrap();
    checkpointer
        .put_writes(
            "tampered",
            "",
            &loaded.meta.id,
            vec![PendingWrite {
                task_id: task.clone(),
                channel: pending::INTERRUPT.to_string(),
                value: json!("not a list of interrupts"),
            }],
        )
        .await
        .unwrap();
    // Another graph on the store reads the thread from it.
    let reread = GraphBuilder::<Doc>::new("ask")
        .sync_node("ask", |_: &Doc, _: &NodeContext| DocUpdate::new())
        .edge(START, "ask")
        .edge("ask", END)
        .checkpointer(checkpointer)
        .compile()
        .unwrap();
    let err = reread
        .resume(Resume::value("yes"))
        .options(&opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not read"), "{err}");
    assert!(err.contains(&task), "{err}");
}

/// START -> ok and START -> other, in one step; `other` fails once or pauses.
fn siblings(other_pauses: bool) -> Graph<Doc> {
    GraphBuilder::<Doc>::new("siblings")
        .sync_node("ok", |_: &Doc, _: &NodeContext| {
            DocUpdate::new().log(vec!["ok".into()])
        })
        .sync_node(
            "other",
            move |_: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                if other_pauses {
                    ctx.interrupt(json!("approve?"))?;
                    return Ok(DocUpdate::new().log(vec!["other".into()]));
                }
                Err(NodeError::msg("the service is down"))
            },
        )
        .edge(START, "ok")
        .edge(START, "other")
        .edge("ok", END)
        .edge("other", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap()
}

#[tokio::test]
async fn after_a_sibling_failed_the_snapshot_lists_only_the_tasks_still_due_with_task_records() {
    let graph = siblings(false);
    let opts = RunOptions::new().thread_id("failed");
    assert!(graph.invoke(DocUpdate::new()).options(&opts).await.is_err());
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(
        snapshot.next,
        ["other"],
        "`ok` finished and will not run again"
    );
    assert_eq!(snapshot.tasks.len(), 2);
    let ok = snapshot.tasks.iter().find(|t| t.name == "ok").unwrap();
    assert!(ok.writes_saved);
    assert_eq!(ok.error, None);
    assert_eq!(
        ok.result.as_ref().unwrap()["updates"][0]["log"],
        json!(["ok"])
    );
    let other = snapshot.tasks.iter().find(|t| t.name == "other").unwrap();
    assert!(!other.writes_saved);
    assert_eq!(other.error.as_deref(), Some("the service is down"));
    assert!(other.interrupts.is_empty());
    assert_eq!(
        other.id, "0:other",
        "the id of the step the task belongs to"
    );
}

#[tokio::test]
async fn after_a_sibling_paused_the_snapshot_lists_only_the_paused_task_with_its_interrupt() {
    let graph = siblings(true);
    let opts = RunOptions::new().thread_id("paused");
    let out = graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    let Outcome::Interrupted(paused) = out else {
        panic!("expected a pause");
    };
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.next, ["other"]);
    let other = snapshot.tasks.iter().find(|t| t.name == "other").unwrap();
    assert_eq!(other.interrupts, paused.interrupts);
    assert!(!other.writes_saved);
    assert!(
        snapshot
            .tasks
            .iter()
            .find(|t| t.name == "ok")
            .unwrap()
            .writes_saved
    );
    // And it resumes into the paused task only.
    let done = graph
        .resume(Resume::value(true))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(done.state().log, ["ok", "other"]);
}

#[tokio::test]
async fn a_breakpoint_shows_as_the_paused_task_s_interrupt() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let graph = pipeline(&seen, &["review"], &[]);
    let opts = RunOptions::new().thread_id("bp");
    graph.invoke(DocUpdate::new()).options(&opts).await.unwrap();
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.tasks.len(), 1);
    assert_eq!(snapshot.tasks[0].name, "review");
    assert_eq!(snapshot.tasks[0].interrupts.len(), 1);
    assert_eq!(snapshot.tasks[0].interrupts[0].value["interrupt"], "before");
}

/// A fan-out of 30,000 branches that each pause: the snapshot lists every paused task with its
/// interrupt, an error names at most 20 of the pending ids, and one resume by ids answers them
/// all. Interrupts, resume ids and pending writes were each found by a search per task.
#[tokio::test]
async fn thirty_thousand_paused_branches_resume_by_ids_in_one_pass() {
    #[derive(Clone, Serialize, Deserialize)]
    struct Branch {
        i: usize,
    }
    let n = 30_000;
    let graph = GraphBuilder::<Doc>::new("many")
        .sync_node("fan", |_: &Doc, _: &NodeContext| DocUpdate::new())
        .sync_node(
            "ask",
            |_: &Doc, ctx: &NodeContext| -> Result<DocUpdate, NodeError> {
                let b: Branch = ctx.arg()?;
                let answer = ctx.interrupt(json!({"branch": b.i}))?;
                Ok(DocUpdate::new().log(vec![format!("{}={answer}", b.i)]))
            },
        )
        .route(START, ["fan"], |_: &Doc| kit::graph::Route::to("fan"))
        .route("fan", ["ask"], move |_: &Doc| {
            (0..n)
                .map(|i| kit::graph::Send::new("ask", Branch { i }))
                .collect::<Vec<_>>()
        })
        .edge("ask", END)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("many");
    let Outcome::Interrupted(paused) = graph.invoke(DocUpdate::new()).options(&opts).await.unwrap()
    else {
        panic!("expected a pause");
    };
    assert_eq!(paused.interrupts.len(), n);
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.tasks.len(), n);
    assert!(snapshot.tasks.iter().all(|t| t.interrupts.len() == 1));

    let err = graph
        .resume(Resume::value(true))
        .options(&opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("30000 interrupts are pending"), "{err}");
    assert!(
        err.contains("(30000 in all)") && err.len() < 4_000,
        "{}",
        err.len()
    );

    let answers = paused
        .interrupts
        .iter()
        .map(|i| (i.id.clone(), json!(i.value["branch"])))
        .collect();
    let done = graph
        .resume(Resume::ByIds(answers))
        .options(&opts)
        .await
        .unwrap();
    let mut log = done.state().log.clone();
    log.sort_by_key(|e| e.split('=').next().unwrap().parse::<usize>().unwrap());
    let expected: Vec<String> = (0..n).map(|i| format!("{i}={i}")).collect();
    assert_eq!(log, expected);
}
