//! Streaming: Chat Completions SSE chunks to model chunks.
//!
//! What real servers send, beyond OpenAI's own shape, and how it is read:
//! - reasoning deltas (`reasoning_content`, `reasoning`, `reasoning_details`, Mistral
//!   `thinking` chunks) become reasoning chunks, each form its own block;
//! - tool-call pieces with an `index`, or without one (a piece with a new id starts a call, a
//!   piece without an id continues the last one), and with `id: ""`; a new id with a name at
//!   an index another call holds starts a call (Ollama sends index 0 for every parallel
//!   call), a new id without one continues it (servers that send a fresh id per piece);
//! - a blank `finish_reason` on every chunk (not an end), and a usage-only last chunk with no
//!   choices (or usage on the finish chunk itself);
//! - an error object mid-stream, typed by its own code or type (a 400 is not a retryable 500),
//!   the usage it carries delivered before the error;
//! - the response id, model and fingerprint, kept for the closing metadata chunk with the
//!   cost; usage where servers put it (`usage`, or Groq's `x_groq.usage`).

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Value, json};

use super::wire::{
    GEMINI_BLOCK, content_text, finish_reason, reasoning_of, reported_cost, thought_signature,
    usage,
};
use crate::http::SseEvent;
use crate::message::{Reasoning, ReasoningFormat};
use crate::model::common::{ProviderError, SseParser, StreamMeta, classify, event_json};
use crate::model::{FinishReason, ModelChunk, ModelError};

/// Chat Completions chunks → model chunks.
pub(super) struct ChunkParser {
    provider: String,
    /// The configured model, for the price.
    model: String,
    done: bool,
    finished: bool,
    meta: StreamMeta,
    /// Tool-call ids → their index, for servers that send pieces without an `index`.
    call_ids: HashMap<String, usize>,
    /// A server's call index → the call it names now.
    by_given: HashMap<usize, usize>,
    /// The first id of each call.
    ids_of: HashMap<usize, String>,
    /// Every call so far.
    used: HashSet<usize>,
    /// The call the last piece belonged to.
    last_call: Option<usize>,
    /// One past the highest call index seen.
    next_call: usize,
    refusal: String,
}

impl ChunkParser {
    pub(super) fn new(provider: &str, model: &str) -> Self {
        ChunkParser {
            provider: provider.to_string(),
            model: model.to_string(),
            done: false,
            finished: false,
            meta: StreamMeta::default(),
            call_ids: HashMap::new(),
            by_given: HashMap::new(),
            ids_of: HashMap::new(),
            used: HashSet::new(),
            last_call: None,
            next_call: 0,
            refusal: String::new(),
        }
    }

    /// The index of a tool-call piece. A piece with its own `index` belongs to the call the
    /// server names by it, unless it names a new call there: a new id *and* a name at an index
    /// that holds a call with another id (Ollama sends every parallel call whole at index 0).
    /// A new id alone at a held index continues the call (some servers send a fresh id with
    /// every piece). A piece without an index goes by its id (a new id starts a call), or
    /// continues the last call when it has none.
    fn call_index(&mut self, call: &Value, id: Option<&str>, named: bool) -> usize {
        let given = call
            .get("index")
            .and_then(Value::as_u64)
            .map(|i| usize::try_from(i).unwrap_or(usize::MAX));
        let index = match given {
            Some(given) => match self.by_given.get(&given) {
                Some(&index) => {
                    let held = self.ids_of.get(&index);
                    let new_call = named && id.is_some_and(|id| held.is_some_and(|h| h != id));
                    if new_call { self.next_call } else { index }
                }
                None if self.used.contains(&given) => self.next_call,
                None => given,
            },
            None => match id {
                Some(id) => self.call_ids.get(id).copied().unwrap_or(self.next_call),
                None => self.last_call.unwrap_or(self.next_call),
            },
        };
        if let Some(given) = given {
            self.by_given.insert(given, index);
        }
        if let Some(id) = id {
            self.ids_of.entry(index).or_insert_with(|| id.to_string());
            self.call_ids.entry(id.to_string()).or_insert(index);
        }
        self.used.insert(index);
        self.last_call = Some(index);
        self.next_call = self.next_call.max(index.saturating_add(1));
        index
    }

