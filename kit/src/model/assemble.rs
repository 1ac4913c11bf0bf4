//! Turning streamed chunks back into a complete answer, and an answer into chunks.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{FinishReason, ModelChunk, ModelResponse};
use crate::json::nests_within;
use crate::message::{Content, ContentPart, Message, Reasoning, ToolCall, Usage};

/// Accumulates [`ModelChunk`]s into the final assistant message.
///
/// Text and reasoning keep the order they arrived in: an answer with reasoning becomes a
/// [`Content::Parts`] of reasoning blocks (one per reasoning `index`, pieces merged) and text
/// runs; an answer without is plain text. Tool-call arguments split across chunks are
/// concatenated per call `index` and parsed once at the end; arguments that are not valid JSON
/// are kept as a JSON string so the tool node can tell the model what was wrong instead of
/// losing the call. A call that arrives without an id (or with an empty one) gets a stable
/// synthesized id: the same for the same response id and position, distinct between calls.
/// Metadata chunks (response id, model, cost) land in the message's metadata.
///
/// ```
/// use kit::model::{ModelChunk, StreamAssembler};
/// let mut a = StreamAssembler::new();
/// a.push(&ModelChunk::Text { text: "Let me add.".into() });
/// a.push(&ModelChunk::ToolCall { index: 0, id: Some("c1".into()), name: Some("add".into()), args: "{\"a\":".into() });
/// a.push(&ModelChunk::ToolCall { index: 0, id: None, name: None, args: "1}".into() });
/// let response = a.finish();
/// assert_eq!(response.message.text(), "Let me add.");
/// assert_eq!(response.message.tool_calls[0].args["a"], 1);
/// ```
#[derive(Debug, Default)]
pub struct StreamAssembler {
    /// All text, in order (what [`text`](Self::text) shows).
    text: String,
    /// Text runs (byte ranges of `text`) and reasoning blocks, in arrival order; empty while
    /// no reasoning arrived (the text is then the whole content).
    slots: Vec<Slot>,
    /// Reasoning index → its position in `slots`.
    reasoning: BTreeMap<usize, usize>,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    metadata: Map<String, Value>,
}

#[derive(Debug)]
enum Slot {
    Text(std::ops::Range<usize>),
    Reasoning(Reasoning),
    Part(ContentPart),
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    args: String,
}

impl StreamAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk.
    pub fn push(&mut self, chunk: &ModelChunk) {
        match chunk {
            ModelChunk::Text { text } => {
                let start = self.text.len();
                self.text.push_str(text);
                if !self.slots.is_empty() {
                    match self.slots.last_mut() {
                        Some(Slot::Text(range)) => range.end = self.text.len(),
                        _ => self.slots.push(Slot::Text(start..self.text.len())),
                    }
                }
            }
            ModelChunk::Part { part } => {
                self.open_slots();
                self.slots.push(Slot::Part(part.clone()));
            }
            ModelChunk::Reasoning { index, part } => {
                self.open_slots();
                match self.reasoning.get(index) {
                    Some(&at) => {
                        if let Some(Slot::Reasoning(r)) = self.slots.get_mut(at) {
                            r.merge(part);
                        }
                    }
                    None => {
                        self.reasoning.insert(*index, self.slots.len());
                        self.slots.push(Slot::Reasoning(part.clone()));
                    }
                }
            }
            ModelChunk::ToolCall {
                index,
                id,
                name,
                args,
            } => {
                let call = self.calls.entry(*index).or_default();
                if let Some(id) = id.as_ref().filter(|id| !id.is_empty()) {
                    call.id = Some(id.clone());
                }
                if let Some(name) = name {
                    match &mut call.name {
                        Some(existing) if existing != name => existing.push_str(name),
                        Some(_) => {}
                        None => call.name = Some(name.clone()),
                    }
                }
                call.args.push_str(args);
            }
            ModelChunk::Usage { usage } => match &mut self.usage {
                Some(u) => merge_usage(u, usage),
                None => self.usage = Some(*usage),
            },
            ModelChunk::Finish { reason } => self.finish = Some(reason.clone()),
            ModelChunk::Metadata { metadata } => {
                for (k, v) in metadata {
                    self.metadata.insert(k.clone(), v.clone());
                }
            }
        }
    }

    /// Switches from plain text to parts: the text so far becomes the first run.
    fn open_slots(&mut self) {
        if self.slots.is_empty() && !self.text.is_empty() {
            self.slots.push(Slot::Text(0..self.text.len()));
        }
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The complete answer.
    pub fn finish(self) -> ModelResponse {
        let mut ids = CallIds::new(
            self.metadata
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(index, c)| ToolCall {
                id: c.id.unwrap_or_else(|| ids.make(index)),
                name: c.name.unwrap_or_default(),
                args: parse_args(&c.args),
            })
            .collect();
        let finish_reason = self.finish.unwrap_or(if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let content = if self.slots.is_empty() {
            Content::Text(self.text)
        } else {
            let text = self.text;
            Content::Parts(
                self.slots
                    .into_iter()
                    .map(|slot| match slot {
                        Slot::Text(range) => ContentPart::text(text.get(range).unwrap_or_default()),
                        Slot::Reasoning(r) => ContentPart::Reasoning(r),
                        Slot::Part(part) => part,
                    })
                    .collect(),
            )
        };
        let mut message = Message::assistant(content);
        message.tool_calls = calls;
        message.usage = self.usage;
        message.metadata = self.metadata;
        ModelResponse {
            message,
            finish_reason,
        }
    }
}

/// Stable ids for tool calls a provider sent without one: `call_<8 hex of the response
/// id>_<position>`, or a random prefix for the whole answer when the response has no id —
/// distinct between the calls of an answer either way. The prefix is made only when a call
/// needs it.
pub(crate) struct CallIds<'a> {
    response_id: &'a str,
    prefix: Option<String>,
}

