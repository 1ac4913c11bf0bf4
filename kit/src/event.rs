//! Streamed events: one envelope type for graphs, agents and subagents.
//!
//! `stream_events` on a [`Graph`](crate::Graph) or an [`Agent`](crate::Agent) yields [`Event`]s.
//! Every event serialises to JSON with the fields `event`, `name`, `run_id`, `parent_ids`,
//! `data` and `metadata` (`node`, `step`, `thread_id`, `namespace`, `tool_call_id`).
//!
//! # Catalog
//!
//! | `event` | `name` | `data` | when |
//! |---|---|---|---|
//! | `run_start` | graph or agent name | `{"input": update}` | the invocation begins |
//! | `node_start` | node name | `{"task_id"}` | a node (task) starts in a superstep |
//! | `node_end` | node name | `{"update": update}` (the per-node *updates* mode) | a node finished |
//! | `values` | graph name | the whole state | after each superstep, when asked for with [`RunOptions::stream_values`](crate::RunOptions::stream_values) |
//! | `custom` | the name the node chose | the node's payload | [`NodeContext::emit`](crate::graph::NodeContext::emit) |
//! | `checkpoint` | graph name | `{"checkpoint_id", "step"}` | a checkpoint became durable |
//! | `model_start` | model name | `{"provider", "messages", "tools"}` | an agent calls its model |
//! | `model_delta` | model name | `{"text"}` or `{"tool_call": {index, id, name, args}}` | a streamed token / tool-call chunk |
//! | `model_end` | model name | `{"message", "usage"}` | the model answered |
//! | `tool_start` | tool name | `{"args"}` | a tool call starts (`metadata.tool_call_id` set) |
//! | `tool_end` | tool name | `{"result", "status"}` | a tool call finished |
//! | `middleware` | `<middleware>.<hook>` | what the hook did | a middleware hook ran and changed something |
//! | `interrupt` | graph or agent name | `{"interrupts": [{id, value, node}]}` | the run paused for input |
//! | `error` | graph or agent name | `{"message", "kind"}` | the run failed |
//! | `run_end` | graph or agent name | `{"status": "done" \| "interrupted", "output"?}` | the invocation ended |
//!
//! Events from a subagent carry its path in `metadata.namespace` (for example
//! `["task:call_1"]`) and the parent's tool call id in `metadata.tool_call_id`, so every token can
//! be attributed to the agent that produced it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

/// The kind of an [`Event`]; serialised as the snake_case `event` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A graph or agent invocation began.
    RunStart,
    /// A node started.
    NodeStart,
    /// A node finished; `data.update` is what it wrote.
    NodeEnd,
    /// The whole state after a superstep.
    Values,
    /// A custom event written by a node.
    Custom,
    /// A checkpoint was written.
    Checkpoint,
    /// A model call began.
    ModelStart,
    /// A streamed chunk of a model answer.
    ModelDelta,
    /// A model call finished.
    ModelEnd,
    /// A tool call began.
    ToolStart,
    /// A tool call finished.
    ToolEnd,
    /// A middleware hook changed something.
    Middleware,
    /// The run paused on an interrupt.
    Interrupt,
    /// The run failed.
    Error,
    /// The invocation ended.
    RunEnd,
}

