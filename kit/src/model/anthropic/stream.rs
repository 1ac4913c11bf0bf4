//! Streaming: Messages API events to model chunks.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::{stop_reason, usage};
use crate::http::SseEvent;
use crate::model::common::{ProviderError, SseParser, classify, event_json};
use crate::model::{ModelChunk, ModelError};

/// Messages API stream events → model chunks.
#[derive(Default)]
pub(super) struct EventParser {
    /// Content-block index → tool-call index.
    pub(super) calls: HashMap<u64, usize>,
    pub(super) next_call: usize,
    pub(super) stopped: bool,
    pub(super) done: bool,
}

impl SseParser for EventParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        let v = event_json("anthropic", &event)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage").filter(|u| u.is_object()) {
                    out.push_back(ModelChunk::Usage { usage: usage(u) });
                }
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = v.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let call = self.next_call;
                        self.next_call += 1;
                        self.calls.insert(index, call);
                        let args = match block.get("input") {
                            Some(Value::Object(m)) if !m.is_empty() => {
                                Value::Object(m.clone()).to_string()
                            }
                            _ => String::new(),
                        };
                        out.push_back(ModelChunk::ToolCall {
                            index: call,
                            id: block.get("id").and_then(Value::as_str).map(str::to_string),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                            args,
                        });
                    }
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            out.push_back(ModelChunk::Text {
                                text: t.to_string(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = v.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            out.push_back(ModelChunk::Text {
                                text: t.to_string(),
                            });
                        }
                    }
                    Some("input_json_delta") => {
                        let Some(&call) = self.calls.get(&index) else {
                            return Err(ModelError::MalformedResponse {
                                provider: "anthropic".into(),
                                message: format!(
                                    "input_json_delta for content block {index}, which did not \
                                     start as a tool_use block"
                                ),
                            });
                        };
                        let part = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        out.push_back(ModelChunk::ToolCall {
                            index: call,
                            id: None,
                            name: None,
                            args: part.to_string(),
                        });
                    }
                    _ => {} // thinking_delta, signature_delta, citations_delta
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stopped = true;
                    out.push_back(ModelChunk::Finish {
                        reason: stop_reason(r),
                    });
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    out.push_back(ModelChunk::Usage { usage: usage(u) });
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let parsed = ProviderError::parse(&v.to_string());
                return Err(classify("anthropic".into(), None, &parsed, None));
            }
            _ => {} // ping, content_block_stop, and event types added later
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self) -> Result<(), ModelError> {
        if self.done || self.stopped {
            return Ok(());
        }
        Err(ModelError::MalformedResponse {
            provider: "anthropic".to_string(),
            message: "the stream ended before `message_stop` and without a stop reason; the \
                      answer is incomplete — try again"
                .to_string(),
        })
    }
}
