//! Scrubbing streamed tokens: the event filter of a PII middleware checking output.
//!
//! Tokens arrive in small pieces, so a match can be split across two `model_delta` events.
//! Each stream (one model call's text, or one of its tool calls' argument text) keeps its last
//! `lookback` characters back; what lies before them is scrubbed and released. A match that
//! reaches into the held-back part is held back whole, since it may still grow. The rest is
//! released when the call ends (`model_end`, or the run's `run_end`), so the deltas of a call
//! always add up to its scrubbed answer. A call that ends without an answer (`model_start` of
//! a retry, or the run's `error`) drops what it held: it may be the unfinished half of a
//! value no detector would recognise yet.
//!
//! Tool-call arguments stream as raw JSON text, where a line break before a value is the two
//! characters `\n`. Detection runs on a copy with every escape sequence blanked out (same
//! length), so `\n4111 1111 1111 1111` is found as a card and the JSON stays valid.
//!
//! Subagents' tokens pass through the filter too; their `model_end` (which the subagent's own
//! middleware, not this one, produced) is scrubbed here so it agrees with its deltas.

use std::sync::Mutex;

use serde_json::Value;

use super::detect::{Detector, PiiMatch};
use super::strategy::PiiStrategy;
use crate::event::{Event, EventData, EventFilter, EventKind, ModelDelta, ToolCallDelta};
use crate::message::{Content, ContentPart, Message};

/// What the anchor holds back too: enough for every built-in type.
pub(super) const DEFAULT_LOOKBACK: usize = 128;

/// The event filter. One per run: its buffers belong to that run's model calls.
pub(super) struct StreamScrubber {
    detector: Detector,
    /// Never `Block`: a stream cannot be refused after the fact, so blocked data is redacted
    /// here and the run then fails with `PiiDetected` as usual.
    strategy: PiiStrategy,
    lookback: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The namespace of the run the filter belongs to (that of the first event it sees, the
    /// run's `run_start`); events from deeper namespaces are its subagents'.
    own: Option<Vec<String>>,
    buffers: Vec<Buffer>,
}

/// The held-back text of one stream.
struct Buffer {
    key: Key,
    text: String,
    /// The stream's last delta, to release the rest with the same envelope.
    last: Event,
}

#[derive(PartialEq)]
struct Key {
    namespace: Vec<String>,
    /// The model node's task run (the last parent id of its events).
    task: String,
    /// The tool call's index, `None` for the answer's text.
    tool_call: Option<u64>,
}

impl Key {
    fn of(event: &Event, tool_call: Option<u64>) -> Key {
        Key {
            namespace: event.metadata.namespace.clone(),
            task: event.parent_ids.last().cloned().unwrap_or_default(),
            tool_call,
        }
    }

    fn same_call(&self, other: &Key) -> bool {
        self.namespace == other.namespace && self.task == other.task
    }
}

impl StreamScrubber {
    pub(super) fn new(detector: Detector, strategy: PiiStrategy, lookback: usize) -> Self {
        StreamScrubber {
            detector,
            strategy: match strategy {
                PiiStrategy::Block => PiiStrategy::Redact,
                other => other,
            },
            lookback,
            state: Mutex::default(),
        }
    }

    fn scrub(&self, text: &str, matches: &[PiiMatch]) -> String {
        if matches.is_empty() {
            return text.to_string();
        }
        self.strategy
            .apply(self.detector.pii_type(), text, matches)
            .unwrap_or_default()
    }

    /// The matches in a stream's text; `json` for tool-call arguments (raw JSON text).
    fn find(&self, text: &str, json: bool) -> Vec<PiiMatch> {
        if json && text.contains('\\') {
            self.detector.find(&blank_json_escapes(text))
        } else {
            self.detector.find(text)
        }
    }

    /// Takes what can no longer be part of a match out of `text`, scrubbed.
    fn release(&self, text: &mut String, json: bool) -> String {
        let chars = text.chars().count();
        if chars <= self.lookback {
            return String::new();
        }
        let mut cut = text
            .char_indices()
            .nth(chars - self.lookback)
            .map_or(text.len(), |(i, _)| i);
        let blanked = (json && text.contains('\\')).then(|| blank_json_escapes(text));
        let found = self
            .detector
            .find(blanked.as_deref().unwrap_or(text.as_str()));
        if let Some(blanked) = &blanked {
            // Never split an escape: what stays would start with its bare letter (`n4111…`).
            let (b, t) = (blanked.as_bytes(), text.as_bytes());
            while cut > 0 && b[cut - 1] == b' ' && t[cut - 1] != b' ' {
                cut -= 1;
            }
        }
        while let Some(m) = found.iter().find(|m| m.start < cut && m.end > cut) {
            cut = m.start;
        }
        let done: Vec<PiiMatch> = found.into_iter().filter(|m| m.end <= cut).collect();
        let head = self.scrub(&text[..cut], &done);
        text.drain(..cut);
        head
    }

