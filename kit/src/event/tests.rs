//! Unit tests of events, sinks and filters.

use std::sync::Arc;

use serde_json::json;

use super::*;

#[test]
fn envelope_serialises_with_required_fields() {
    let e = Event {
        data: EventData::NodeEnd {
            cached: false,
            update: serde_json::json!({"counter": 1}).into(),
        },
        name: "n0".into(),
        run_id: "r".into(),
        parent_ids: vec!["root".into()],
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
        data: EventData::Custom(Value::Null),
        name: "e".into(),
        run_id: "r".into(),
        parent_ids: Vec::new(),
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

/// One payload of every kind, with every optional field present.
/// Turns each event into two.
struct Twice;

impl EventFilter for Twice {
    fn filter(&self, event: Event, out: &mut Vec<Event>) {
        let mut copy = event.clone();
        copy.name.push('\'');
        out.push(event);
        out.push(copy);
    }
}

fn node_end() -> Event {
    let data = EventData::NodeEnd {
        update: LazyJson::null(),
        cached: false,
    };
    Event::new(data, "n", "r")
}

fn custom(name: &str) -> Event {
    Event::new(EventData::Custom(Value::Null), name, "r")
}

#[tokio::test]
async fn a_full_channel_makes_send_wait_and_loses_or_reorders_nothing() {
    for filtered in [false, true] {
        let (sink, mut rx) = EventSink::channel(2);
        let sink = if filtered {
            sink.with_filter(Arc::new(Twice))
        } else {
            sink
        };
        let names: Vec<String> = (0..50).map(|i| format!("e{i}")).collect();
        let producer = {
            let names = names.clone();
            tokio::spawn(async move {
                for name in &names {
                    sink.send(custom(name)).await;
                }
            })
        };
        let mut seen = Vec::new();
        while let Some(event) = rx.recv().await {
            seen.push(event.name);
        }
        producer.await.unwrap();
        let expected: Vec<String> = if filtered {
            names
                .iter()
                .flat_map(|n| [n.clone(), format!("{n}'")])
                .collect()
        } else {
            names
        };
        assert_eq!(seen, expected, "filtered: {filtered}");
    }
}

#[tokio::test]
async fn send_queues_at_once_when_there_is_room_and_drops_what_the_mode_leaves_out() {
    let (sink, mut rx) = EventSink::channel(4);
    // Not awaited: the event is queued by the call itself.
    let sent = sink.send(custom("now"));
    assert_eq!(rx.try_recv().unwrap().name, "now");
    sent.await;
    let updates = sink
        .clone()
        .with_kinds(EventKinds::of_modes([StreamMode::Updates]));
    updates.send(custom("left out")).await;
    updates.try_send(custom("left out too"));
    updates.send(node_end()).await;
    assert_eq!(rx.try_recv().unwrap().kind(), EventKind::NodeEnd);
    assert!(rx.try_recv().is_err(), "nothing else was queued");
    // What a filter adds is held to the stream's kinds too.
    struct Report;
    impl EventFilter for Report {
        fn filter(&self, event: Event, out: &mut Vec<Event>) {
            out.push(Event::new(
                EventData::Middleware(Value::Null),
                "report",
                "r",
            ));
            out.push(event);
        }
    }
    let reporting = updates.clone().with_filter(Arc::new(Report));
    reporting.send(node_end()).await;
    assert_eq!(rx.try_recv().unwrap().kind(), EventKind::NodeEnd);
    assert!(
        rx.try_recv().is_err(),
        "the filter's report is not an update"
    );
    drop(reporting);
    // A sink nobody narrowed carries every kind, values included.
    sink.send(Event::new(EventData::Values(Value::Null), "g", "r"))
        .await;
    assert_eq!(rx.try_recv().unwrap().kind(), EventKind::Values);
    drop(updates);
    // A closed stream is ignored.
    drop(rx);
    sink.send(custom("nobody listens")).await;
}

fn one_of_each() -> Vec<EventData> {
    use crate::message::{Content, Message, ToolStatus, Usage};
    vec![
        EventData::RunStart {
            input: Some(json!({"n": 1})),
            resume: false,
        },
        EventData::RunStart {
            input: None,
            resume: true,
        },
        EventData::NodeStart {
            task_id: "t1".into(),
        },
        EventData::NodeEnd {
            update: json!({"n": 2}).into(),
            cached: true,
        },
        EventData::NodeRetry {
            task_id: "t1".into(),
            attempt: 2,
            error: "503".into(),
            delay_ms: 500,
        },
        EventData::Values(json!({"n": 2})),
        EventData::Custom(json!({"progress": 0.5})),
        EventData::Checkpoint {
            checkpoint_id: "c1".into(),
            step: 3,
        },
        EventData::ModelStart {
            provider: "openai".into(),
            model: "gpt".into(),
            messages: 2,
            tools: vec!["add".into()],
        },
        EventData::text("Hel"),
        EventData::ModelDelta(ModelDelta::ToolCall {
            tool_call: ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("add".into()),
                args: "{\"a\"".into(),
            },
        }),
        EventData::ModelEnd {
            message: Box::new(Message::assistant("Hello")),
            usage: Some(Usage::default()),
        },
        EventData::ToolStart {
            args: json!({"a": 1}),
            tool_call_id: "c1".into(),
        },
        EventData::ToolEnd {
            result: Content::Text("2".into()),
            status: Some(ToolStatus::Success),
            tool_call_id: "c1".into(),
        },
        EventData::Middleware(
            json!({"middleware": "M", "hook": "before_model", "update": {}, "jump_to": null}),
        ),
        EventData::Interrupt {
            interrupts: json!([{"id": "i1", "value": "ok?", "node": "review"}]),
        },
        EventData::Error {
            message: "boom".into(),
            kind: "node_failed".into(),
        },
        EventData::Cancelled {
            reason: "the run was cancelled".into(),
        },
        EventData::RunEnd {
            status: RunEndStatus::Done,
            output: Some(json!({"n": 2})),
            interrupts: None,
        },
        EventData::RunEnd {
            status: RunEndStatus::Interrupted,
            output: None,
            interrupts: Some(json!([])),
        },
    ]
}

#[test]
fn every_payload_round_trips_through_the_envelope() {
    for data in one_of_each() {
        let event = Event::new(data.clone(), "x", "r");
        let json = event.to_json();
        assert_eq!(json["event"], data.kind().as_str());
        assert_eq!(json["data"], data.to_json());
        let back: Event = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, event, "{json}");
        assert_eq!(
            EventData::from_json(data.kind(), data.to_json()).unwrap(),
            data
        );
    }
}

