//! The Chat Completions wire format: messages out, usage and finish reasons in.

use serde_json::{Map, Value, json};

use crate::message::{Content, ContentPart, ImageSource, Message, Role, Usage};
use crate::model::FinishReason;
use crate::model::common::u64_at;

/// Context windows of OpenAI models kit knows (by name prefix, longest first).
pub(super) fn openai_context_window(model: &str) -> Option<u64> {
    const TABLE: &[(&str, u64)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-5", 400_000),
        ("o4-mini", 200_000),
        ("o3", 200_000),
        ("o1", 200_000),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|(_, n)| *n)
}

pub(super) fn finish_reason(r: &str) -> FinishReason {
    match r {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Chat Completions `usage` → [`Usage`] (`prompt_tokens` includes the cached ones).
pub(super) fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "prompt_tokens"),
        output_tokens: u64_at(u, "completion_tokens"),
        cache_read_tokens: u
            .get("prompt_tokens_details")
            .map(|d| u64_at(d, "cached_tokens"))
            .unwrap_or(0),
        cache_creation_tokens: 0,
    }
}

pub(super) fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Url { url } => url.clone(),
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
    }
}

pub(super) fn user_content(content: &Content) -> Value {
    match content {
        Content::Text(t) => Value::from(t.clone()),
        Content::Parts(parts) => Value::Array(
            parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => json!({"type": "text", "text": text}),
                    ContentPart::Image { source } => {
                        json!({"type": "image_url", "image_url": {"url": image_url(source)}})
                    }
                })
                .collect(),
        ),
    }
}

/// The `messages` array: the system prompt first, then the conversation.
pub(super) fn messages(system: Option<&str>, conversation: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(conversation.len() + 1);
    if let Some(s) = system.filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": s}));
    }
    for m in conversation {
        match m.role {
            Role::System => out.push(json!({"role": "system", "content": m.text()})),
            Role::User => out.push(json!({"role": "user", "content": user_content(&m.content)})),
            Role::Assistant => {
                let text = m.text();
                let mut v = Map::new();
                v.insert("role".into(), json!("assistant"));
                v.insert(
                    "content".into(),
                    if text.is_empty() && !m.tool_calls.is_empty() {
                        Value::Null
                    } else {
                        Value::from(text)
                    },
                );
                if !m.tool_calls.is_empty() {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            let arguments = match &c.args {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            };
                            json!({"id": c.id, "type": "function", "function": {
                                "name": c.name,
                                "arguments": arguments,
                            }})
                        })
                        .collect();
                    v.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(v));
            }
            Role::Tool => out.push(json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
                "content": m.text(),
            })),
            Role::Remove => {}
        }
    }
    out
}
