//! A whole (non-streamed) Messages API answer as kit's assistant message.

use serde_json::{Map, Value};

use super::AnthropicModel;
use super::wire::{PROVIDER, reasoning_of_block, stop_reason, usage};
use crate::message::{Content, ContentPart, Message, ToolCall};
use crate::model::assemble::kept_args;
use crate::model::common::{ProviderError, annotate_cost, classify, clip};
use crate::model::{FinishReason, ModelError, ModelResponse};

impl AnthropicModel {
    /// Reads a `message` object: its blocks in order (text, thinking and redacted thinking
    /// with their signatures, server tool blocks verbatim, tool calls), usage with the cache
    /// counts, the stop reason, and the id, model and cost.
    pub(crate) fn parse_response(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        let malformed = |what: &str| ModelError::MalformedResponse {
            provider: PROVIDER.to_string(),
            message: format!("{what}: {}", clip(&v.to_string(), 500)),
        };
        if v.get("type").and_then(Value::as_str) == Some("error") {
            let parsed = ProviderError::parse(&v.to_string());
            return Err(classify(PROVIDER.into(), None, &parsed, None));
        }
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("the response has no `content` array"))?;
        let mut parts: Vec<ContentPart> = Vec::new();
        let mut text = String::new();
        let mut plain = true;
        let mut calls = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""));
                }
                Some("tool_use") => {
                    let id = block.get("id").and_then(Value::as_str);
                    let name = block.get("name").and_then(Value::as_str);
                    let (Some(id), Some(name)) = (id, name) else {
                        return Err(malformed(&format!(
                            "tool_use block {i} lacks `id` or `name`"
                        )));
                    };
                    let input = block
                        .get("input")
                        .cloned()
                        .map_or_else(|| Value::Object(Map::new()), kept_args);
                    calls.push(ToolCall::with_id(id, name, input));
                }
                Some(_) => {
                    plain = false;
                    if !text.is_empty() {
                        parts.push(ContentPart::text(std::mem::take(&mut text)));
                    }
                    parts.push(match reasoning_of_block(block) {
                        Some(r) => ContentPart::Reasoning(r),
                        None => ContentPart::ProviderBlock {
                            provider: PROVIDER.into(),
                            block: block.clone(),
                        },
                    });
                }
                None => {}
            }
        }
        let content = if plain {
            Content::Text(text)
        } else {
            if !text.is_empty() {
                parts.push(ContentPart::text(text));
            }
            Content::Parts(parts)
        };
        let finish_reason = match v
            .get("stop_reason")
            .and_then(Value::as_str)
            .and_then(stop_reason)
        {
            Some(r) => r,
            None if calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let mut message = Message::assistant(content);
        message.tool_calls = calls;
        let raw_usage = v.get("usage").filter(|u| u.is_object());
        message.usage = raw_usage.map(usage);
        for key in ["id", "model", "stop_reason", "stop_sequence"] {
            if let Some(s) = v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()) {
                message.metadata.insert(key.into(), Value::from(s));
            }
        }
        if let Some(server) = raw_usage
            .and_then(|u| u.get("server_tool_use"))
            .filter(|s| s.is_object())
        {
            message
                .metadata
                .insert("server_tool_use".into(), server.clone());
        }
        annotate_cost(&mut message.metadata, &self.model, message.usage.as_ref());
        Ok(ModelResponse {
            message,
            finish_reason,
        })
    }
}
