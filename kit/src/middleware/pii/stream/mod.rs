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
//! **Linear time.** Only the held-back text is ever scanned, and only once it has grown by a
//! step since the last scan: half the lookback (64 bytes by default), so text is released in
//! pieces of at least that size and each byte is scanned about three times. While a
//! match holds the stream back, the held text starts with that match and is scanned again only
//! once it has doubled (or grown by the lookback, if more), so a match growing over many
//! deltas (a long URL) costs linear time overall instead of one full scan per delta. Holding
//! back longer than strictly needed is always safe; what is released is always scrubbed.
//!
//! Tool-call arguments stream as raw JSON text. Detection runs on a copy of the same length
//! in which every escape sequence is blanked out, except those that stand for a digit or a
//! separator a card can be grouped with (`\n`, `\t`, `\u00a0`, `\uff14`, …): those become the
//! character they stand for, padded with NUL bytes, which the card detector skips. So
//! `\n4111 1111 1111 1111` and `4111\u00a01111\u00a01111\u00a01111` are found as cards, and
//! a match is widened to whole escapes so the JSON stays valid.
//!
//! Subagents' tokens pass through the filter too; their `model_end` (which the subagent's own
//! middleware, not this one, produced) is scrubbed here so it agrees with its deltas.

use std::sync::Mutex;

use serde_json::Value;

use super::card::decimal_value;
use super::detect::Detector;

/// A byte range of a match.
type Span = (usize, usize);
#[cfg(test)]
use super::strategy::PiiStrategy;
use super::strategy::Replacer;
use crate::event::{Event, EventData, EventFilter, EventKind, ModelDelta, ToolCallDelta};
use crate::hash::{FastMap, process_hash};
use crate::message::{Content, ContentPart, Message};

/// What the anchor holds back too: enough for every built-in type.
pub(super) const DEFAULT_LOOKBACK: usize = 128;

/// The event filter. One per run: its buffers belong to that run's model calls.
pub(super) struct StreamScrubber {
    detector: Detector,
    /// Never blocks: a stream cannot be refused after the fact, so blocked data is redacted
    /// here and the run then fails with `PiiDetected` as usual.
    replacer: Replacer,
    lookback: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The namespace of the run the filter belongs to (that of the first event it sees, the
    /// run's `run_start`); events from deeper namespaces are its subagents'.
    own: Option<Vec<String>>,
    buffers: Vec<Buffer>,
    /// [`Key::hash`] → the buffers with that hash: a delta finds its buffer in O(1) however
    /// many streams are held (a model may stream thousands of tool calls at once). Rebuilt
    /// whenever buffers are dropped.
    index: FastMap<u64, Vec<usize>>,
    /// Bytes given to the detector so far (a work count for the linearity tests).
    scanned: usize,
}

impl State {
    /// Builds [`index`](Self::index) again from the buffers.
    fn reindex(&mut self) {
        self.index.clear();
        for (at, buffer) in self.buffers.iter().enumerate() {
            self.index.entry(buffer.key.hash()).or_default().push(at);
        }
    }
}

/// The held-back text of one stream.
struct Buffer {
    key: Key,
    text: String,
    /// The stream's last delta, to release the rest with the same envelope.
    last: Option<Event>,
    /// The byte length `text` must reach before it is scanned again: a step past its length
    /// at the last scan, or, when a match at its start held everything back, half again.
    next_scan: usize,
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

    /// What a key is indexed by, worked out from an event's fields without building the key.
    fn hash_of(namespace: &[String], task: &str, tool_call: Option<u64>) -> u64 {
        process_hash(&(namespace, task, tool_call))
    }

    fn hash(&self) -> u64 {
        Key::hash_of(&self.namespace, &self.task, self.tool_call)
    }

    /// Is this the key of `event` (and of its tool call `tool_call`)? Compares in place.
    fn is_of(&self, event: &Event, tool_call: Option<u64>) -> bool {
        self.tool_call == tool_call
            && self.namespace == event.metadata.namespace
            && self.task == event.parent_ids.last().map_or("", String::as_str)
    }

    fn same_call(&self, other: &Key) -> bool {
        self.namespace == other.namespace && self.task == other.task
    }
}

impl StreamScrubber {
    /// A filter replacing what `detector` finds by `strategy` (`Block` redacts).
    #[cfg(test)]
    pub(super) fn new(detector: Detector, strategy: PiiStrategy, lookback: usize) -> Self {
        Self::with_replacer(detector, &Replacer::new(strategy, None), lookback)
    }

    /// A filter replacing what `detector` finds as `replacer` does (`Block` redacts).
    pub(super) fn with_replacer(detector: Detector, replacer: &Replacer, lookback: usize) -> Self {
        StreamScrubber {
            detector,
            replacer: replacer.never_block(),
            lookback,
            state: Mutex::default(),
        }
    }

