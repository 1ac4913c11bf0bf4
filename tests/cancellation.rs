//! Cancellation that cancels: one token per run reaches nodes, subgraphs, tool calls, sync
//! subagents and HTTP requests; the run ends with exactly one `cancelled` event; the thread
//! resumes afterwards from its last checkpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::agent::Agent;
use kit::graph::{CancelToken, GraphBuilder, NodeContext, NodeError};
use kit::middleware::subagents::SubagentSpec;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{
    END, EventKind, GraphError, MemoryCheckpointer, Message, Resume, RunOptions, START, State,
    ToolCall,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncReadExt;

/// Sets its flag when dropped: proves a future was stopped, not left running.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Waits until `flag` is set (or gives up after a generous safety net).
async fn until(flag: &AtomicBool) {
    for _ in 0..500 {
        if flag.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the condition never came");
}

/// A tool that starts (says so) and then waits a very long time, unless it is told to finish.
fn slow_tool(
    started: &Arc<AtomicBool>,
    dropped: &Arc<AtomicBool>,
    quick: &Arc<AtomicBool>,
) -> Tool {
    let (started, dropped, quick) = (started.clone(), dropped.clone(), quick.clone());
    Tool::from_fn(
        "crunch",
        "Crunches numbers for a long time.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let (started, dropped, quick) = (started.clone(), dropped.clone(), quick.clone());
            async move {
                let _guard = DropFlag(dropped);
                started.store(true, Ordering::SeqCst);
                if !quick.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok::<_, ToolError>("crunched")
            }
        },
    )
}

fn calls_crunch() -> Message {
    Message::assistant_with_tool_calls("", vec![ToolCall::with_id("c1", "crunch", json!({}))])
}

#[tokio::test]
async fn cancelling_mid_tool_stops_the_tool_ends_with_one_cancelled_event_and_the_thread_resumes() {
    let (started, dropped, quick) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let model = ScriptedModel::new([calls_crunch(), Message::assistant("Done crunching.")]);
    let agent = Agent::builder()
        .model(model)
        .tool(slow_tool(&started, &dropped, &quick))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let token = CancelToken::new();
    let opts = RunOptions::new()
        .thread_id("cancel")
        .cancel_token(token.clone());
    let mut stream = agent.stream_events("Crunch.", &opts);
    let mut events = Vec::new();
    // Read until the tool has started, then cancel, then read to the end.
    while !started.load(Ordering::SeqCst) {
        match tokio::time::timeout(Duration::from_millis(10), stream.next()).await {
            Ok(Some(e)) => events.push(e),
            Ok(None) => panic!("the stream ended before the tool started"),
            Err(_) => {}
        }
    }
    token.cancel();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    until(&dropped).await;
    let cancelled: Vec<_> = events
        .iter()
        .filter(|e| e.kind() == EventKind::Cancelled)
        .collect();
    assert_eq!(cancelled.len(), 1, "exactly one cancelled event");
    assert_eq!(
        events.last().unwrap().kind(),
        EventKind::Cancelled,
        "and it is the last"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind(), EventKind::RunEnd | EventKind::Error))
    );
    assert!(
        !events.iter().any(|e| e.kind() == EventKind::ToolEnd),
        "the tool never finished"
    );

    // The thread is resumable from its last checkpoint: the tool runs again and finishes.
    quick.store(true, Ordering::SeqCst);
    let done = agent
        .resume(Resume::Continue)
        .thread_id("cancel")
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "Done crunching.");
}

#[tokio::test]
async fn cancelling_a_run_returns_cancelled_and_a_token_cancelled_before_start_stops_at_once() {
    let (started, dropped, quick) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let agent = Agent::builder()
        .model(ScriptedModel::new([calls_crunch()]))
        .tool(slow_tool(&started, &dropped, &quick))
        .build()
        .unwrap();
    let token = CancelToken::new();
    let run = {
        let token = token.clone();
        let agent = agent.clone();
        tokio::spawn(async move { agent.invoke("Crunch.").cancel_token(token).await })
    };
    until(&started).await;
    token.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    until(&dropped).await;

    let model = ScriptedModel::new([Message::assistant("never")]);
    let agent = Agent::builder().model(model.clone()).build().unwrap();
    let err = agent.invoke("Hi.").cancel_token(token).await.unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(model.calls(), 0, "nothing ran");
}