impl<'a> CallIds<'a> {
    pub(crate) fn new(response_id: &'a str) -> Self {
        CallIds {
            response_id,
            prefix: None,
        }
    }

    pub(crate) fn make(&mut self, index: usize) -> String {
        let response_id = self.response_id;
        let prefix = self.prefix.get_or_insert_with(|| {
            use sha2::Digest as _;
            if response_id.is_empty() {
                crate::ids::random()[..8].to_string()
            } else {
                let digest = sha2::Sha256::digest(response_id.as_bytes());
                digest[..4].iter().map(|b| format!("{b:02x}")).collect()
            }
        });
        format!("call_{prefix}_{index}")
    }
}

/// Later usage chunks may repeat or extend earlier ones (Anthropic sends input tokens first and
/// output tokens last): keep the largest of each count.
pub(crate) fn merge_usage(into: &mut Usage, more: &Usage) {
    into.input_tokens = into.input_tokens.max(more.input_tokens);
    into.output_tokens = into.output_tokens.max(more.output_tokens);
    into.cache_read_tokens = into.cache_read_tokens.max(more.cache_read_tokens);
    into.cache_creation_tokens = into.cache_creation_tokens.max(more.cache_creation_tokens);
    into.cache_creation_1h_tokens = into
        .cache_creation_1h_tokens
        .max(more.cache_creation_1h_tokens);
    into.reasoning_tokens = into.reasoning_tokens.max(more.reasoning_tokens);
}

/// The deepest nesting of a model's tool-call arguments (or a provider block's input) kept as
/// JSON. A conversation is saved a few levels deeper than its messages' arguments (state,
/// messages, tool calls, arguments), and serde_json reads no deeper than 128 levels: a value
/// near that limit would save fine and make its thread unreadable from then on. Deeper
/// arguments are kept as their text, and the tool answers with what to fix.
pub const MAX_ARGS_DEPTH: usize = 64;

/// Parses tool-call arguments; an empty string is `{}`. Invalid JSON, JSON nested deeper
/// than [`MAX_ARGS_DEPTH`], and JSON of more than 100,000 objects and arrays, is kept as a
/// string (the tool answers it with an error the model
/// can act on).
///
/// ```
/// use kit::model::parse_args;
/// assert_eq!(parse_args(r#"{"a": [1]}"#), serde_json::json!({"a": [1]}));
/// assert!(parse_args("{oops").is_string());
/// assert!(parse_args(&format!("{}{}", "[".repeat(65), "]".repeat(65))).is_string());
/// ```
pub fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    // Arguments of a hundred thousand objects would cost some 90 times their size parsed.
    if !super::common::parses_within_bounds(raw.as_bytes()) {
        return Value::String(raw.to_string());
    }
    match serde_json::from_str(raw) {
        Ok(value) if nests_within(&value, MAX_ARGS_DEPTH) => value,
        _ => Value::String(raw.to_string()),
    }
}

