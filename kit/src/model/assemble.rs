//! Turning streamed chunks back into a complete answer, and an answer into chunks.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{FinishReason, ModelChunk, ModelResponse};
use crate::message::{Message, ToolCall, Usage};

/// Accumulates [`ModelChunk`]s into the final assistant message.
///
/// Tool-call arguments split across chunks are concatenated per call `index` and parsed once
/// at the end; arguments that are not valid JSON are kept as a JSON string so the tool node can
/// tell the model what was wrong instead of losing the call.
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
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
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
            ModelChunk::Text { text } => self.text.push_str(text),
            ModelChunk::ToolCall {
                index,
                id,
                name,
                args,
            } => {
                let call = self.calls.entry(*index).or_default();
                if let Some(id) = id {
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
        }
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The complete answer.
    pub fn finish(self) -> ModelResponse {
        let calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .map(|c| ToolCall {
                id: c
                    .id
                    .unwrap_or_else(|| format!("call_{}", &crate::ids::random()[..8])),
                name: c.name.unwrap_or_default(),
                args: parse_args(&c.args),
            })
            .collect();
        let finish_reason = self.finish.unwrap_or(if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let mut message = Message::assistant(self.text);
        message.tool_calls = calls;
        message.usage = self.usage;
        ModelResponse {
            message,
            finish_reason,
        }
    }
}

/// Later usage chunks may repeat or extend earlier ones (Anthropic sends input tokens first and
/// output tokens last): keep the largest of each count.
fn merge_usage(into: &mut Usage, more: &Usage) {
    into.input_tokens = into.input_tokens.max(more.input_tokens);
    into.output_tokens = into.output_tokens.max(more.output_tokens);
    into.cache_read_tokens = into.cache_read_tokens.max(more.cache_read_tokens);
    into.cache_creation_tokens = into.cache_creation_tokens.max(more.cache_creation_tokens);
}

/// Parses tool-call arguments; an empty string is `{}`, invalid JSON is kept as a string.
pub fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// The chunks a complete answer would have been streamed as.
pub(crate) fn chunks_of(response: &ModelResponse) -> Vec<ModelChunk> {
    let mut chunks = Vec::new();
    let text = response.message.text();
    if !text.is_empty() {
        chunks.push(ModelChunk::Text { text });
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
    chunks.push(ModelChunk::Finish {
        reason: response.finish_reason.clone(),
    });
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
