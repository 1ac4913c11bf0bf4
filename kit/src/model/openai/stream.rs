//! Streaming: Chat Completions SSE chunks to model chunks.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::{finish_reason, usage};
use crate::http::SseEvent;
use crate::model::common::{ProviderError, SseParser, classify, event_json};
use crate::model::{ModelChunk, ModelError};

/// Chat Completions chunks → model chunks.
pub(super) struct ChunkParser {
    pub(super) provider: String,
    pub(super) done: bool,
    pub(super) finished: bool,
}

impl SseParser for ChunkParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let v = event_json(&self.provider, &event)?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let parsed = ProviderError::parse(&json!({ "error": err }).to_string());
            return Err(classify(self.provider.clone(), None, &parsed, None));
        }
        if let Some(choices) = v.get("choices").and_then(Value::as_array) {
            for choice in choices {
                if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                    continue; // kit asks for one choice
                }
                let delta = choice.get("delta").unwrap_or(&Value::Null);
                for key in ["content", "refusal"] {
                    if let Some(text) = delta.get(key).and_then(Value::as_str)
                        && !text.is_empty()
                    {
                        out.push_back(ModelChunk::Text {
                            text: text.to_string(),
                        });
                    }
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for (position, call) in calls.iter().enumerate() {
                        let function = call.get("function").unwrap_or(&Value::Null);
                        let args = match function.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            Some(obj @ Value::Object(_)) => obj.to_string(),
                            _ => String::new(),
                        };
                        let text = |v: Option<&Value>| {
                            v.and_then(Value::as_str)
                                .filter(|s| !s.is_empty())
                                .map(str::to_string)
                        };
                        out.push_back(ModelChunk::ToolCall {
                            index: call
                                .get("index")
                                .and_then(Value::as_u64)
                                .map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX)),
                            id: text(call.get("id")),
                            name: text(function.get("name")),
                            args,
                        });
                    }
                }
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    self.finished = true;
                    out.push_back(ModelChunk::Finish {
                        reason: finish_reason(reason),
                    });
                }
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.push_back(ModelChunk::Usage { usage: usage(u) });
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self) -> Result<(), ModelError> {
        if self.done || self.finished {
            return Ok(());
        }
        Err(ModelError::MalformedResponse {
            provider: self.provider.clone(),
            message: "the stream ended before `[DONE]` and without a finish reason; the answer \
                      is incomplete — try again"
                .to_string(),
        })
    }
}
