//! What a worker writes to a thread's event log while a run executes: kit's [`Event`]s turned
//! into the Agent Protocol's streaming events, written in batches by a task of their own, and
//! the run's last events (values, interrupts, lifecycle end) written with its end.
//!
//! | kit event | protocol method | `data` |
//! |---|---|---|
//! | (the run starts) | `lifecycle` | `{"event": "running"}` |
//! | `node_end` | `updates` | `{"node", "values": update}` |
//! | `model_start`, `model_delta` (text), `model_end` | `messages` | `message-start`, `content-block-start` / `-delta` / `-finish`, `message-finish`; the deltas of one call that share a write are one `content-block-delta` |
//! | `tool_start`, `tool_end` | `tools` | `tool-started`, `tool-finished` or `tool-error` |
//! | `custom` | `custom` | `{"name", "payload"}` |
//! | `checkpoint` | `checkpoints` | `{"id", "step", "source": "loop"}` |
//! | `run_start` / `run_end` of a subgraph or subagent | `lifecycle` | `started`, `completed`, `interrupted` (in its namespace) |
//! | (the run ends) | `values`, then `input.requested` per interrupt, then `lifecycle` | the final state; `{"interruptId", "payload"}`; `completed`, `interrupted` or `failed` (with `error`, and `cancelled: true` for a cancel) |

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::store::{NewEvent, RunStatus, RunStore};
use crate::event::{Event, EventData, ModelDelta, RunEndStatus};

/// Events a run may have queued for the writer before the run waits (back-pressure, bounded
/// memory).
pub(crate) const QUEUE: usize = 256;

/// Events written in one append, at most.
const BATCH: usize = 64;

/// The first event of a run.
pub(crate) fn running() -> NewEvent {
    NewEvent::new("lifecycle", json!({"event": "running"}))
}

/// The last events of a run that ended with `status`, `output` (`{"values", "interrupts"}`)
/// and `error`.
pub(crate) fn ending(
    status: RunStatus,
    output: Option<&Value>,
    error: Option<&str>,
) -> Vec<NewEvent> {
    let mut out = Vec::new();
    if let Some(values) = output.and_then(|o| o.get("values")) {
        out.push(NewEvent::new("values", values.clone()));
    }
    if let Some(list) = output
        .and_then(|o| o.get("interrupts"))
        .and_then(Value::as_array)
    {
        for interrupt in list {
            out.push(NewEvent::new(
                "input.requested",
                json!({
                    "interruptId": interrupt.get("id").cloned().unwrap_or(Value::Null),
                    "payload": interrupt.get("value").cloned().unwrap_or(Value::Null),
                    "node": interrupt.get("node").cloned().unwrap_or(Value::Null),
                }),
            ));
        }
    }
    let lifecycle = match status {
        RunStatus::Success => json!({"event": "completed"}),
        RunStatus::Interrupted => json!({"event": "interrupted"}),
        RunStatus::Cancelled => {
            json!({"event": "failed", "error": "the run was cancelled", "cancelled": true})
        }
        RunStatus::Error | RunStatus::Timeout => json!({
            "event": "failed",
            "error": error.unwrap_or("the run failed"),
            "timeout": status == RunStatus::Timeout,
        }),
        // Not an end: nothing to say.
        RunStatus::Pending | RunStatus::Running => return out,
    };
    out.push(NewEvent::new("lifecycle", lifecycle));
    out
}

/// Turns kit events into protocol events; keeps what the `messages` lifecycle needs (which
/// model calls opened a text block).
#[derive(Default)]
struct Mapper {
    /// Model calls (by [`call_key`]) whose text block is open.
    open_text: HashMap<String, bool>,
    /// The model call whose text delta is the last event of the batch being built: its next
    /// delta extends that event instead of adding one. A batch waits up to the linger anyway,
    /// so a reader sees the same text at the same time, in one event per batch instead of one
    /// per token.
    last_delta: Option<String>,
}

impl Mapper {
    fn map(&mut self, event: Event, out: &mut Vec<NewEvent>) {
        if let EventData::ModelDelta(ModelDelta::Text { text }) = &event.data
            && self.last_delta.as_deref() == Some(call_key(&event.parent_ids, &event.run_id))
            && let Some(Value::String(so_far)) = out
                .last_mut()
                .and_then(|last| last.data.pointer_mut("/delta/text"))
        {
            so_far.push_str(text);
            return;
        }
        let before = out.len();
        let mut delta_of = None;
        self.map_one(event, out, &mut delta_of);
        if out.len() != before {
            self.last_delta = delta_of;
        }
    }