#[test]
fn the_catalog_lists_every_kind_with_the_fields_its_payload_has() {
    // The catalog in this module's docs is checked against the typed payloads: every kind has
    // one row, and every field a payload serialises is named in its row's `data` column.
    let docs = include_str!("mod.rs");
    let rows: Vec<(&str, &str)> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| {
            let (kind, rest) = l.split_once('`')?;
            let data = rest.split('|').nth(2)?;
            Some((kind, data))
        })
        .filter(|(kind, _)| *kind != "event")
        .collect();
    let payloads = one_of_each();
    let kinds: std::collections::BTreeSet<&str> =
        payloads.iter().map(|d| d.kind().as_str()).collect();
    let listed: std::collections::BTreeSet<&str> = rows.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, listed, "the catalog and the payload kinds differ");
    for data in &payloads {
        let (_, column) = rows
            .iter()
            .find(|(k, _)| *k == data.kind().as_str())
            .unwrap();
        if let serde_json::Value::Object(fields) = data.to_json() {
            // Free-form payloads (values, custom, middleware) are not described field by field.
            if matches!(
                data,
                EventData::Values(_) | EventData::Custom(_) | EventData::Middleware(_)
            ) {
                continue;
            }
            for key in fields.keys() {
                assert!(
                    column.contains(key.as_str()),
                    "catalog row `{}` does not name the field `{key}`: {column}",
                    data.kind()
                );
            }
        }
    }
}