    fn scrub(&self, text: &str, spans: &[Span]) -> String {
        if spans.is_empty() {
            return text.to_string();
        }
        self.replacer
            .apply_detector_spans(&self.detector, text, spans)
            .unwrap_or_default()
    }

    /// The matches in a stream's text; `json` for tool-call arguments (raw JSON text).
    fn find(&self, text: &str, json: bool) -> Vec<Span> {
        if json && text.contains('\\') {
            let view = json_view(text);
            widen_to_escapes(text, &view, self.detector.spans(&view))
        } else {
            self.detector.spans(text)
        }
    }

    /// The growth in bytes between two scans of a stream that nothing holds back.
    fn step(&self) -> usize {
        (self.lookback / 2).max(1)
    }

    /// Takes what can no longer be part of a match out of the buffer, scrubbed.
    fn release(&self, buffer: &mut Buffer, scanned: &mut usize) -> String {
        let json = buffer.key.tool_call.is_some();
        let text = &mut buffer.text;
        if text.len() < buffer.next_scan {
            return String::new();
        }
        buffer.next_scan = text.len() + self.step();
        // The byte where the last `lookback` characters start.
        let mut cut = if text.is_ascii() {
            match text.len().checked_sub(self.lookback) {
                Some(cut) if cut > 0 => cut,
                _ => return String::new(),
            }
        } else {
            let chars = text.chars().count();
            if chars <= self.lookback {
                return String::new();
            }
            text.char_indices()
                .nth(chars - self.lookback)
                .map_or(text.len(), |(i, _)| i)
        };
        *scanned += text.len();
        let view = (json && text.contains('\\')).then(|| json_view(text));
        let found = match &view {
            Some(view) => widen_to_escapes(text, view, self.detector.spans(view)),
            None => self.detector.spans(text),
        };
        if let Some(view) = &view {
            // Never split an escape: what stays would start with its bare letter (`n4111…`).
            let (v, t) = (view.as_bytes(), text.as_bytes());
            while cut > 0 && v[cut - 1] != t[cut - 1] {
                cut -= 1;
            }
        }
        // Matches are sorted and disjoint: at most one contains the cut.
        let straddling = found.iter().find(|&&(start, end)| start < cut && end > cut);
        let held = straddling.is_some();
        if let Some(&(start, _)) = straddling {
            cut = start;
        }
        let done: Vec<Span> = found.into_iter().filter(|&(_, end)| end <= cut).collect();
        let head = self.scrub(&text[..cut], &done);
        text.drain(..cut);
        let len = text.len();
        buffer.next_scan = if held {
            // A match that may still grow holds everything: wait until the held text has
            // doubled, so a match growing over many deltas is scanned O(1) times per byte.
            len + self.lookback.max(len)
        } else {
            len + self.step()
        };
        head
    }