    /// The batch was written: the next delta starts an event of its own.
    fn batch_written(&mut self) {
        self.last_delta = None;
    }

    /// Maps one event; `delta_of` is set to the model call when it pushed a text delta.
    fn map_one(&mut self, event: Event, out: &mut Vec<NewEvent>, delta_of: &mut Option<String>) {
        let namespace = event.metadata.namespace.clone();
        let call = call_key(&event.parent_ids, &event.run_id);
        let node = event.metadata.node.clone();
        let mut push = |method: &str, data: Value| {
            out.push(NewEvent {
                method: method.to_string(),
                namespace: namespace.clone(),
                data,
            });
        };
        match event.data {
            EventData::NodeEnd { update, .. } => {
                push(
                    "updates",
                    json!({"node": event.name, "values": update.into_value()}),
                );
            }
            EventData::Custom(payload) => {
                push("custom", json!({"name": event.name, "payload": payload}));
            }
            EventData::Checkpoint {
                checkpoint_id,
                step,
            } => push(
                "checkpoints",
                json!({"id": checkpoint_id, "step": step, "source": "loop"}),
            ),
            EventData::ModelStart { .. } => {
                self.open_text.insert(call.to_string(), false);
                push(
                    "messages",
                    json!({"event": "message-start", "role": "ai", "id": call}),
                );
            }
            EventData::ModelDelta(ModelDelta::Text { text }) => {
                let open = self.open_text.entry(call.to_string()).or_insert(false);
                if !*open {
                    *open = true;
                    push(
                        "messages",
                        json!({"event": "content-block-start", "index": 0,
                               "content": {"type": "text", "text": ""}}),
                    );
                }
                push(
                    "messages",
                    json!({"event": "content-block-delta", "index": 0,
                           "delta": {"type": "text-delta", "text": text}}),
                );
                *delta_of = Some(call.to_string());
            }
            EventData::ModelEnd { message, usage } => {
                let streamed = self.open_text.remove(call).unwrap_or(false);
                let text = message.text();
                let mut index = 0;
                if streamed || !text.is_empty() {
                    if !streamed {
                        push(
                            "messages",
                            json!({"event": "content-block-start", "index": 0,
                                   "content": {"type": "text", "text": ""}}),
                        );
                    }
                    push(
                        "messages",
                        json!({"event": "content-block-finish", "index": 0,
                               "content": {"type": "text", "text": text}}),
                    );
                    index = 1;
                }
                for call in &message.tool_calls {
                    let block = json!({"type": "tool_call", "id": call.id, "name": call.name,
                                       "args": call.args});
                    push(
                        "messages",
                        json!({"event": "content-block-start", "index": index,
                               "content": {"type": "tool_call_chunk", "id": call.id,
                                           "name": call.name}}),
                    );
                    push(
                        "messages",
                        json!({"event": "content-block-finish", "index": index, "content": block}),
                    );
                    index += 1;
                }
                let mut finish = json!({"event": "message-finish", "id": call});
                if let Some(usage) = usage {
                    finish["usage"] = json!({"inputTokens": usage.input_tokens,
                                             "outputTokens": usage.output_tokens});
                }
                push("messages", finish);
            }
            EventData::ToolStart { args, tool_call_id } => push(
                "tools",
                json!({"event": "tool-started", "toolCallId": tool_call_id,
                       "toolName": event.name, "input": args, "node": node}),
            ),
            EventData::ToolEnd {
                result,
                status,
                tool_call_id,
            } => {
                if status == Some(crate::message::ToolStatus::Error) {
                    push(
                        "tools",
                        json!({"event": "tool-error", "toolCallId": tool_call_id,
                               "message": result.text()}),
                    );
                } else {
                    let output = serde_json::to_value(&result).unwrap_or(Value::Null);
                    push(
                        "tools",
                        json!({"event": "tool-finished", "toolCallId": tool_call_id,
                               "output": output}),
                    );
                }
            }
            // Subgraphs and subagents: their own lifecycle, in their namespace. The root's is
            // the worker's (it knows about cancels, timeouts and crashes).
            EventData::RunStart { .. } if !namespace.is_empty() => {
                push(
                    "lifecycle",
                    json!({"event": "started", "graphName": event.name}),
                );
            }
            EventData::RunEnd { status, .. } if !namespace.is_empty() => {
                let status = match status {
                    RunEndStatus::Done => "completed",
                    RunEndStatus::Interrupted => "interrupted",
                };
                push(
                    "lifecycle",
                    json!({"event": status, "graphName": event.name}),
                );
            }
            EventData::Error { message, .. } if !namespace.is_empty() => {
                push(
                    "lifecycle",
                    json!({"event": "failed", "graphName": event.name, "error": message}),
                );
            }
            _ => {}
        }
    }
}

