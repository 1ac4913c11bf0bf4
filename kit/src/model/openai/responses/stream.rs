//! Streaming: Responses API events to model chunks.
//!
//! `response.created` brings the id and model; `response.output_text.delta`,
//! `response.refusal.delta`, `response.reasoning_summary_text.delta` and
//! `response.function_call_arguments.delta` stream the answer (a call starts with its
//! `response.output_item.added`); `response.output_item.done` closes an item (a reasoning
//! item's `encrypted_content` arrives there); `response.completed` or `response.incomplete`
//! ends it with the usage; `response.failed` and `error` events end it with a typed error.
//! Every other event (`*.added`, `*.done` of parts, built-in tool progress) is skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

use super::{finish_of, reasoning_item, response_error, usage};
use crate::http::SseEvent;
use crate::message::{Reasoning, ReasoningFormat};
use crate::model::common::{SseParser, StreamMeta, event_json};
use crate::model::{ModelChunk, ModelError};

/// Responses API events → model chunks.
pub(in crate::model::openai) struct EventParser {
    provider: String,
    model: String,
    meta: StreamMeta,
    /// Output indices of the function calls, and those whose arguments streamed.
    calls: BTreeSet<usize>,
    streamed_args: BTreeSet<usize>,
    /// Per reasoning item, the summary part last streamed (parts are joined by a blank line).
    summary_part: BTreeMap<usize, u64>,
    refusal: String,
    done: bool,
}

impl EventParser {
    pub(in crate::model::openai) fn new(provider: &str, model: &str) -> Self {
        EventParser {
            provider: provider.to_string(),
            model: model.to_string(),
            meta: StreamMeta::default(),
            calls: BTreeSet::new(),
            streamed_args: BTreeSet::new(),
            summary_part: BTreeMap::new(),
            refusal: String::new(),
            done: false,
        }
    }
}

fn index_of(v: &Value) -> usize {
    v.get("output_index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .unwrap_or(0)
}

fn text_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

impl SseParser for EventParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelChunk>,
    ) -> Result<(), ModelError> {
        if event.data.trim().is_empty() || event.data.trim() == "[DONE]" {
            return Ok(());
        }
        let v = event_json(&self.provider, &event)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "response.created" | "response.in_progress" => {
                if let Some(r) = v.get("response") {
                    self.meta.keep_str("id", r);
                    self.meta.keep_str("model", r);
                }
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let index = index_of(&v);
                    self.calls.insert(index);
                    let field = |k: &str| {
                        item.get(k)
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                    };
                    let args = field("arguments").unwrap_or_default();
                    if !args.is_empty() {
                        self.streamed_args.insert(index);
                    }
                    out.push_back(ModelChunk::ToolCall {
                        index,
                        id: field("call_id"),
                        name: field("name"),
                        args,
                    });
                }
            }
            "response.output_text.delta" => {
                let text = text_of(&v, "delta");
                if !text.is_empty() {
                    out.push_back(ModelChunk::Text {
                        text: text.to_string(),
                    });
                }
            }
            "response.refusal.delta" => {
                let text = text_of(&v, "delta");
                self.refusal.push_str(text);
                if !text.is_empty() {
                    out.push_back(ModelChunk::Text {
                        text: text.to_string(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" => {
                let index = index_of(&v);
                let part = v.get("summary_index").and_then(Value::as_u64).unwrap_or(0);
                let mut text = String::new();
                if let Some(last) = self.summary_part.insert(index, part)
                    && last != part
                {
                    text.push_str("\n\n");
                }
                text.push_str(text_of(&v, "delta"));
                out.push_back(ModelChunk::Reasoning {
                    index,
                    part: Reasoning::new(&self.provider, ReasoningFormat::OpenAiResponses, text),
                });
            }
            "response.function_call_arguments.delta" => {
                let index = index_of(&v);
                self.streamed_args.insert(index);
                out.push_back(ModelChunk::ToolCall {
                    index,
                    id: None,
                    name: None,
                    args: text_of(&v, "delta").to_string(),
                });
            }
            "response.output_item.done" => {
                let index = index_of(&v);
                let item = v.get("item").unwrap_or(&Value::Null);
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        // The summary streamed already; the item adds what was not streamed.
                        let mut part = reasoning_item(&self.provider, item);
                        if self.summary_part.contains_key(&index) {
                            part.text.clear();
                        }
                        out.push_back(ModelChunk::Reasoning { index, part });
                    }
                    Some("function_call") if !self.streamed_args.contains(&index) => {
                        self.calls.insert(index);
                        out.push_back(ModelChunk::ToolCall {
                            index,
                            id: Some(text_of(item, "call_id").to_string())
                                .filter(|s| !s.is_empty()),
                            name: Some(text_of(item, "name").to_string()).filter(|s| !s.is_empty()),
                            args: text_of(item, "arguments").to_string(),
                        });
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = v.get("response").unwrap_or(&Value::Null);
                self.meta.keep_str("id", response);
                self.meta.keep_str("model", response);
                if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
                    let usage = usage(u);
                    self.meta.add_usage(&usage);
                    out.push_back(ModelChunk::Usage { usage });
                }
                let reason = finish_of(response, !self.calls.is_empty());
                self.meta.set(
                    "finish_reason",
                    serde_json::to_value(&reason).unwrap_or(Value::Null),
                );
                out.push_back(ModelChunk::Finish { reason });
                self.done = true;
            }
            "response.failed" => {
                let error = v.pointer("/response/error").cloned().unwrap_or(Value::Null);
                return Err(response_error(&self.provider, &error));
            }
            "error" => {
                // `{"type":"error","code","message","param"}`, or the error nested.
                let error = match v.get("error") {
                    Some(e @ Value::Object(_)) => e.clone(),
                    _ => v.clone(),
                };
                return Err(response_error(&self.provider, &error));
            }
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self, out: &mut VecDeque<ModelChunk>) -> Result<(), ModelError> {
        if !self.done {
            return Err(ModelError::MalformedResponse {
                provider: self.provider.clone(),
                message: "the stream ended before `response.completed`; the answer is \
                          incomplete — try again"
                    .to_string(),
            });
        }
        if !self.refusal.is_empty() {
            self.meta
                .set("refusal", Value::from(std::mem::take(&mut self.refusal)));
        }
        self.meta.close(&self.model, out);
        Ok(())
    }
}