impl EventKind {
    /// The `event` string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStart => "run_start",
            EventKind::NodeStart => "node_start",
            EventKind::NodeEnd => "node_end",
            EventKind::Values => "values",
            EventKind::Custom => "custom",
            EventKind::Checkpoint => "checkpoint",
            EventKind::ModelStart => "model_start",
            EventKind::ModelDelta => "model_delta",
            EventKind::ModelEnd => "model_end",
            EventKind::ToolStart => "tool_start",
            EventKind::ToolEnd => "tool_end",
            EventKind::Middleware => "middleware",
            EventKind::Interrupt => "interrupt",
            EventKind::Error => "error",
            EventKind::RunEnd => "run_end",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an event comes from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventMetadata {
    /// The node that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The superstep number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The thread id of the run, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The path of subgraphs / subagents, outermost first; empty at the top level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace: Vec<String>,
    /// The tool call this event belongs to (tool events, and everything a subagent started by
    /// that call emits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// One streamed event. See the [module docs](self) for the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What happened.
    pub event: EventKind,
    /// The graph, node, model, tool or middleware it concerns.
    pub name: String,
    /// The id of the run (invocation, node task, model or tool call) it concerns.
    pub run_id: String,
    /// The ids of the enclosing runs, outermost first.
    pub parent_ids: Vec<String>,
    /// The payload.
    pub data: Value,
    /// Where it comes from.
    pub metadata: EventMetadata,
}

impl Event {
    /// The event as a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Rewrites events on their way to the consumer: drops, edits, holds back or adds events.
///
/// A middleware offers one with
/// [`Middleware::event_filter`](crate::agent::Middleware::event_filter); the agent puts it on
/// the sink of every run, so it also sees the events of subagents. The PII middleware uses one
/// to scrub streamed tokens, holding back a short lookback so a match split across two deltas
/// is still found. A filter keeps its own state behind a lock; it must not block.
///
/// ```
/// use kit::event::{Event, EventFilter, EventKind};
///
/// /// Hides the tokens of the model, keeps everything else.
/// struct NoTokens;
///
/// impl EventFilter for NoTokens {
///     fn filter(&self, event: Event, out: &mut Vec<Event>) {
///         if event.event != EventKind::ModelDelta {
///             out.push(event);
///         }
///     }
/// }
/// ```
pub trait EventFilter: Send + Sync + 'static {
    /// Sees one event (already stamped with namespace, thread and tool call id) and pushes what
    /// should reach the consumer, in order, to `out`.
    fn filter(&self, event: Event, out: &mut Vec<Event>);
}

/// Two filters, the first one's output fed to the second.
struct Chain(Arc<dyn EventFilter>, Arc<dyn EventFilter>);

impl EventFilter for Chain {
    fn filter(&self, event: Event, out: &mut Vec<Event>) {
        let mut first = Vec::new();
        self.0.filter(event, &mut first);
        for event in first {
            self.1.filter(event, out);
        }
    }
}

/// One filter applying `filters` in order; `None` when there are none.
pub(crate) fn chain(filters: Vec<Arc<dyn EventFilter>>) -> Option<Arc<dyn EventFilter>> {
    filters
        .into_iter()
        .rev()
        .reduce(|later, earlier| Arc::new(Chain(earlier, later)))
}

/// The sending side of an event stream, cheap to clone.
///
/// Carries the namespace and parent ids that every event sent through it gets, so nested runs
/// (nodes, tool calls, subagents) stamp their events without threading parameters.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Event>,
    namespace: Vec<String>,
    tool_call_id: Option<String>,
    thread_id: Option<String>,
    filter: Option<Arc<dyn EventFilter>>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("namespace", &self.namespace)
            .field("tool_call_id", &self.tool_call_id)
            .field("thread_id", &self.thread_id)
            .field("filtered", &self.filter.is_some())
            .finish()
    }
}

