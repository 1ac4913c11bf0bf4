//! The Messages API wire format: turns and content blocks out (thinking and server blocks
//! sent back unchanged), usage and stop reasons in.

use serde_json::{Map, Value, json};

use crate::message::{
    Content, ContentPart, ImageSource, Message, Reasoning, ReasoningFormat, Role, Usage,
};
use crate::model::FinishReason;
use crate::model::common::u64_at;

/// The provider name of Anthropic's blocks.
pub(super) const PROVIDER: &str = "anthropic";

/// Every `stop_reason` the API documents, mapped (see [`FinishReason`]); `None` for a blank.
pub(super) fn stop_reason(r: &str) -> Option<FinishReason> {
    Some(match r.trim() {
        "" => return None,
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()), // `pause_turn`, and later additions
    })
}

/// Messages API `usage` → [`Usage`] (input tokens include the cached ones; the one-hour
/// share of cache writes from `cache_creation.ephemeral_1h_input_tokens`).
pub(super) fn usage(u: &Value) -> Usage {
    let cache_read = u64_at(u, "cache_read_input_tokens");
    let cache_creation = u64_at(u, "cache_creation_input_tokens");
    Usage {
        input_tokens: u64_at(u, "input_tokens")
            .saturating_add(cache_read)
            .saturating_add(cache_creation),
        output_tokens: u64_at(u, "output_tokens"),
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_creation,
        cache_creation_1h_tokens: u
            .get("cache_creation")
            .map_or(0, |c| u64_at(c, "ephemeral_1h_input_tokens")),
        ..Usage::default()
    }
}

pub(super) fn image_block(source: &ImageSource) -> Value {
    match source {
        ImageSource::Url { url } => match parse_data_url(url) {
            Some((media_type, data)) => json!({"type": "image", "source": {
                "type": "base64", "media_type": media_type, "data": data,
            }}),
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
        ImageSource::Base64 { media_type, data } => json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data,
        }}),
    }
}

/// `data:image/png;base64,AAAA` → (`image/png`, `AAAA`).
pub(super) fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// A `thinking` or `redacted_thinking` block, as it came.
pub(super) fn thinking_block(r: &Reasoning) -> Value {
    match (&r.encrypted, r.text.is_empty()) {
        (Some(data), true) => json!({"type": "redacted_thinking", "data": data}),
        _ => json!({
            "type": "thinking",
            "thinking": r.text,
            "signature": r.signature.clone().unwrap_or_default(),
        }),
    }
}

/// A thinking or redacted-thinking block as a reasoning part.
pub(super) fn reasoning_of_block(block: &Value) -> Option<Reasoning> {
    let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
    let mut r = Reasoning::new(PROVIDER, ReasoningFormat::AnthropicThinking, "");
    match block.get("type").and_then(Value::as_str)? {
        "thinking" => {
            r.text = field("thinking").to_string();
            r.signature = Some(field("signature").to_string()).filter(|s| !s.is_empty());
        }
        "redacted_thinking" => r.encrypted = Some(field("data").to_string()),
        _ => return None,
    }
    Some(r)
}

/// Content as blocks for a user or tool-result turn; empty text blocks are left out (the
/// API rejects them), and reasoning or another provider's blocks are not user content.
pub(super) fn blocks(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(t) if t.is_empty() => Vec::new(),
        Content::Text(t) => vec![json!({"type": "text", "text": t})],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } if text.is_empty() => None,
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::Image { source } => Some(image_block(source)),
                _ => None,
            })
            .collect(),
    }
}

