//! Streaming: Messages API events to model chunks.
//!
//! Text streams as `text_delta`; extended thinking as `thinking_delta` and a closing
//! `signature_delta` per thinking block (each block its own reasoning block);
//! `redacted_thinking` arrives whole at its start; a `tool_use` block's input arrives as
//! `input_json_delta` pieces split anywhere. Server tools (`server_tool_use`, whose input
//! streams the same way, and their `*_tool_result` blocks) are collected and handed over
//! whole at their `content_block_stop`, to be sent back verbatim. `ping`, `citations_delta`
//! and event types added later are skipped; an `error` event ends the stream with a typed
//! error.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::wire::{PROVIDER, reasoning_of_block, stop_reason, usage};
use crate::http::SseEvent;
use crate::message::{ContentPart, Reasoning, ReasoningFormat};
use crate::model::common::{ProviderError, SseParser, StreamMeta, classify, clip, event_json};
use crate::model::{ModelChunk, ModelError};

/// A server block being collected: the block, and its input JSON so far.
struct ServerBlock {
    block: Value,
    input: String,
}

/// Messages API stream events → model chunks.
#[derive(Default)]
pub(super) struct EventParser {
    /// The configured model, for the price.
    pub(super) model: String,
    /// Content-block index → tool-call index.
    calls: HashMap<u64, usize>,
    next_call: usize,
    /// Server blocks being collected, by content-block index.
    server: HashMap<u64, ServerBlock>,
    meta: StreamMeta,
    stopped: bool,
    done: bool,
}

fn malformed(message: String) -> ModelError {
    ModelError::MalformedResponse {
        provider: PROVIDER.into(),
        message,
    }
}

fn block_index(index: u64) -> usize {
    usize::try_from(index).unwrap_or(usize::MAX)
}

impl EventParser {
    pub(super) fn new(model: &str) -> Self {
        EventParser {
            model: model.to_string(),
            ..EventParser::default()
        }
    }

    fn on_block_start(&mut self, index: u64, block: &Value, out: &mut VecDeque<ModelChunk>) {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let call = self.next_call;
                self.next_call += 1;
                self.calls.insert(index, call);
                let args = match block.get("input") {
                    Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                    _ => String::new(),
                };
                let text = |k: &str| block.get(k).and_then(Value::as_str).map(str::to_string);
                out.push_back(ModelChunk::ToolCall {
                    index: call,
                    id: text("id"),
                    name: text("name"),
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
            Some("thinking" | "redacted_thinking") => {
                if let Some(part) = reasoning_of_block(block) {
                    out.push_back(ModelChunk::Reasoning {
                        index: block_index(index),
                        part,
                    });
                }
            }
            Some(_) => {
                // A server tool call or result (or a block type added later): kept whole.
                self.server.insert(
                    index,
                    ServerBlock {
                        block: block.clone(),
                        input: String::new(),
                    },
                );
            }
            None => {}
        }
    }

    fn on_block_delta(
        &mut self,
        index: u64,
        delta: &Value,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        let field = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") if !field("text").is_empty() => {
                out.push_back(ModelChunk::Text {
                    text: field("text").to_string(),
                });
            }
            Some(kind @ ("thinking_delta" | "signature_delta")) => {
                let mut part = Reasoning::new(PROVIDER, ReasoningFormat::AnthropicThinking, "");
                if kind == "thinking_delta" {
                    part.text = field("thinking").to_string();
                } else {
                    part.signature = Some(field("signature").to_string());
                }
                out.push_back(ModelChunk::Reasoning {
                    index: block_index(index),
                    part,
                });
            }
            Some("input_json_delta") => {
                let part = field("partial_json");
                if let Some(&call) = self.calls.get(&index) {
                    out.push_back(ModelChunk::ToolCall {
                        index: call,
                        id: None,
                        name: None,
                        args: part.to_string(),
                    });
                } else if let Some(server) = self.server.get_mut(&index) {
                    server.input.push_str(part);
                } else {
                    return Err(malformed(format!(
                        "input_json_delta for content block {index}, which did not start as a \
                         tool_use or server_tool_use block"
                    )));
                }
            }
            _ => {} // citations_delta, and delta types added later
        }
        Ok(())
    }

    fn on_block_stop(
        &mut self,
        index: u64,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        let Some(ServerBlock { mut block, input }) = self.server.remove(&index) else {
            return Ok(());
        };
        if !input.trim().is_empty()
            && let Value::Object(obj) = &mut block
        {
            let parsed: Value = serde_json::from_str(&input).map_err(|e| {
                malformed(format!(
                    "the input of server block {index} is not JSON ({e}): {}",
                    clip(&input, 300)
                ))
            })?;
            if !crate::json::nests_within(&parsed, crate::model::MAX_ARGS_DEPTH) {
                return Err(malformed(format!(
                    "the input of server block {index} nests more than {} levels deep",
                    crate::model::MAX_ARGS_DEPTH
                )));
            }
            obj.insert("input".into(), parsed);
        }
        out.push_back(ModelChunk::Part {
            part: ContentPart::ProviderBlock {
                provider: PROVIDER.into(),
                block,
            },
        });
        Ok(())
    }

    fn on_usage(&mut self, u: &Value, out: &mut VecDeque<ModelChunk>) {
        let usage = usage(u);
        if let Some(server) = u.get("server_tool_use").filter(|s| s.is_object()) {
            self.meta.set("server_tool_use", server.clone());
        }
        self.meta.add_usage(&usage);
        out.push_back(ModelChunk::Usage { usage });
    }
}

impl SseParser for EventParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        // An event with no data (a keep-alive some proxies send) says nothing.
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let v = event_json(PROVIDER, &event)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                let message = v.get("message").unwrap_or(&Value::Null);
                self.meta.keep_str("id", message);
                self.meta.keep_str("model", message);
                if let Some(u) = message.get("usage").filter(|u| u.is_object()) {
                    self.on_usage(u, out);
                }
            }
            "content_block_start" => {
                self.on_block_start(index, v.get("content_block").unwrap_or(&Value::Null), out);
            }
            "content_block_delta" => {
                self.on_block_delta(index, v.get("delta").unwrap_or(&Value::Null), out)?;
            }
            "content_block_stop" => self.on_block_stop(index, out)?,
            "message_delta" => {
                let delta = v.get("delta").unwrap_or(&Value::Null);
                if let Some(r) = delta
                    .get("stop_reason")
                    .and_then(Value::as_str)
                    .and_then(stop_reason)
                {
                    self.stopped = true;
                    self.meta.keep_str("stop_reason", delta);
                    self.meta.keep_str("stop_sequence", delta);
                    out.push_back(ModelChunk::Finish { reason: r });
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    self.on_usage(u, out);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let parsed = ProviderError::parse(&v.to_string());
                return Err(classify(PROVIDER.into(), None, &parsed, None));
            }
            _ => {} // ping, and event types added later
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self, out: &mut VecDeque<ModelChunk>) -> Result<(), ModelError> {
        if !self.done && !self.stopped {
            return Err(malformed(
                "the stream ended before `message_stop` and without a stop reason; the answer \
                 is incomplete — try again"
                    .to_string(),
            ));
        }
        self.meta.close(&self.model, out);
        Ok(())
    }
}
