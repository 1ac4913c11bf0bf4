//! A whole (non-streamed) Chat Completions answer as kit's assistant message.

use serde_json::{Map, Value, json};

use super::OpenAiModel;
use super::wire::{
    content_text, finish_reason, reasoning_of, reported_cost, thought_signature, usage,
};
use crate::message::{Content, ContentPart, Message, Reasoning, ReasoningFormat, ToolCall};
use crate::model::assemble::{CallIds, kept_args};
use crate::model::common::{ProviderError, annotate_cost, classify, clip};
use crate::model::{FinishReason, ModelError, ModelResponse, parse_args};

impl OpenAiModel {
    /// Reads a `chat.completion` object: text (a string or an array of parts), reasoning in
    /// every form a compatible server sends it, tool calls (ids synthesized when missing or
    /// empty), the refusal, usage, the finish reason and the response's id, model and cost.
    pub(crate) fn parse_response(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |what: &str| ModelError::MalformedResponse {
            provider: self.provider.clone(),
            message: format!("{what}: {}", clip(&v.to_string(), 500)),
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let parsed = ProviderError::parse(&json!({ "error": err }).to_string());
            return Err(classify(self.provider.clone(), None, &parsed, None));
        }
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("the response has no `choices`"))?;
        let msg = choice
            .get("message")
            .ok_or_else(|| malformed("the first choice has no `message`"))?;
        let (mut text, part_refusal) = content_text(msg.get("content"));
        let mut metadata = Map::new();
        let refusal = msg
            .get("refusal")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(part_refusal)
            .filter(|r| !r.is_empty());
        if let Some(refusal) = refusal {
            if text.is_empty() {
                text.clone_from(&refusal);
            }
            metadata.insert("refusal".into(), Value::from(refusal));
        }
        let mut reasoning: Vec<Reasoning> = reasoning_of(&self.provider, msg)
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        let mut ids = CallIds::new(v.get("id").and_then(Value::as_str).unwrap_or_default());
        let mut calls = Vec::new();
        if let Some(list) = msg.get("tool_calls").and_then(Value::as_array) {
            for (i, call) in list.iter().enumerate() {
                let function = call.get("function").unwrap_or(&Value::Null);
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(&format!("tool call {i} has no function name")))?;
                let args = match function.get("arguments") {
                    Some(Value::String(raw)) => parse_args(raw),
                    Some(obj @ Value::Object(_)) => kept_args(obj.clone()),
                    _ => Value::Object(Map::new()),
                };
                // A missing or empty id would make parallel calls collide.
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map_or_else(|| ids.make(i), str::to_string);
                if let Some(sig) = thought_signature(call) {
                    reasoning.push(
                        Reasoning::new(&self.provider, ReasoningFormat::GeminiThoughtSignature, "")
                            .with_signature(sig)
                            .with_raw(json!({"tool_call_id": id})),
                    );
                }
                calls.push(ToolCall::with_id(id, name, args));
            }
        }
        let finish_reason = match choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .and_then(finish_reason)
        {
            Some(r) => r,
            None if calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let content = if reasoning.is_empty() {
            Content::Text(text)
        } else {
            let mut parts: Vec<ContentPart> =
                reasoning.into_iter().map(ContentPart::Reasoning).collect();
            if !text.is_empty() {
                parts.push(ContentPart::text(text));
            }
            Content::Parts(parts)
        };
        let mut message = Message::assistant(content);
        message.tool_calls = calls;
        let raw_usage = v.get("usage").filter(|u| u.is_object());
        message.usage = raw_usage.map(usage);
        message.metadata = metadata;
        for key in ["id", "model", "system_fingerprint"] {
            if let Some(s) = v.get(key).and_then(Value::as_str) {
                message.metadata.insert(key.into(), Value::from(s));
            }
        }
        message.metadata.insert(
            "finish_reason".into(),
            serde_json::to_value(&finish_reason).unwrap_or(Value::Null),
        );
        if let Some(cost) = raw_usage.and_then(reported_cost) {
            message
                .metadata
                .insert("cost_usd".into(), Value::from(cost));
        }
        annotate_cost(&mut message.metadata, &self.model, message.usage.as_ref());
        Ok(ModelResponse {
            message,
            finish_reason,
        })
    }
}