#[test]
fn a_lazy_update_reads_writes_and_compares_as_its_json() {
    let value = json!({"counter": 1, "log": ["n0", "a \"quoted\"\nline"], "x": 0.1});
    let written = LazyJson::write(&value).unwrap();
    // The text is serde_json's compact text; the value is read back only when asked.
    assert_eq!(written.as_str(), serde_json::to_string(&value).unwrap());
    assert_eq!(written["log"][1], "a \"quoted\"\nline");
    assert_eq!(*written, value);
    assert_eq!(written.clone().into_value(), value);
    assert_eq!(LazyJson::write(&value).unwrap().into_value(), value);
    assert_eq!(written, LazyJson::from(value.clone()));
    assert_ne!(written, LazyJson::null());
    // In an event: the same envelope as a `Value` update gave, and it reads back.
    let data = EventData::NodeEnd {
        update: written,
        cached: false,
    };
    let envelope = serde_json::to_value(&data).unwrap();
    assert_eq!(
        envelope,
        json!({"event": "node_end", "data": {"update": value}})
    );
    // Serialised as its value, as a `Value` update was.
    assert_eq!(
        serde_json::to_string(&data).unwrap(),
        format!(
            r#"{{"event":"node_end","data":{{"update":{}}}}}"#,
            serde_json::to_string(&value).unwrap()
        )
    );
    let back = EventData::from_json(EventKind::NodeEnd, data.to_json()).unwrap();
    assert_eq!(back, data);
    let parsed: EventData = serde_json::from_str(&serde_json::to_string(&data).unwrap()).unwrap();
    assert_eq!(parsed, data);
}

#[derive(crate::State, Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Counted {
    #[state(reducer = crate::reducers::append)]
    log: Vec<String>,
    count: i64,
}

#[tokio::test]
async fn a_streamed_update_is_the_nodes_update_as_json() {
    use futures::StreamExt;
    let graph = crate::graph::GraphBuilder::<Counted>::new("g")
        .node("a", |_s, _ctx| async {
            CountedUpdate::new().log(vec!["é\u{1}".into()]).count(2)
        })
        .edge(crate::START, "a")
        .edge("a", crate::END)
        .compile()
        .unwrap();
    let opts = crate::RunOptions::new().stream_mode([StreamMode::Updates]);
    let events: Vec<Event> = graph
        .stream_events(CountedUpdate::new(), &opts)
        .collect()
        .await;
    let update = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::NodeEnd { update, .. } => Some(update.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(update.as_str(), r#"{"log":["é\u0001"],"count":2}"#);
    assert_eq!(update["count"], 2);
    // Serialised, it is the update's value (what `to_value` gave before it was kept as text).
    assert_eq!(
        serde_json::to_string(&update).unwrap(),
        serde_json::to_string(&json!({"log": ["é\u{1}"], "count": 2})).unwrap()
    );
}

/// Sets its flag when dropped: shows a node's future was stopped, not left running.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn dropping_a_stream_stops_its_run_and_an_ended_stream_stays_ended() {
    use futures::StreamExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let started = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let (s, d) = (started.clone(), dropped.clone());
    let graph = crate::graph::GraphBuilder::<Counted>::new("g")
        .node("wait", move |_s, _ctx| {
            let (started, dropped) = (s.clone(), d.clone());
            async move {
                let _flag = DropFlag(dropped);
                started.notify_one();
                std::future::pending::<()>().await;
                CountedUpdate::new()
            }
        })
        .edge(crate::START, "wait")
        .edge("wait", crate::END)
        .compile()
        .unwrap();
    let stream = graph.stream_events(CountedUpdate::new(), &crate::RunOptions::new());
    started.notified().await;
    assert!(!dropped.load(Ordering::SeqCst), "the node is running");
    drop(stream);
    // The abort reaches the run's task at its next poll: wait for it, bounded.
    for _ in 0..1000 {
        if dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "dropping the stream stopped the node"
    );

    // A finished stream answers `None` again when polled again (it does not panic).
    let quick = crate::graph::GraphBuilder::<Counted>::new("q")
        .node("a", |_s, _ctx| async { CountedUpdate::new().count(1) })
        .edge(crate::START, "a")
        .edge("a", crate::END)
        .compile()
        .unwrap();
    let mut stream = quick.stream_events(CountedUpdate::new(), &crate::RunOptions::new());
    let mut kinds = Vec::new();
    while let Some(event) = stream.next().await {
        kinds.push(event.kind());
    }
    assert_eq!(kinds.last(), Some(&EventKind::RunEnd));
    assert!(stream.next().await.is_none());
    assert!(stream.next().await.is_none());
}