/// An assistant message's blocks in their order: text, the thinking blocks and server-tool
/// blocks Anthropic produced (byte for byte), then its tool calls.
fn assistant_blocks(m: &Message) -> Vec<Value> {
    let mut content = Vec::new();
    match &m.content {
        Content::Text(t) if t.is_empty() => {}
        Content::Text(t) => content.push(json!({"type": "text", "text": t})),
        Content::Parts(parts) => {
            for p in parts {
                match p {
                    ContentPart::Text { text } if !text.is_empty() => {
                        content.push(json!({"type": "text", "text": text}));
                    }
                    ContentPart::Reasoning(r)
                        if r.is_from(PROVIDER, ReasoningFormat::AnthropicThinking) =>
                    {
                        content.push(thinking_block(r));
                    }
                    ContentPart::ProviderBlock { provider, block } if provider == PROVIDER => {
                        content.push(block.clone());
                    }
                    _ => {}
                }
            }
        }
    }
    for call in &m.tool_calls {
        let input = match &call.args {
            Value::Object(_) => call.args.clone(),
            // Arguments the model produced as invalid JSON: the API needs an object; the
            // error tool result quotes the raw text to the model.
            _ => Value::Object(Map::new()),
        };
        content.push(json!({
            "type": "tool_use", "id": call.id, "name": call.name, "input": input,
        }));
    }
    content
}

pub(super) fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// A turn being built: a user turn's `tool_result` blocks and its other blocks apart, joined
/// (results first) once the conversation is read, so merging many messages into one turn
/// stays linear. (An assistant turn keeps every block in `rest`, in order.)
struct Turn {
    role: &'static str,
    results: Vec<Value>,
    rest: Vec<Value>,
}

impl Turn {
    fn into_value(self) -> Value {
        let mut content = self.results;
        content.extend(self.rest);
        json!({"role": self.role, "content": content})
    }
}

/// Adds blocks to the conversation, merging into the last turn when it has the same role;
/// `tool_result` blocks go before the other blocks of a user turn.
fn push_turn(turns: &mut Vec<Turn>, role: &'static str, new: Vec<Value>) {
    if new.is_empty() {
        return;
    }
    let turn = match turns.last_mut() {
        Some(last) if last.role == role => last,
        _ => {
            turns.push(Turn {
                role,
                results: Vec::new(),
                rest: Vec::new(),
            });
            let Some(turn) = turns.last_mut() else {
                return;
            };
            turn
        }
    };
    for block in new {
        if role == "user" && is_tool_result(&block) {
            turn.results.push(block);
        } else {
            turn.rest.push(block);
        }
    }
}

/// The conversation as Messages API turns, plus the text of system messages found in it.
pub(super) fn turns(conversation: &[Message]) -> (Vec<String>, Vec<Value>) {
    let mut system = Vec::new();
    let mut out: Vec<Turn> = Vec::new();
    for m in conversation {
        match m.role {
            Role::System => {
                let t = m.text();
                if !t.is_empty() {
                    system.push(t);
                }
            }
            Role::User => push_turn(&mut out, "user", blocks(&m.content)),
            Role::Assistant => push_turn(&mut out, "assistant", assistant_blocks(m)),
            Role::Tool => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert(
                    "tool_use_id".into(),
                    Value::from(m.tool_call_id.clone().unwrap_or_default()),
                );
                match &m.content {
                    Content::Text(t) if t.is_empty() => {}
                    Content::Text(t) => {
                        block.insert("content".into(), Value::from(t.clone()));
                    }
                    parts @ Content::Parts(_) => {
                        block.insert("content".into(), Value::Array(blocks(parts)));
                    }
                }
                block.insert("is_error".into(), Value::Bool(m.is_error()));
                push_turn(&mut out, "user", vec![Value::Object(block)]);
            }
            Role::Remove => {}
        }
    }
    (system, out.into_iter().map(Turn::into_value).collect())
}

/// Marks the last block of the last turn as a cache breakpoint (not a thinking block, which
/// cannot carry one).
pub(super) fn mark_last_message(turns: &mut [Value], cache_control: &Value) {
    let Some(Value::Array(content)) = turns.last_mut().and_then(|t| t.get_mut("content")) else {
        return;
    };
    let at = content.iter().rposition(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    });
    if let Some(Value::Object(block)) = at.and_then(|i| content.get_mut(i)) {
        block.insert("cache_control".into(), cache_control.clone());
    }
}