/// Tool-call arguments a provider sent as JSON (not as text): kept when they nest at most
/// [`MAX_ARGS_DEPTH`] levels, else as their text, as [`parse_args`] keeps them.
pub(crate) fn kept_args(value: Value) -> Value {
    if nests_within(&value, MAX_ARGS_DEPTH) {
        value
    } else {
        Value::String(value.to_string())
    }
}

/// The chunks a complete answer would have been streamed as.
pub(crate) fn chunks_of(response: &ModelResponse) -> Vec<ModelChunk> {
    let mut chunks = Vec::new();
    match &response.message.content {
        Content::Text(text) if text.is_empty() => {}
        Content::Text(text) => chunks.push(ModelChunk::Text { text: text.clone() }),
        Content::Parts(parts) => {
            let mut index = 0;
            for part in parts {
                match part {
                    ContentPart::Text { text } if !text.is_empty() => {
                        chunks.push(ModelChunk::Text { text: text.clone() });
                    }
                    ContentPart::Reasoning(r) => {
                        chunks.push(ModelChunk::Reasoning {
                            index,
                            part: r.clone(),
                        });
                        index += 1;
                    }
                    ContentPart::Text { .. } => {}
                    other => chunks.push(ModelChunk::Part {
                        part: other.clone(),
                    }),
                }
            }
        }
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        chunks.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args: match &call.args {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            },
        });
    }
    if let Some(usage) = response.message.usage {
        chunks.push(ModelChunk::Usage { usage });
    }
    if !response.message.metadata.is_empty() {
        chunks.push(ModelChunk::Metadata {
            metadata: response.message.metadata.clone(),
        });
    }
    chunks.push(ModelChunk::Finish {
        reason: response.finish_reason.clone(),
    });
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments nested up to the limit are kept as JSON, deeper ones as text; and a
    /// conversation holding the deepest kept arguments still reads back once saved (serde_json
    /// reads no deeper than 128 levels, and a saved conversation nests a few levels deeper than
    /// its arguments).
    #[test]
    fn arguments_too_deep_to_save_are_kept_as_text() {
        let nested = |levels: usize| format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
        assert!(parse_args(&nested(MAX_ARGS_DEPTH)).is_array());
        assert!(parse_args(&nested(MAX_ARGS_DEPTH + 1)).is_string());
        assert!(parse_args(&nested(127)).is_string());
        assert!(parse_args(&format!("{{\"a\": {}}}", nested(MAX_ARGS_DEPTH - 1))).is_object());
        assert!(parse_args(&format!("{{\"a\": {}}}", nested(MAX_ARGS_DEPTH))).is_string());
        // A 1 MiB flat argument parses as JSON (the depth check is linear in it).
        let wide = format!("[{}1]", "1,".repeat(1 << 19));
        assert!(parse_args(&wide).is_array());

        let call = crate::message::ToolCall::with_id("c", "t", parse_args(&nested(MAX_ARGS_DEPTH)));
        let state = crate::agent::AgentState {
            messages: vec![crate::message::Message::assistant_with_tool_calls(
                "",
                vec![call],
            )]
            .into(),
            ..Default::default()
        };
        let saved = serde_json::to_string(&state).unwrap();
        let back: crate::agent::AgentState = serde_json::from_str(&saved).unwrap();
        assert_eq!(
            back.messages[0].tool_calls[0].args,
            state.messages[0].tool_calls[0].args
        );
    }

    #[test]
    fn interleaved_parallel_calls_and_bad_json() {
        let mut a = StreamAssembler::new();
        for c in [
            ModelChunk::ToolCall {
                index: 1,
                id: Some("b".into()),
                name: Some("two".into()),
                args: "{\"x\"".into(),
            },
            ModelChunk::ToolCall {
                index: 0,
                id: Some("a".into()),
                name: Some("one".into()),
                args: String::new(),
            },
            ModelChunk::ToolCall {
                index: 1,
                id: None,
                name: None,
                args: ": 2}".into(),
            },
            ModelChunk::ToolCall {
                index: 0,
                id: None,
                name: None,
                args: "{not json".into(),
            },
            ModelChunk::Usage {
                usage: Usage {
                    input_tokens: 10,
                    ..Default::default()
                },
            },
            ModelChunk::Usage {
                usage: Usage {
                    output_tokens: 5,
                    ..Default::default()
                },
            },
        ] {
            a.push(&c);
        }
        let r = a.finish();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        let calls = &r.message.tool_calls;
        assert_eq!(calls[0].id, "a");
        assert_eq!(calls[0].args, Value::String("{not json".into()));
        assert_eq!(calls[1].args["x"], 2);
        let usage = r.message.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (10, 5));
    }

    #[test]
    fn chunks_round_trip() {
        let mut m = Message::assistant("hi");
        m.tool_calls
            .push(ToolCall::with_id("c", "t", serde_json::json!({"k": 1})));
        let response = ModelResponse {
            message: m,
            finish_reason: FinishReason::ToolCalls,
        };
        let mut a = StreamAssembler::new();
        for c in chunks_of(&response) {
            a.push(&c);
        }
        let back = a.finish();
        assert_eq!(back.message.text(), "hi");
        assert_eq!(back.message.tool_calls, response.message.tool_calls);
    }

    fn thinking(text: &str, signature: Option<&str>) -> Reasoning {
        Reasoning {
            provider: "anthropic".into(),
            format: crate::message::ReasoningFormat::AnthropicThinking,
            text: text.into(),
            signature: signature.map(str::to_string),
            ..Reasoning::default()
        }
    }

    #[test]
    fn reasoning_blocks_keep_their_order_and_merge_their_pieces() {
        let mut a = StreamAssembler::new();
        for c in [
            ModelChunk::Reasoning {
                index: 0,
                part: thinking("Two ", None),
            },
            ModelChunk::Reasoning {
                index: 0,
                part: thinking("plus two.", None),
            },
            ModelChunk::Reasoning {
                index: 0,
                part: thinking("", Some("sig-a")),
            },
            ModelChunk::Reasoning {
                index: 1,
                part: thinking("Check.", Some("sig-b")),
            },
            ModelChunk::Text {
                text: "It is ".into(),
            },
            ModelChunk::Text { text: "4.".into() },
        ] {
            a.push(&c);
        }
        assert_eq!(a.text(), "It is 4.");
        let r = a.finish();
        assert_eq!(r.message.text(), "It is 4.");
        let Content::Parts(parts) = &r.message.content else {
            panic!("reasoning makes parts: {:?}", r.message.content)
        };
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert_eq!(
            parts[0],
            ContentPart::Reasoning(thinking("Two plus two.", Some("sig-a")))
        );
        assert_eq!(
            parts[1],
            ContentPart::Reasoning(thinking("Check.", Some("sig-b")))
        );
        assert_eq!(parts[2], ContentPart::text("It is 4."));
        // And back: the same answer streams as the same chunks.
        let mut again = StreamAssembler::new();
        for c in chunks_of(&r) {
            again.push(&c);
        }
        assert_eq!(again.finish().message.content, r.message.content);
    }

    #[test]
    fn calls_without_ids_get_stable_distinct_ids() {
        let assemble = |response_id: &str| {
            let mut a = StreamAssembler::new();
            let mut meta = Map::new();
            meta.insert("id".into(), Value::from(response_id));
            a.push(&ModelChunk::Metadata { metadata: meta });
            for index in 0..2 {
                a.push(&ModelChunk::ToolCall {
                    index,
                    id: Some(String::new()),
                    name: Some("look".into()),
                    args: "{}".into(),
                });
            }
            a.finish().message.tool_calls
        };
        let calls = assemble("chatcmpl-1");
        assert_ne!(calls[0].id, calls[1].id);
        assert!(
            calls
                .iter()
                .all(|c| c.id.starts_with("call_") && c.id.len() > 8)
        );
        assert_eq!(calls, assemble("chatcmpl-1"), "same response, same ids");
        assert_ne!(calls[0].id, assemble("chatcmpl-2")[0].id);
    }
}
