use serde_json::json;

use super::*;
use crate::event::EventMetadata;
use crate::middleware::pii::PiiType;

fn scrubber(lookback: usize) -> StreamScrubber {
    StreamScrubber::new(
        Detector::builtin(PiiType::Email),
        PiiStrategy::Redact,
        lookback,
    )
}

fn event(kind: EventKind, task: &str, ns: &[&str], data: Value) -> Event {
    Event {
        data: EventData::from_json(kind, data).unwrap(),
        name: "m".into(),
        run_id: crate::ids::random(),
        parent_ids: vec!["root".into(), task.into()],
        metadata: EventMetadata {
            namespace: ns.iter().map(|s| s.to_string()).collect(),
            ..EventMetadata::default()
        },
    }
}

fn feed(s: &StreamScrubber, events: Vec<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    for e in events {
        s.filter(e, &mut out);
    }
    out
}

fn text(task: &str, t: &str) -> Event {
    event(EventKind::ModelDelta, task, &[], json!({ "text": t }))
}

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .map(|e| e.data.to_json()["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn releases_all_but_the_lookback_and_holds_a_match_reaching_into_it_whole() {
    let s = scrubber(4);
    let start = event(EventKind::RunStart, "t", &[], json!({}));
    // Everything but the last 4 characters goes out.
    let out = feed(&s, vec![start, text("t", "hello there ")]);
    assert_eq!(texts(&out), ["hello th"]);
    // The address reaches into the held-back part: it waits whole, as long as it must.
    assert_eq!(
        texts(&feed(&s, vec![text("t", "mail a@b.io")])),
        ["ere mail "]
    );
    assert!(feed(&s, vec![text("t", " ok")]).is_empty());
    let out = feed(&s, vec![text("t", " fine")]);
    assert_eq!(texts(&out), ["[REDACTED_EMAIL] ok "]);
    // The call's end releases the rest before model_end itself.
    let end = event(
        EventKind::ModelEnd,
        "t",
        &[],
        json!({"message": Message::assistant("")}),
    );
    let out = feed(&s, vec![end]);
    assert_eq!(texts(&out), ["fine"]);
    assert_eq!(out.last().map(|e| e.kind()), Some(EventKind::ModelEnd));
}

#[test]
fn counts_characters_not_bytes() {
    let s = scrubber(3);
    let out = feed(&s, vec![text("t", "héllo wörld")]);
    assert_eq!(texts(&out), ["héllo wö"]);
}

#[test]
fn a_call_without_an_answer_drops_what_it_held_and_streams_are_kept_apart() {
    let s = scrubber(64);
    // The failed attempt held the unfinished half of an address: a retry drops it.
    let out = feed(
        &s,
        vec![
            text("a", "first try alice@exa"),
            text("b", "other task"),
            event(
                EventKind::ModelStart,
                "a",
                &[],
                json!({"provider": "p", "model": "m", "messages": 1, "tools": []}),
            ),
            text("a", "second"),
        ],
    );
    assert!(texts(&out).is_empty(), "{:?}", texts(&out));
    // A subagent's end does not release the parent's streams.
    let ns_end = event(
        EventKind::RunEnd,
        "x",
        &["task:1"],
        json!({"status": "done"}),
    );
    assert!(texts(&feed(&s, vec![ns_end])).is_empty());
    // Task b's answer ends: its text goes out, task a's stays held.
    let out = feed(
        &s,
        vec![event(
            EventKind::ModelEnd,
            "b",
            &[],
            json!({"message": Message::assistant("")}),
        )],
    );
    assert_eq!(texts(&out), ["other task"]);
    // The run fails: what task a held is dropped, the error goes out.
    let out = feed(
        &s,
        vec![event(
            EventKind::Error,
            "x",
            &[],
            json!({"message": "m", "kind": "k"}),
        )],
    );
    assert!(texts(&out).is_empty());
    assert_eq!(out.len(), 1);
    assert!(s.lock().buffers.is_empty());
}

fn tool_call_deltas(s: &StreamScrubber, args: &str, chunk: usize) -> Value {
    let mut events = vec![event(EventKind::RunStart, "r", &[], json!({}))];
    for (i, piece) in args.as_bytes().chunks(chunk).enumerate() {
        let piece = std::str::from_utf8(piece).unwrap_or_default();
        let (id, name) = if i == 0 {
            (json!("call-1"), json!("note"))
        } else {
            (Value::Null, Value::Null)
        };
        let call = json!({"index": 0, "id": id, "name": name, "args": piece});
        events.push(event(
            EventKind::ModelDelta,
            "t",
            &[],
            json!({ "tool_call": call }),
        ));
    }
    events.push(event(
        EventKind::ModelEnd,
        "t",
        &[],
        json!({"message": Message::assistant("")}),
    ));
    let joined: String = feed(s, events)
        .iter()
        .filter_map(|e| {
            e.data
                .to_json()
                .get("tool_call")?
                .get("args")?
                .as_str()
                .map(String::from)
        })
        .collect();
    match serde_json::from_str(&joined) {
        Ok(v) => v,
        Err(e) => panic!("the streamed arguments are not JSON ({e}): {joined}"),
    }
}

#[test]
fn tool_call_arguments_are_scanned_with_json_escapes_blanked() {
    // ASCII only, cut every 3 bytes: escapes and values straddle deltas.
    // The lookback must cover a whole card number (up to 23 characters with spaces).
    let card = StreamScrubber::new(
        Detector::builtin(PiiType::CreditCard),
        PiiStrategy::Redact,
        24,
    );
    let args = r#"{"note": "Card:\n4111 1111 1111 1111\tthanks \"ok\""}"#;
    let out = tool_call_deltas(&card, args, 3);
    assert_eq!(out["note"], "Card:\n[REDACTED_CREDIT_CARD]\tthanks \"ok\"");
    let email = scrubber(24);
    let args = r#"{"to": "\nbob@example.org", "cc": "\u00e9mile@example.com"}"#;
    let out = tool_call_deltas(&email, args, 2);
    assert_eq!(out["to"], "\n[REDACTED_EMAIL]");
    assert_eq!(out["cc"], "é[REDACTED_EMAIL]");
}

#[test]
fn json_escapes_are_blanked_to_the_same_length() {
    let text = r#"a\nb\u00e9c\\d\"e\u00"#;
    let blanked = blank_json_escapes(text);
    assert_eq!(blanked, "a  b      c  d  e    ");
    assert_eq!(blanked.len(), text.len());
    assert_eq!(blank_json_escapes("tail\\"), "tail ");
    assert_eq!(blank_json_escapes("no escapes"), "no escapes");
}

#[test]
fn a_subagents_model_end_is_scrubbed_like_its_deltas() {
    let s = scrubber(8);
    let message = Message {
        content: Content::Parts(vec![ContentPart::text("to c@d.io")]),
        tool_calls: vec![crate::ToolCall::with_id(
            "1",
            "mail",
            json!({"to": ["e@f.io"]}),
        )],
        ..Message::assistant("")
    };
    let out = feed(
        &s,
        vec![
            event(EventKind::RunStart, "r", &[], json!({})),
            event(
                EventKind::ModelEnd,
                "t",
                &["task:1"],
                json!({ "message": message }),
            ),
        ],
    );
    assert_eq!(
        out[1].data.to_json()["message"]["content"][0]["text"],
        "to [REDACTED_EMAIL]"
    );
    assert_eq!(
        out[1].data.to_json()["message"]["tool_calls"][0]["args"]["to"][0],
        "[REDACTED_EMAIL]"
    );
}

/// Thousands of tool calls streamed at once, their deltas interleaved: each delta finds its
/// call's buffer through the index (one scan of every buffer per delta was quadratic in the
/// calls), every call's arguments come out whole and scrubbed, and the index follows the
/// buffers as they are flushed.
#[test]
fn many_interleaved_tool_calls_each_find_their_buffer() {
    let s = scrubber(16);
    let n = 3000;
    let mut events = vec![event(EventKind::RunStart, "r", &[], json!({}))];
    let halves = |i: usize| {
        let args = format!("{{\"to\": \"user{i}@example.com\"}}");
        let (a, b) = args.split_at(12);
        (a.to_string(), b.to_string())
    };
    for half in 0..2 {
        for i in 0..n {
            let (a, b) = halves(i);
            let call = if half == 0 {
                json!({"index": i, "id": format!("call-{i}"), "name": "send", "args": a})
            } else {
                json!({"index": i, "id": null, "name": null, "args": b})
            };
            events.push(event(
                EventKind::ModelDelta,
                "t",
                &[],
                json!({ "tool_call": call }),
            ));
        }
    }
    let mut out = feed(&s, events);
    {
        let state = s.lock();
        assert_eq!(state.buffers.len(), n);
        let indexed: usize = state.index.values().map(Vec::len).sum();
        assert_eq!(indexed, n, "every buffer is indexed once");
    }
    out.extend(feed(
        &s,
        vec![event(
            EventKind::ModelEnd,
            "t",
            &[],
            json!({"message": Message::assistant("")}),
        )],
    ));
    assert!(s.lock().index.is_empty() && s.lock().buffers.is_empty());
    let mut args = vec![String::new(); n];
    for e in &out {
        if let Some(call) = e.data.to_json().get("tool_call") {
            let i = call["index"].as_u64().unwrap() as usize;
            args[i].push_str(call["args"].as_str().unwrap_or(""));
        }
    }
    for (i, joined) in args.iter().enumerate() {
        let value: Value = serde_json::from_str(joined).unwrap();
        assert_eq!(value["to"], "[REDACTED_EMAIL]", "call {i}: {joined}");
    }
}
