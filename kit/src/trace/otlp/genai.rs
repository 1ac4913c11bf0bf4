//! GenAI messages: a model run's inputs and outputs as `gen_ai.input/output.messages`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::{Content, ContentPart, ImageSource, Message, Role};

/// The GenAI `gen_ai.input.messages` of a model run's inputs (`{"messages": [...]}`).
pub(super) fn genai_input(inputs: &Value) -> Option<Value> {
    let messages = Vec::<Message>::deserialize(inputs.get("messages")?).ok()?;
    Some(Value::Array(
        messages
            .iter()
            .filter(|m| m.role != Role::Remove)
            .map(|m| json!({"role": m.role.as_str(), "parts": genai_parts(m)}))
            .collect(),
    ))
}

/// The GenAI `gen_ai.output.messages` of a model run's outputs (`{"message": {...}}`).
pub(super) fn genai_output(outputs: &Value, finish_reason: Option<&str>) -> Option<Value> {
    let message = Message::deserialize(outputs.get("message")?).ok()?;
    let reason = finish_reason.unwrap_or(if message.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_call"
    });
    Some(json!([{
        "role": message.role.as_str(),
        "parts": genai_parts(&message),
        "finish_reason": reason,
    }]))
}

pub(super) fn genai_parts(m: &Message) -> Vec<Value> {
    let mut parts = Vec::new();
    if m.role == Role::Tool {
        parts.push(json!({
            "type": "tool_call_response",
            "id": m.tool_call_id,
            "response": m.content.text(),
        }));
        return parts;
    }
    match &m.content {
        Content::Text(t) if !t.is_empty() => parts.push(json!({"type": "text", "content": t})),
        Content::Text(_) => {}
        Content::Parts(list) => {
            for p in list {
                parts.push(match p {
                    ContentPart::Text { text } => json!({"type": "text", "content": text}),
                    // The GenAI conventions' reasoning part; signatures and encrypted
                    // reasoning are the provider's, not the reader's.
                    ContentPart::Reasoning(r) => json!({"type": "reasoning", "content": r.text}),
                    ContentPart::Image {
                        source: ImageSource::Url { url },
                    } => json!({"type": "uri", "modality": "image", "uri": url}),
                    ContentPart::Image {
                        source: ImageSource::Base64 { media_type, data },
                    } => json!({"type": "blob", "modality": "image",
                                "mime_type": media_type, "content": data}),
                    _ => continue,
                });
            }
        }
    }
    for call in &m.tool_calls {
        parts.push(json!({
            "type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args,
        }));
    }
    parts
}