    /// Buffers a delta's text; returns the event carrying what can be released, if any.
    fn delta(&self, mut event: Event) -> Option<Event> {
        let (key, piece) = match &event.data {
            EventData::ModelDelta(ModelDelta::Text { text }) => {
                (Key::of(&event, None), text.clone())
            }
            EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) => (
                Key::of(&event, Some(tool_call.index as u64)),
                tool_call.args.clone(),
            ),
            _ => return Some(event),
        };
        let mut state = self.lock();
        let buffers = &mut state.buffers;
        let at = match buffers.iter().position(|b| b.key == key) {
            Some(at) => at,
            None => {
                buffers.push(Buffer {
                    key,
                    text: String::new(),
                    last: event.clone(),
                });
                buffers.len() - 1
            }
        };
        let buffer = &mut buffers[at];
        buffer.text.push_str(&piece);
        buffer.last = event.clone();
        let json = buffer.key.tool_call.is_some();
        let released = self.release(&mut buffer.text, json);
        match buffer.key.tool_call {
            None if released.is_empty() => None,
            None => {
                event.data = EventData::text(released);
                Some(event)
            }
            Some(_) => {
                // The chunk that starts a call (id and name) goes out even with no arguments.
                let EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) = &mut event.data
                else {
                    return None;
                };
                if released.is_empty() && tool_call.id.is_none() {
                    return None;
                }
                tool_call.args = released;
                Some(event)
            }
        }
    }

    /// Drops what is held for the streams `which` selects: calls that ended without an answer.
    fn drop_held(&self, which: impl Fn(&Key) -> bool) {
        self.lock().buffers.retain(|b| !which(&b.key));
    }

    /// Releases (scrubbed) everything held for the streams `which` selects.
    fn flush(&self, which: impl Fn(&Key) -> bool, out: &mut Vec<Event>) {
        let mut state = self.lock();
        let mut kept = Vec::with_capacity(state.buffers.len());
        for buffer in state.buffers.drain(..) {
            if !which(&buffer.key) {
                kept.push(buffer);
                continue;
            }
            if buffer.text.is_empty() {
                continue;
            }
            let json = buffer.key.tool_call.is_some();
            let rest = self.scrub(&buffer.text, &self.find(&buffer.text, json));
            let mut event = buffer.last;
            event.run_id = crate::ids::random();
            event.data = match buffer.key.tool_call {
                None => EventData::text(rest),
                Some(index) => EventData::ModelDelta(ModelDelta::ToolCall {
                    tool_call: ToolCallDelta {
                        index: usize::try_from(index).unwrap_or(usize::MAX),
                        id: None,
                        name: None,
                        args: rest,
                    },
                }),
            };
            out.push(event);
        }
        state.buffers = kept;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True for an event of a subagent (remembering the run's own namespace on first sight).
    fn is_subagents(&self, event: &Event) -> bool {
        let mut state = self.lock();
        let own = state
            .own
            .get_or_insert_with(|| event.metadata.namespace.clone());
        event.metadata.namespace != *own
    }

    /// Scrubs a text in full.
    fn scrub_all(&self, text: &str) -> String {
        self.scrub(text, &self.detector.find(text))
    }

    /// Scrubs a message's text and tool-call arguments in place.
    fn scrub_message(&self, message: &mut Message) {
        match &mut message.content {
            Content::Text(text) => *text = self.scrub_all(text),
            Content::Parts(parts) => {
                for part in parts {
                    if let ContentPart::Text { text } = part {
                        *text = self.scrub_all(text);
                    }
                }
            }
        }
        for call in &mut message.tool_calls {
            self.scrub_strings(&mut call.args);
        }
    }

    fn scrub_strings(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.scrub_all(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_strings(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.scrub_strings(v)),
            _ => {}
        }
    }
}

impl EventFilter for StreamScrubber {
    fn filter(&self, mut event: Event, out: &mut Vec<Event>) {
        let nested = self.is_subagents(&event);
        match event.kind() {
            EventKind::ModelDelta => out.extend(self.delta(event)),
            EventKind::ModelStart => {
                let call = Key::of(&event, None);
                self.drop_held(|k| k.same_call(&call));
                out.push(event);
            }
            EventKind::ModelEnd => {
                let call = Key::of(&event, None);
                self.flush(|k| k.same_call(&call), out);
                if nested && let EventData::ModelEnd { message, .. } = &mut event.data {
                    self.scrub_message(message);
                }
                out.push(event);
            }
            EventKind::Error => {
                let ns = &event.metadata.namespace;
                self.drop_held(|k| k.namespace.starts_with(ns));
                out.push(event);
            }
            EventKind::RunEnd => {
                let ns = &event.metadata.namespace;
                self.flush(|k| k.namespace.starts_with(ns), out);
                out.push(event);
            }
            _ => out.push(event),
        }
    }
}

/// `text` with every JSON escape sequence (`\n`, `\"`, `\u00e9`, and an unfinished one at the
/// end) replaced by as many spaces: the same byte offsets, nothing glued to a value.
fn blank_json_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        // An escape is `\X`, or `\u` and up to four hex digits; all ASCII.
        let mut end = (i + 2).min(bytes.len());
        if bytes.get(i + 1) == Some(&b'u') {
            while end < bytes.len() && end < i + 6 && bytes[end].is_ascii_hexdigit() {
                end += 1;
            }
        } else if bytes.get(i + 1).is_some_and(|b| !b.is_ascii()) {
            // Not valid JSON; keep the character whole.
            end = i + 1;
        }
        out.resize(out.len() + (end - i), b' ');
        i = end;
    }
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

#[cfg(test)]
mod tests {
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
}