    fn on_choice(&mut self, choice: &Value, out: &mut VecDeque<ModelChunk>) {
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        for (index, part) in reasoning_of(&self.provider, delta) {
            out.push_back(ModelChunk::Reasoning { index, part });
        }
        let (text, refusal) = content_text(delta.get("content"));
        let refusal = refusal.or_else(|| {
            delta
                .get("refusal")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        if let Some(r) = refusal.filter(|r| !r.is_empty()) {
            self.refusal.push_str(&r);
            out.push_back(ModelChunk::Text { text: r });
        }
        if !text.is_empty() {
            out.push_back(ModelChunk::Text { text });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
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
                let id = text(call.get("id"));
                let name = text(function.get("name"));
                let index = self.call_index(call, id.as_deref(), name.is_some());
                if let Some(sig) = thought_signature(call) {
                    let mut part =
                        Reasoning::new(&self.provider, ReasoningFormat::GeminiThoughtSignature, "")
                            .with_signature(sig);
                    part.raw = id.as_ref().map(|id| json!({"tool_call_id": id}));
                    out.push_back(ModelChunk::Reasoning {
                        index: GEMINI_BLOCK.saturating_add(index),
                        part,
                    });
                }
                out.push_back(ModelChunk::ToolCall {
                    index,
                    id,
                    name,
                    args,
                });
            }
        }
        if let Some(reason) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .and_then(finish_reason)
        {
            self.finished = true;
            self.meta.set(
                "finish_reason",
                serde_json::to_value(&reason).unwrap_or(Value::Null),
            );
            out.push_back(ModelChunk::Finish { reason });
        }
    }

    fn on_usage(&mut self, v: &Value, out: &mut VecDeque<ModelChunk>) {
        // Groq has sent a stream's usage inside its `x_groq` object.
        let usage_of = v
            .get("usage")
            .filter(|u| u.is_object())
            .or_else(|| v.pointer("/x_groq/usage").filter(|u| u.is_object()));
        if let Some(u) = usage_of {
            let usage = usage(u);
            if let Some(cost) = reported_cost(u) {
                self.meta.set("cost_usd", Value::from(cost));
            }
            self.meta.add_usage(&usage);
            out.push_back(ModelChunk::Usage { usage });
        }
    }
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
            // What the failed call still cost is kept; the error is typed by what it says.
            self.on_usage(&v, out);
            let parsed = ProviderError::parse(&json!({ "error": err }).to_string());
            return Err(classify(self.provider.clone(), None, &parsed, None));
        }
        for key in ["id", "model", "system_fingerprint"] {
            self.meta.keep_str(key, &v);
        }
        if let Some(choices) = v.get("choices").and_then(Value::as_array) {
            for choice in choices {
                if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                    continue; // kit asks for one choice
                }
                self.on_choice(choice, out);
            }
        }
        self.on_usage(&v, out);
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn at_end(&mut self, out: &mut VecDeque<ModelChunk>) -> Result<(), ModelError> {
        if !self.done && !self.finished {
            return Err(ModelError::MalformedResponse {
                provider: self.provider.clone(),
                message: "the stream ended before `[DONE]` and without a finish reason; the \
                          answer is incomplete — try again"
                    .to_string(),
            });
        }
        if !self.refusal.is_empty() {
            self.meta
                .set("refusal", Value::from(std::mem::take(&mut self.refusal)));
        }
        if !self.meta.metadata.contains_key("finish_reason") {
            // `[DONE]` without a finish reason: an answer with calls called tools.
            let reason = if self.next_call > 0 {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            };
            self.meta.set(
                "finish_reason",
                serde_json::to_value(&reason).unwrap_or(Value::Null),
            );
        }
        self.meta.close(&self.model, out);
        Ok(())
    }
}