impl EventSink {
    /// A sink and the receiving end, with room for `capacity` events before the run waits for
    /// the consumer (back-pressure instead of unbounded memory).
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            EventSink {
                tx,
                namespace: Vec::new(),
                tool_call_id: None,
                thread_id: None,
                filter: None,
            },
            rx,
        )
    }

    /// A sink for a nested run: events get `segment` appended to their namespace and, when
    /// given, the tool call id.
    #[must_use]
    pub fn nested(&self, segment: impl Into<String>, tool_call_id: Option<String>) -> EventSink {
        let mut namespace = self.namespace.clone();
        namespace.push(segment.into());
        EventSink {
            tx: self.tx.clone(),
            namespace,
            tool_call_id: tool_call_id.or_else(|| self.tool_call_id.clone()),
            thread_id: self.thread_id.clone(),
            filter: self.filter.clone(),
        }
    }

    /// Passes every event sent through this sink (and the sinks nested in it) through `filter`
    /// first, then through the filters the sink already had.
    #[must_use]
    pub fn with_filter(mut self, filter: Arc<dyn EventFilter>) -> EventSink {
        self.filter = Some(match self.filter.take() {
            Some(outer) => Arc::new(Chain(filter, outer)),
            None => filter,
        });
        self
    }

    /// Sets the thread id stamped on events.
    #[must_use]
    pub fn with_thread_id(mut self, thread_id: Option<String>) -> EventSink {
        self.thread_id = thread_id;
        self
    }

    /// The namespace of this sink.
    pub fn namespace(&self) -> &[String] {
        &self.namespace
    }

    /// Sends an event, filling in the namespace, thread id and tool call id. A closed stream
    /// (the consumer went away) is ignored: the run goes on.
    pub async fn send(&self, mut event: Event) {
        self.stamp(&mut event);
        match &self.filter {
            None => {
                let _ = self.tx.send(event).await;
            }
            Some(filter) => {
                let mut out = Vec::new();
                filter.filter(event, &mut out);
                for event in out {
                    let _ = self.tx.send(event).await;
                }
            }
        }
    }

    /// Sends without waiting; drops the event if the consumer is `capacity` events behind.
    pub fn try_send(&self, mut event: Event) {
        self.stamp(&mut event);
        match &self.filter {
            None => {
                let _ = self.tx.try_send(event);
            }
            Some(filter) => {
                let mut out = Vec::new();
                filter.filter(event, &mut out);
                for event in out {
                    let _ = self.tx.try_send(event);
                }
            }
        }
    }

    fn stamp(&self, event: &mut Event) {
        if event.metadata.namespace.is_empty() && !self.namespace.is_empty() {
            event.metadata.namespace = self.namespace.clone();
        }
        if event.metadata.thread_id.is_none() {
            event.metadata.thread_id = self.thread_id.clone();
        }
        if event.metadata.tool_call_id.is_none() {
            event.metadata.tool_call_id = self.tool_call_id.clone();
        }
    }
}

/// A stream of events from a running graph or agent.
pub type EventStream = futures::stream::BoxStream<'static, Event>;

/// Turns the receiving end of a run's events into a stream that cancels the run when dropped.
pub(crate) fn stream_from(
    rx: mpsc::Receiver<Event>,
    run: tokio::task::JoinHandle<()>,
) -> EventStream {
    struct Guard(tokio::task::JoinHandle<()>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let guard = Guard(run);
    Box::pin(futures::stream::unfold(
        (rx, guard),
        |(mut rx, guard)| async move { rx.recv().await.map(|event| (event, (rx, guard))) },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_serialises_with_required_fields() {
        let e = Event {
            event: EventKind::NodeEnd,
            name: "n0".into(),
            run_id: "r".into(),
            parent_ids: vec!["root".into()],
            data: serde_json::json!({"update": {"counter": 1}}),
            metadata: EventMetadata {
                node: Some("n0".into()),
                step: Some(1),
                thread_id: Some("t".into()),
                ..Default::default()
            },
        };
        let json = e.to_json();
        for key in ["event", "name", "run_id", "parent_ids", "data", "metadata"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        assert_eq!(json["event"], "node_end");
        assert_eq!(json["metadata"]["step"], 1);
    }

    /// Appends its tag to the event's name.
    struct Tag(&'static str);

    impl EventFilter for Tag {
        fn filter(&self, mut event: Event, out: &mut Vec<Event>) {
            event.name.push_str(self.0);
            out.push(event);
        }
    }

    #[tokio::test]
    async fn filters_apply_inner_first_and_nested_sinks_keep_them() {
        let (sink, mut rx) = EventSink::channel(8);
        let outer = sink.with_filter(Arc::new(Tag("+outer")));
        let inner = outer
            .nested("task:1", None)
            .with_filter(chain(vec![Arc::new(Tag("+a")), Arc::new(Tag("+b"))]).unwrap());
        let event = Event {
            event: EventKind::Custom,
            name: "e".into(),
            run_id: "r".into(),
            parent_ids: Vec::new(),
            data: Value::Null,
            metadata: EventMetadata::default(),
        };
        inner.send(event.clone()).await;
        outer.send(event).await;
        let first = rx.recv().await.unwrap();
        assert_eq!(first.name, "e+a+b+outer");
        assert_eq!(first.metadata.namespace, ["task:1"]);
        assert_eq!(rx.recv().await.unwrap().name, "e+outer");
        assert!(chain(Vec::new()).is_none());
    }
}
