//! Stream modes (LangGraph's `stream_mode`): a stream carries the kinds its modes ask for and
//! the run's lifecycle, nothing else, and a run does not build what nobody asked for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kit::event::{EventSink, StreamMode};
use kit::graph::{GraphBuilder, NodeContext, NodeError, NodeOutput};
use kit::model::{ChatModel, ModelError, ModelRequest, ModelResponse, ModelStream};
use kit::testing::ScriptedModel;
use kit::tool::{ToolContext, ToolError, ToolHandler};
use kit::{Agent, END, EventKind, MemoryCheckpointer, Message, RunOptions, START, State, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct S {
    count: i64,
}

/// `a` emits a custom event, then `b` runs: two steps.
fn two_steps() -> kit::Graph<S> {
    GraphBuilder::<S>::new("two")
        .node("a", |s: Arc<S>, ctx: NodeContext| async move {
            ctx.emit("progress", json!({"half": true})).await;
            Ok::<_, NodeError>(NodeOutput::update(SUpdate::new().count(s.count + 1)))
        })
        .sync_node("b", |s: &S, _: &NodeContext| {
            SUpdate::new().count(s.count + 1)
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile()
        .unwrap()
}

async fn kinds_of(graph: &kit::Graph<S>, opts: &RunOptions) -> Vec<String> {
    graph
        .stream_events(SUpdate::new(), opts)
        .map(|e| match &e.metadata.node {
            Some(node) => format!("{}:{node}", e.kind()),
            None => e.kind().to_string(),
        })
        .collect()
        .await
}

#[tokio::test]
async fn without_a_mode_a_stream_carries_everything_but_values() {
    let kinds = kinds_of(&two_steps(), &RunOptions::new()).await;
    assert_eq!(
        kinds,
        [
            "run_start",
            "node_start:a",
            "custom:a",
            "node_end:a",
            "node_start:b",
            "node_end:b",
            "run_end"
        ]
    );
}

#[tokio::test]
async fn updates_carry_node_ends_and_the_lifecycle_only() {
    let opts = RunOptions::new().stream_mode([StreamMode::Updates]);
    let events: Vec<kit::Event> = two_steps()
        .stream_events(SUpdate::new(), &opts)
        .collect()
        .await;
    let kinds: Vec<EventKind> = events.iter().map(kit::Event::kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::RunStart,
            EventKind::NodeEnd,
            EventKind::NodeEnd,
            EventKind::RunEnd
        ]
    );
    assert_eq!(events[1].data.to_json()["update"]["count"], 1);
    assert_eq!(events[2].data.to_json()["update"]["count"], 2);
    assert_eq!(events[1].parent_ids, [events[0].run_id.clone()]);
    assert_ne!(
        events[1].run_id, events[2].run_id,
        "each task has its own run id"
    );
}

#[tokio::test]
async fn a_node_end_shares_its_run_id_with_its_node_start_and_custom_events() {
    let opts = RunOptions::new().stream_mode([StreamMode::Tasks, StreamMode::Custom]);
    let events: Vec<kit::Event> = two_steps()
        .stream_events(SUpdate::new(), &opts)
        .collect()
        .await;
    let of_a: Vec<&kit::Event> = events
        .iter()
        .filter(|e| e.metadata.node.as_deref() == Some("a"))
        .collect();
    assert_eq!(of_a.len(), 3, "node_start, custom, node_end");
    assert_eq!(of_a[0].run_id, of_a[2].run_id);
    assert_eq!(of_a[1].parent_ids.last(), Some(&of_a[0].run_id));
}

#[tokio::test]
async fn modes_combine_and_values_and_checkpoints_come_when_asked() {
    let graph = two_steps().with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new()
        .thread_id("t")
        .stream_mode([StreamMode::Values, StreamMode::Checkpoints]);
    let kinds = kinds_of(&graph, &opts).await;
    assert_eq!(
        kinds,
        [
            "run_start",
            "checkpoint",
            "checkpoint",
            "values",
            "checkpoint",
            "values",
            "run_end"
        ]
    );
    let opts = RunOptions::new()
        .thread_id("u")
        .stream_mode([StreamMode::Custom]);
    assert_eq!(
        kinds_of(&graph, &opts).await,
        ["run_start", "custom:a", "run_end"]
    );
}

/// A checkpointer whose writes finish only at their second poll, as a database's do.
struct Slow(MemoryCheckpointer);

#[kit::async_trait]
impl kit::checkpoint::Checkpointer for Slow {
    async fn put(
        &self,
        write: kit::checkpoint::CheckpointWrite,
    ) -> Result<(), kit::checkpoint::CheckpointError> {
        tokio::task::yield_now().await;
        self.0.put(write).await
    }
    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<kit::checkpoint::PendingWrite>,
    ) -> Result<(), kit::checkpoint::CheckpointError> {
        self.0
            .put_writes(thread_id, ns, checkpoint_id, writes)
            .await
    }
    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<kit::checkpoint::LoadedCheckpoint>, kit::checkpoint::CheckpointError> {
        self.0.load(thread_id, ns, checkpoint_id).await
    }
    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<kit::checkpoint::CheckpointMeta>, kit::checkpoint::CheckpointError> {
        self.0.history(thread_id, ns, limit).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<(), kit::checkpoint::CheckpointError> {
        self.0.delete_thread(thread_id).await
    }
    async fn prune(
        &self,
        thread_id: &str,
        strategy: kit::checkpoint::PruneStrategy,
    ) -> Result<kit::checkpoint::PruneReport, kit::checkpoint::CheckpointError> {
        self.0.prune(thread_id, strategy).await
    }
    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, kit::checkpoint::CheckpointError> {
        self.0.delete_threads_before(cutoff).await
    }
    async fn threads(
        &self,
    ) -> Result<Vec<kit::checkpoint::ThreadInfo>, kit::checkpoint::CheckpointError> {
        self.0.threads().await
    }
}

/// With async durability on a back-end whose writes take time, every checkpoint is still
/// reported once durable: one written while the next step ran was joined and then
/// forgotten, and only the last one was reported.
#[tokio::test]
async fn async_durability_reports_every_checkpoint() {
    let graph = two_steps().with_checkpointer(Arc::new(Slow(MemoryCheckpointer::new())));
    let opts = RunOptions::new()
        .thread_id("t")
        .durability(kit::graph::Durability::Async)
        .stream_mode([StreamMode::Checkpoints]);
    let reported: Vec<String> = graph
        .stream_events(SUpdate::new(), &opts)
        .filter(|e| std::future::ready(e.kind() == EventKind::Checkpoint))
        .map(|e| {
            e.data.to_json()["checkpoint_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
        .await;
    let mut written: Vec<String> = graph
        .state_history(&opts, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.checkpoint.id)
        .collect();
    written.reverse();
    assert_eq!(written.len(), 3);
    assert_eq!(reported, written);
}

#[tokio::test]
async fn debug_carries_every_kind_values_included() {
    let kinds = kinds_of(
        &two_steps(),
        &RunOptions::new().stream_mode([StreamMode::Debug]),
    )
    .await;
    assert_eq!(
        kinds,
        [
            "run_start",
            "node_start:a",
            "custom:a",
            "node_end:a",
            "values",
            "node_start:b",
            "node_end:b",
            "values",
            "run_end"
        ]
    );
}

#[tokio::test]
async fn stream_values_adds_values_to_a_mode_and_the_order_of_setters_does_not_matter() {
    let graph = two_steps();
    let a = RunOptions::new()
        .stream_mode([StreamMode::Updates])
        .stream_values(true);
    let expected = [
        "run_start",
        "node_end:a",
        "values",
        "node_end:b",
        "values",
        "run_end",
    ];
    assert_eq!(kinds_of(&graph, &a).await, expected);
    let b = RunOptions::new()
        .stream_values(true)
        .stream_mode([StreamMode::Updates]);
    assert_eq!(
        kinds_of(&graph, &b).await,
        expected,
        "values asked for first"
    );
    // A sink given before or after the mode carries what the mode asks for.
    for mode_first in [true, false] {
        let (sink, mut rx) = EventSink::channel(64);
        let opts = if mode_first {
            RunOptions::new()
                .stream_mode([StreamMode::Updates])
                .events(sink)
        } else {
            RunOptions::new()
                .events(sink)
                .stream_mode([StreamMode::Updates])
        };
        graph.invoke(SUpdate::new()).options(&opts).await.unwrap();
        drop(opts);
        let mut kinds = Vec::new();
        while let Some(e) = rx.recv().await {
            kinds.push(e.kind());
        }
        assert_eq!(
            kinds,
            [
                EventKind::RunStart,
                EventKind::NodeEnd,
                EventKind::NodeEnd,
                EventKind::RunEnd
            ],
            "mode first: {mode_first}"
        );
    }
}

#[tokio::test]
async fn errors_and_interrupts_come_whatever_the_mode() {
    let failing = GraphBuilder::<S>::new("failing")
        .node("boom", |_: Arc<S>, _| async {
            Err::<NodeOutput<S>, _>(NodeError::msg("no luck"))
        })
        .edge(START, "boom")
        .edge("boom", END)
        .compile()
        .unwrap();
    let opts = RunOptions::new().stream_mode([StreamMode::Values]);
    assert_eq!(kinds_of(&failing, &opts).await, ["run_start", "error"]);

    let asking = GraphBuilder::<S>::new("asking")
        .node("ask", |_: Arc<S>, ctx: NodeContext| async move {
            ctx.interrupt("ok?")?;
            Ok::<_, NodeError>(NodeOutput::new())
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new()
        .thread_id("t")
        .stream_mode([StreamMode::Checkpoints]);
    let kinds = kinds_of(&asking, &opts).await;
    assert_eq!(kinds.first().map(String::as_str), Some("run_start"));
    assert!(kinds.contains(&"interrupt".to_string()), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("run_end"));
    assert!(!kinds.iter().any(|k| k.starts_with("node_")), "{kinds:?}");
}

/// A run of nodes that never wait still lets a consumer on the same thread see its first
/// event long before the run ends.
#[test]
fn a_consumer_on_a_single_thread_sees_the_first_event_before_the_run_ends() {
    const NODES: usize = 500;
    let ran = Arc::new(AtomicUsize::new(0));
    let mut b = GraphBuilder::<S>::new("long");
    for i in 0..NODES {
        let ran = ran.clone();
        b = b.sync_node(format!("n{i}"), move |s: &S, _: &NodeContext| {
            ran.fetch_add(1, Ordering::SeqCst);
            SUpdate::new().count(s.count + 1)
        });
    }
    b = b.edge(START, "n0");
    for i in 1..NODES {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    let graph = b.edge(format!("n{}", NODES - 1), END).compile().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let opts = RunOptions::new()
            .recursion_limit(NODES + 1)
            .stream_mode([StreamMode::Updates]);
        let mut stream = graph.stream_events(SUpdate::new(), &opts);
        let mut ran_at_first = None;
        let mut ends = 0;
        while let Some(e) = stream.next().await {
            if e.kind() == EventKind::NodeEnd {
                ends += 1;
                ran_at_first.get_or_insert(ran.load(Ordering::SeqCst));
            }
        }
        assert_eq!(ends, NODES);
        let ran_at_first = ran_at_first.unwrap();
        assert!(
            ran_at_first < NODES / 16,
            "the consumer saw its first event only after {ran_at_first} of {NODES} nodes ran"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Agents

/// Adds two integers.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

impl ToolHandler for Add {
    type Output = i64;
    async fn run(self, _ctx: ToolContext) -> Result<i64, ToolError> {
        Ok(self.a + self.b)
    }
}

/// Counts how the agent calls its model: streamed or not.
struct Counting {
    inner: ScriptedModel,
    streamed: Arc<AtomicUsize>,
    generated: Arc<AtomicUsize>,
}

#[kit::async_trait]
impl ChatModel for Counting {
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.generated.fetch_add(1, Ordering::SeqCst);
        self.inner.generate(request).await
    }
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        self.streamed.fetch_add(1, Ordering::SeqCst);
        self.inner.stream(request).await
    }
}

fn calculator() -> (Agent, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let streamed = Arc::new(AtomicUsize::new(0));
    let generated = Arc::new(AtomicUsize::new(0));
    let model = Counting {
        inner: ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "Let me add.",
                vec![ToolCall::with_id("c1", "add", json!({"a": 20, "b": 22}))],
            ),
            Message::assistant("The answer is 42"),
        ]),
        streamed: streamed.clone(),
        generated: generated.clone(),
    };
    let agent = Agent::builder()
        .name("calc")
        .model(model)
        .tool(Add::tool())
        .build()
        .unwrap();
    (agent, streamed, generated)
}

#[tokio::test]
async fn an_agent_streaming_updates_calls_its_model_without_streaming_tokens() {
    let (agent, streamed, generated) = calculator();
    let opts = RunOptions::new().stream_mode([StreamMode::Updates]);
    let events: Vec<kit::Event> = agent.stream_events("20+22?", &opts).collect().await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| format!("{}:{}", e.kind(), e.name))
        .collect();
    assert_eq!(
        kinds,
        [
            "run_start:calc",
            "node_end:model",
            "node_end:tools",
            "node_end:model",
            "run_end:calc"
        ]
    );
    assert_eq!(
        events[4].data.to_json()["output"]["messages"][3]["content"],
        "The answer is 42"
    );
    assert_eq!(streamed.load(Ordering::SeqCst), 0);
    assert_eq!(generated.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_agent_streaming_messages_streams_tokens_and_tool_calls_without_node_events() {
    let (agent, streamed, _) = calculator();
    let opts = RunOptions::new().stream_mode([StreamMode::Messages]);
    let events: Vec<kit::Event> = agent.stream_events("20+22?", &opts).collect().await;
    assert!(
        events
            .iter()
            .all(|e| !matches!(e.kind(), EventKind::NodeStart | EventKind::NodeEnd)),
        "no node events in messages mode"
    );
    let text: String = events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .filter_map(|e| e.data.to_json()["text"].as_str().map(String::from))
        .collect();
    assert_eq!(text, "Let me add.The answer is 42");
    let tools: Vec<EventKind> = events
        .iter()
        .map(kit::Event::kind)
        .filter(|k| matches!(k, EventKind::ToolStart | EventKind::ToolEnd))
        .collect();
    assert_eq!(tools, [EventKind::ToolStart, EventKind::ToolEnd]);
    assert_eq!(streamed.load(Ordering::SeqCst), 2);
    assert_eq!(events.last().map(kit::Event::kind), Some(EventKind::RunEnd));
}