    /// Buffers a delta's text; returns the event carrying what can be released, if any.
    fn delta(&self, mut event: Event) -> Option<Event> {
        let tool_call = match &event.data {
            EventData::ModelDelta(ModelDelta::Text { .. }) => None,
            EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) => {
                Some(tool_call.index as u64)
            }
            _ => return Some(event),
        };
        let piece = match &event.data {
            EventData::ModelDelta(ModelDelta::Text { text }) => text.as_str(),
            EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) => tool_call.args.as_str(),
            _ => "",
        };
        let mut state = self.lock();
        let State {
            own,
            buffers,
            index,
            scanned,
        } = &mut *state;
        // The run's own namespace is that of the first event seen (see `is_subagents`).
        own.get_or_insert_with(|| event.metadata.namespace.clone());
        let hash = Key::hash_of(
            &event.metadata.namespace,
            event.parent_ids.last().map_or("", String::as_str),
            tool_call,
        );
        let found = index.get(&hash).and_then(|candidates| {
            candidates.iter().copied().find(|&at| {
                buffers
                    .get(at)
                    .is_some_and(|b| b.key.is_of(&event, tool_call))
            })
        });
        let at = match found {
            Some(at) => at,
            None => {
                buffers.push(Buffer {
                    key: Key::of(&event, tool_call),
                    text: String::new(),
                    last: None,
                    next_scan: 0,
                });
                index.entry(hash).or_default().push(buffers.len() - 1);
                buffers.len() - 1
            }
        };
        let buffer = &mut buffers[at];
        buffer.text.push_str(piece);
        let released = self.release(buffer, scanned);
        let starts_call = matches!(
            &event.data,
            EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) if tool_call.id.is_some()
        );
        if released.is_empty() && !starts_call {
            // Kept (not cloned) as the envelope of what is released later.
            buffer.last = Some(event);
            return None;
        }
        buffer.last = Some(event.clone());
        match &mut event.data {
            EventData::ModelDelta(ModelDelta::ToolCall { tool_call }) => {
                // The chunk that starts a call (id and name) goes out even with no arguments.
                tool_call.args = released;
            }
            data => *data = EventData::text(released),
        }
        Some(event)
    }

    /// Drops what is held for the streams `which` selects: calls that ended without an answer.
    fn drop_held(&self, which: impl Fn(&Key) -> bool) {
        let mut state = self.lock();
        state.buffers.retain(|b| !which(&b.key));
        state.reindex();
    }

    /// Releases (scrubbed) everything held for the streams `which` selects.
    fn flush(&self, which: impl Fn(&Key) -> bool, out: &mut Vec<Event>) {
        let mut state = self.lock();
        let mut kept = Vec::with_capacity(state.buffers.len());
        let buffers: Vec<Buffer> = state.buffers.drain(..).collect();
        for buffer in buffers {
            if !which(&buffer.key) {
                kept.push(buffer);
                continue;
            }
            if buffer.text.is_empty() {
                continue;
            }
            let json = buffer.key.tool_call.is_some();
            state.scanned += buffer.text.len();
            let rest = self.scrub(&buffer.text, &self.find(&buffer.text, json));
            let Some(mut event) = buffer.last else {
                continue;
            };
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
        state.reindex();
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
        self.scrub(text, &self.detector.spans(text))
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
        if event.kind() == EventKind::ModelDelta {
            out.extend(self.delta(event));
            return;
        }
        let nested = self.is_subagents(&event);
        match event.kind() {
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

/// A character a card can be written with: a digit of any script or a group separator.
fn card_char(c: char) -> bool {
    decimal_value(c).is_some() || super::card::separator(c) || c == '\n' || c == '\r'
}

/// The escape sequence starting at `bytes[i]` (a backslash): its length (an unfinished one
/// runs to the end) and the character it stands for, when it is complete.
fn escape(bytes: &[u8], i: usize) -> (usize, Option<char>) {
    match bytes.get(i + 1) {
        None => (1, None),
        Some(b'u') => {
            let mut end = i + 2;
            while end < bytes.len() && end < i + 6 && bytes[end].is_ascii_hexdigit() {
                end += 1;
            }
            let code = (end == i + 6)
                .then(|| std::str::from_utf8(&bytes[i + 2..end]).ok())
                .flatten()
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .and_then(char::from_u32);
            (end - i, code)
        }
        // Not valid JSON; keep the character whole.
        Some(b) if !b.is_ascii() => (1, None),
        Some(b'n') => (2, Some('\n')),
        Some(b't') => (2, Some('\t')),
        Some(b'r') => (2, Some('\r')),
        Some(_) => (2, None),
    }
}

/// `text` with every JSON escape sequence (`\n`, `\"`, `\u00e9`, and an unfinished one at the
/// end) replaced by as many spaces: the same byte offsets, nothing glued to a value.
#[cfg(test)]
fn blank_json_escapes(text: &str) -> String {
    view(text, false)
}

/// The detection view of raw JSON text: like [`blank_json_escapes`], but an escape standing
/// for a character cards are written with becomes that character, padded with NUL bytes.
fn json_view(text: &str) -> String {
    view(text, true)
}

fn view(text: &str, decode: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let (len, stands_for) = escape(bytes, i);
        match stands_for.filter(|&c| decode && card_char(c) && c.len_utf8() <= len) {
            Some(c) => {
                let mut utf8 = [0u8; 4];
                let encoded = c.encode_utf8(&mut utf8).as_bytes();
                out.extend_from_slice(encoded);
                out.resize(out.len() + (len - encoded.len()), 0);
            }
            None => out.resize(out.len() + len, b' '),
        }
        i += len;
    }
    // Whole escapes (ASCII) were replaced by whole characters and padding: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Widens each match of the view to whole escape sequences of the raw text, so a replacement
/// never leaves half an escape behind. Inside an escape the view differs from the raw text.
fn widen_to_escapes(raw: &str, view: &str, found: Vec<Span>) -> Vec<Span> {
    let (r, v) = (raw.as_bytes(), view.as_bytes());
    if r.len() != v.len() {
        return found;
    }
    let spans = found
        .into_iter()
        .map(|(mut start, mut end)| {
            while start > 0
                && start < r.len()
                && r[start] != v[start]
                && r[start - 1] != v[start - 1]
            {
                start -= 1;
            }
            while end < r.len() && end > 0 && r[end] != v[end] && r[end - 1] != v[end - 1] {
                end += 1;
            }
            (start, end)
        })
        .collect();
    super::detect::merge_spans(raw, spans)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod work;