#[tokio::test]
async fn cancelling_mid_http_aborts_the_request() {
    // A server that accepts one request and never answers; it notices when the client hangs up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let (accepted, closed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    {
        let (accepted, closed) = (accepted.clone(), closed.clone());
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            accepted.store(true, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            // Read until the client closes its side.
            while let Ok(n) = socket.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
            closed.store(true, Ordering::SeqCst);
        });
    }
    let fetch = Tool::from_fn(
        "fetch",
        "Fetches a page.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let url = url.clone();
            async move {
                let http = kit::http::HttpClient::new();
                let response = http
                    .send(kit::http::HttpRequest::get(&url))
                    .await
                    .map_err(ToolError::new)?;
                Ok::<_, ToolError>(format!("status {}", response.status))
            }
        },
    );
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id("f1", "fetch", json!({}))],
        )]))
        .tool(fetch)
        .build()
        .unwrap();
    let token = CancelToken::new();
    let run = {
        let token = token.clone();
        tokio::spawn(async move { agent.invoke("Fetch.").cancel_token(token).await })
    };
    until(&accepted).await;
    token.cancel();
    assert!(run.await.unwrap().unwrap_err().is_cancelled());
    until(&closed).await;
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Loop {
    n: i64,
}

#[tokio::test]
async fn a_cancelled_subgraph_stops_looping() {
    let turns = Arc::new(AtomicUsize::new(0));
    let t = turns.clone();
    // A child graph that loops forever, a little at a time.
    let child = GraphBuilder::<Loop>::new("spinner")
        .node("spin", move |l: Arc<Loop>, _| {
            let t = t.clone();
            async move {
                t.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                LoopUpdate::new().n(l.n + 1)
            }
        })
        .edge(START, "spin")
        .route("spin", ["spin", END], |_: &Loop| "spin")
        .compile()
        .unwrap();
    let parent = GraphBuilder::<Loop>::new("parent")
        .subgraph(
            "child",
            child,
            |l: &Loop| LoopUpdate::new().n(l.n),
            |c: &Loop| LoopUpdate::new().n(c.n),
        )
        .edge(START, "child")
        .edge("child", END)
        .compile()
        .unwrap();
    let token = CancelToken::new();
    let opts = RunOptions::new()
        .recursion_limit(1_000_000)
        .cancel_token(token.clone());
    let events = {
        let stream = parent.stream_events(LoopUpdate::new(), &opts);
        let token = token.clone();
        let t = turns.clone();
        tokio::spawn(async move {
            while t.load(Ordering::SeqCst) < 5 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            token.cancel();
        });
        stream.collect::<Vec<_>>().await
    };
    let at_cancel = turns.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        turns.load(Ordering::SeqCst),
        at_cancel,
        "the subgraph stopped looping"
    );
    let cancelled = events
        .iter()
        .filter(|e| e.kind() == EventKind::Cancelled)
        .count();
    assert_eq!(cancelled, 1, "one cancelled event, not one per nested run");
}

#[tokio::test]
async fn cancelling_reaches_a_tool_inside_a_sync_subagent() {
    let (started, dropped, quick) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "t1",
                "task",
                json!({"subagent_type": "cruncher", "description": "Crunch."}),
            )],
        )]))
        .subagents([SubagentSpec::new("cruncher", "Crunches.")
            .model(ScriptedModel::new([calls_crunch()]))
            .tools([slow_tool(&started, &dropped, &quick)])])
        .build()
        .unwrap();
    let token = CancelToken::new();
    let run = {
        let token = token.clone();
        tokio::spawn(async move { agent.invoke("Go.").cancel_token(token).await })
    };
    until(&started).await;
    token.cancel();
    assert!(run.await.unwrap().unwrap_err().is_cancelled());
    until(&dropped).await;
}

#[tokio::test]
async fn a_node_can_watch_the_token_to_clean_up() {
    let cleaned = Arc::new(AtomicBool::new(false));
    let c = cleaned.clone();
    let graph = GraphBuilder::<Loop>::new("cleanup")
        .node("work", move |_: Arc<Loop>, ctx: NodeContext| {
            let c = c.clone();
            async move {
                let token = ctx
                    .cancel_token()
                    .cloned()
                    .ok_or_else(|| NodeError::msg("no token"))?;
                // Cleanup that must run even though the node's future is dropped on cancel:
                // it is handed to its own task, which waits for the token.
                tokio::spawn(async move {
                    token.cancelled().await;
                    c.store(true, Ordering::SeqCst);
                });
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, NodeError>(LoopUpdate::new())
            }
        })
        .edge(START, "work")
        .edge("work", END)
        .compile()
        .unwrap();
    let token = CancelToken::new();
    let run = {
        let token = token.clone();
        tokio::spawn(async move { graph.invoke(LoopUpdate::new()).cancel_token(token).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    token.cancel();
    assert!(matches!(run.await.unwrap(), Err(GraphError::Cancelled)));
    until(&cleaned).await;
}