/// What ties the events of one model call together: the node task that made it (its last
/// parent). A task calls its model once at a time, so its start, deltas and end follow each
/// other, while each of those events has a run id of its own.
fn call_key<'a>(parent_ids: &'a [String], run_id: &'a str) -> &'a str {
    parent_ids.last().map_or(run_id, String::as_str)
}

/// How long an event may wait in the writer for others to share its write, by default
/// ([`WorkerBuilder::event_linger`](super::WorkerBuilder::event_linger)). A run that ends
/// sooner writes all its events with its end, in one transaction; a longer one writes at most
/// one batch per linger while it runs (what a stream sees live lags by at most this).
pub(crate) const LINGER: Duration = Duration::from_millis(20);

/// Writes the events of run `run_id` arriving on `rx` to the log of `thread_id`, starting
/// with `first`: a batch once its oldest event has waited `linger` (or once it holds
/// [`BATCH`]), until every sender is gone. Returns what it had not written yet: the run's end
/// writes those with its own last events, in its transaction. A store failure is logged and
/// the batch dropped (a stream reader then sees fewer events; the run itself is never failed
/// by its log).
pub(crate) fn spawn_writer(
    store: Arc<dyn RunStore>,
    thread_id: String,
    run_id: String,
    first: Vec<NewEvent>,
    linger: Duration,
    mut rx: mpsc::Receiver<Event>,
) -> JoinHandle<Vec<NewEvent>> {
    tokio::spawn(async move {
        let mut mapper = Mapper::default();
        let mut batch = first;
        let mut due = (!batch.is_empty()).then(|| crate::deadline::tokio_from_now(linger));
        loop {
            let next = match due {
                Some(at) => tokio::select! {
                    biased;
                    event = rx.recv() => Some(event),
                    _ = tokio::time::sleep_until(at) => None,
                },
                None => Some(rx.recv().await),
            };
            match next {
                // Every sender is gone: the run has ended, its end writes the rest.
                Some(None) => return batch,
                Some(Some(event)) => {
                    mapper.map(event, &mut batch);
                    if due.is_none() && !batch.is_empty() {
                        due = Some(crate::deadline::tokio_from_now(linger));
                    }
                    if batch.len() < BATCH {
                        continue;
                    }
                }
                // The oldest event waited long enough.
                None => {}
            }
            due = None;
            mapper.batch_written();
            let written = append_retrying(&*store, &thread_id, &run_id, &batch).await;
            // Emptied, not replaced: the next batch reuses its room.
            batch.clear();
            if let Err(e) = written {
                tracing::error!(%thread_id, %run_id, error = %e, "could not write a run's events to the thread's log; they are lost to stream readers");
            }
        }
    })
}

/// Appends, retrying a failed append twice.
pub(crate) async fn append_retrying(
    store: &dyn RunStore,
    thread_id: &str,
    run_id: &str,
    events: &[NewEvent],
) -> Result<u64, super::store::StoreError> {
    let mut delay = Duration::from_millis(50);
    let mut attempt = 0;
    loop {
        match store.append_events(thread_id, run_id, events).await {
            Ok(seq) => return Ok(seq),
            Err(e) if attempt >= 2 => return Err(e),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::Message;

    /// An event as a node task emits it: a run id of its own (as `NodeContext::event` gives
    /// every event), the invocation and the task `task` as its parents.
    fn event(data: EventData, name: &str, task: &str) -> Event {
        let mut event = Event::new(data, name, crate::ids::random());
        event.parent_ids = vec!["invocation".into(), task.into()];
        event
    }

    #[test]
    fn a_model_call_becomes_a_whole_message_lifecycle() {
        let mut m = Mapper::default();
        let mut out = Vec::new();
        m.map(
            event(
                EventData::ModelStart {
                    provider: "p".into(),
                    model: "m".into(),
                    messages: 1,
                    tools: vec![],
                },
                "m",
                "call-1",
            ),
            &mut out,
        );
        for piece in ["Hel", "lo"] {
            m.map(
                event(
                    EventData::ModelDelta(ModelDelta::Text { text: piece.into() }),
                    "m",
                    "call-1",
                ),
                &mut out,
            );
        }
        m.map(
            event(
                EventData::ModelEnd {
                    message: Box::new(Message::assistant("Hello")),
                    usage: None,
                },
                "m",
                "call-1",
            ),
            &mut out,
        );
        let kinds: Vec<&str> = out
            .iter()
            .map(|e| e.data["event"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "message-start",
                "content-block-start",
                "content-block-delta",
                "content-block-finish",
                "message-finish"
            ]
        );
        assert_eq!(out[2].data["delta"]["text"], "Hello");
        assert_eq!(out[3].data["content"]["text"], "Hello");
        assert_eq!(out[0].data["id"], out[4].data["id"], "one message, one id");
        assert!(m.open_text.is_empty(), "nothing kept after the call");
    }

    fn delta(text: &str, run: &str) -> Event {
        event(
            EventData::ModelDelta(ModelDelta::Text { text: text.into() }),
            "m",
            run,
        )
    }

    fn texts(out: &[NewEvent]) -> Vec<String> {
        out.iter()
            .filter(|e| e.data["event"] == "content-block-delta")
            .map(|e| e.data["delta"]["text"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn the_deltas_of_a_model_call_in_one_batch_share_one_event() {
        let mut m = Mapper::default();
        let mut out = Vec::new();
        for piece in ["Hel", "lo", ", ", "world"] {
            m.map(delta(piece, "call-1"), &mut out);
        }
        assert_eq!(out.len(), 2, "content-block-start and one delta");
        assert_eq!(texts(&out), ["Hello, world"]);
        // A node starting in between pushes nothing and changes nothing.
        m.map(
            event(
                EventData::NodeStart {
                    task_id: "1:x".into(),
                },
                "x",
                "t",
            ),
            &mut out,
        );
        m.map(delta("!", "call-1"), &mut out);
        assert_eq!(texts(&out), ["Hello, world!"]);
    }

    #[test]
    fn deltas_are_not_merged_across_a_write_another_call_or_another_event() {
        let mut m = Mapper::default();
        let mut out = Vec::new();
        m.map(delta("a", "call-1"), &mut out);
        m.batch_written();
        let mut next = Vec::new();
        m.map(delta("b", "call-1"), &mut next);
        assert_eq!(texts(&next), ["b"], "a new batch starts a new event");
        // Another model call (a subagent's, say) interleaved.
        m.map(delta("x", "call-2"), &mut next);
        m.map(delta("c", "call-1"), &mut next);
        assert_eq!(texts(&next), ["b", "x", "c"]);
        // Any event written between two deltas keeps them apart.
        m.map(
            event(EventData::Custom(json!({"n": 1})), "progress", "t"),
            &mut next,
        );
        m.map(delta("d", "call-1"), &mut next);
        assert_eq!(texts(&next), ["b", "x", "c", "d"]);
        let order: Vec<&str> = next.iter().map(|e| e.method.as_str()).collect();
        assert_eq!(order.last(), Some(&"messages"));
        assert_eq!(order[order.len() - 2], "custom");
    }

    #[test]
    fn merging_is_linear_in_the_text_1_kib_and_1_mib() {
        for total in [1usize << 10, 1 << 20] {
            let mut m = Mapper::default();
            let mut out = Vec::new();
            let piece = "x".repeat(64);
            for _ in 0..total / 64 {
                m.map(delta(&piece, "call-1"), &mut out);
            }
            assert_eq!(out.len(), 2);
            assert_eq!(texts(&out)[0].len(), total);
        }
    }

    #[test]
    fn an_interrupted_run_ends_with_its_values_its_requests_and_its_lifecycle() {
        let output = json!({"values": {"n": 1},
                            "interrupts": [{"id": "i1", "value": "approve?", "node": "gate"}]});
        let events = ending(RunStatus::Interrupted, Some(&output), None);
        let methods: Vec<&str> = events.iter().map(|e| e.method.as_str()).collect();
        assert_eq!(methods, ["values", "input.requested", "lifecycle"]);
        assert_eq!(events[1].data["interruptId"], "i1");
        assert_eq!(events[2].data["event"], "interrupted");
        let failed = ending(RunStatus::Timeout, None, Some("too slow"));
        assert_eq!(failed[0].data["event"], "failed");
        assert_eq!(failed[0].data["error"], "too slow");
        assert!(ending(RunStatus::Running, None, None).is_empty());
    }
}
