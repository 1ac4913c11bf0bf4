//! The Chat Completions wire format, both ways: messages out (with the reasoning a server
//! needs back), usage and finish reasons in.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::message::{
    Content, ContentPart, ImageSource, Message, Reasoning, ReasoningFormat, Role, Usage,
};
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

/// A finish reason as sent; `None` for a blank one (some compatible servers send `""` on
/// every chunk), which is not an end.
pub(super) fn finish_reason(r: &str) -> Option<FinishReason> {
    Some(match r.trim() {
        "" => return None,
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
        "length" | "max_tokens" | "model_length" => FinishReason::Length,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    })
}

/// Chat Completions `usage` → [`Usage`] (`prompt_tokens` includes the cached ones). Cached
/// tokens come in several fields across servers: OpenAI's (and OpenRouter's, Groq's, xAI's)
/// `prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`, Moonshot's
/// top-level `cached_tokens`; OpenRouter adds `prompt_tokens_details.cache_write_tokens`.
pub(super) fn usage(u: &Value) -> Usage {
    let prompt = u.get("prompt_tokens_details").unwrap_or(&Value::Null);
    let completion = u.get("completion_tokens_details").unwrap_or(&Value::Null);
    Usage {
        input_tokens: u64_at(u, "prompt_tokens"),
        output_tokens: u64_at(u, "completion_tokens"),
        cache_read_tokens: u64_at(prompt, "cached_tokens")
            .max(u64_at(u, "prompt_cache_hit_tokens"))
            .max(u64_at(u, "cached_tokens")),
        cache_creation_tokens: u64_at(prompt, "cache_write_tokens"),
        reasoning_tokens: u64_at(completion, "reasoning_tokens"),
        ..Usage::default()
    }
}

/// What a server reported the call cost, when it does (OpenRouter's `usage.cost`, USD).
pub(super) fn reported_cost(u: &Value) -> Option<f64> {
    u.get("cost")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
}

/// Block indices of the reasoning forms in one answer: each form streams into its own block.
pub(super) const REASONING_CONTENT_BLOCK: usize = 0;
pub(super) const REASONING_FIELD_BLOCK: usize = 1;
pub(super) const MISTRAL_THINKING_BLOCK: usize = 2;
/// OpenRouter's `reasoning_details` entries: this plus the entry's own `index`.
pub(super) const DETAILS_BLOCK: usize = 1 << 16;
/// Gemini's thought signatures: this plus the tool call's index.
pub(super) const GEMINI_BLOCK: usize = 1 << 24;

/// The reasoning an OpenAI-compatible message (or streamed delta) carries, by block index:
/// `reasoning_content`, `reasoning` (unless `reasoning_details` says the same in full),
/// `reasoning_details` entries, and Mistral `thinking` chunks of an array `content`.
pub(super) fn reasoning_of(provider: &str, m: &Value) -> Vec<(usize, Reasoning)> {
    let mut out = Vec::new();
    let text = |key: &str| m.get(key).and_then(Value::as_str).filter(|t| !t.is_empty());
    if let Some(t) = text("reasoning_content") {
        out.push((
            REASONING_CONTENT_BLOCK,
            Reasoning::new(provider, ReasoningFormat::ReasoningContent, t),
        ));
    }
    let details = m.get("reasoning_details").and_then(Value::as_array);
    if let Some(t) = text("reasoning").filter(|_| details.is_none_or(|d| d.is_empty())) {
        out.push((
            REASONING_FIELD_BLOCK,
            Reasoning::new(provider, ReasoningFormat::ReasoningField, t),
        ));
    }
    for (position, entry) in details.into_iter().flatten().enumerate() {
        let index = entry
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(position)
            .min(DETAILS_BLOCK - 1);
        let field = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
        let mut r = Reasoning::new(
            provider,
            ReasoningFormat::ReasoningDetails,
            field("text")
                .or_else(|| field("summary"))
                .unwrap_or_default(),
        );
        r.signature = field("signature").filter(|s| !s.is_empty());
        r.encrypted = field("data").filter(|s| !s.is_empty());
        // The entry's shape (type, format, id) without the pieces merged above.
        let mut raw = entry.as_object().cloned().unwrap_or_default();
        for k in ["text", "summary", "signature", "data"] {
            raw.remove(k);
        }
        r.raw = Some(Value::Object(raw));
        out.push((DETAILS_BLOCK + index, r));
    }
    if let Some(parts) = m.get("content").and_then(Value::as_array) {
        for part in parts {
            if part.get("type").and_then(Value::as_str) == Some("thinking") {
                let t = thinking_text(part.get("thinking").unwrap_or(&Value::Null));
                out.push((
                    MISTRAL_THINKING_BLOCK,
                    Reasoning::new(provider, ReasoningFormat::MistralThinking, t),
                ));
            }
        }
    }
    out
}

/// Mistral's `thinking` value: a string, or chunks of `{"type":"text","text"}`.
fn thinking_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// The text of a message's (or delta's) `content`: a string, or the `text` / `output_text`
/// parts of an array (Mistral's reasoning models, some gateways); `refusal` parts are the
/// refusal, returned second.
pub(super) fn content_text(content: Option<&Value>) -> (String, Option<String>) {
    match content {
        Some(Value::String(s)) => (s.clone(), None),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut refusal: Option<String> = None;
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text" | "output_text") | None => {
                        text.push_str(p.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    Some("refusal") => refusal
                        .get_or_insert_with(String::new)
                        .push_str(p.get("refusal").and_then(Value::as_str).unwrap_or("")),
                    _ => {}
                }
            }
            (text, refusal)
        }
        _ => (String::new(), None),
    }
}

/// The Gemini thought signature on a tool call (`extra_content.google.thought_signature`).
pub(super) fn thought_signature(call: &Value) -> Option<&str> {
    call.pointer("/extra_content/google/thought_signature")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
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
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                    ContentPart::Image { source } => {
                        Some(json!({"type": "image_url", "image_url": {"url": image_url(source)}}))
                    }
                    _ => None,
                })
                .collect(),
        ),
    }
}

/// How the conversation is written for one server.
pub(super) struct Writer<'a> {
    /// The model's provider name: only its own reasoning goes back to it.
    pub provider: &'a str,
    /// `system` or `developer`.
    pub system_role: &'a str,
    /// Whether reasoning goes back at all.
    pub echo_reasoning: bool,
}

impl Writer<'_> {
    /// The `messages` array: the system prompt first, then the conversation.
    pub(super) fn messages(&self, system: Option<&str>, conversation: &[Message]) -> Vec<Value> {
        let mut out = Vec::with_capacity(conversation.len() + 1);
        if let Some(s) = system.filter(|s| !s.is_empty()) {
            out.push(json!({"role": self.system_role, "content": s}));
        }
        for m in conversation {
            match m.role {
                Role::System => out.push(json!({"role": self.system_role, "content": m.text()})),
                Role::User => {
                    out.push(json!({"role": "user", "content": user_content(&m.content)}));
                }
                Role::Assistant => out.push(self.assistant(m)),
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

    /// The reasoning parts of `m` that go back to this server in `format`.
    fn own<'m>(
        &'m self,
        m: &'m Message,
        format: ReasoningFormat,
    ) -> impl Iterator<Item = &'m Reasoning> + 'm {
        m.content
            .reasoning()
            .filter(move |r| self.echo_reasoning && r.is_from(self.provider, format))
    }

    fn assistant(&self, m: &Message) -> Value {
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
        // DeepSeek's thinking mode with tools answers 400 without its `reasoning_content`.
        let reasoning: String = self
            .own(m, ReasoningFormat::ReasoningContent)
            .map(|r| r.text.as_str())
            .collect();
        if !reasoning.is_empty() {
            v.insert("reasoning_content".into(), Value::from(reasoning));
        }
        // OpenRouter: the details array, each entry as it came (signatures, encrypted data).
        let details: Vec<Value> = self
            .own(m, ReasoningFormat::ReasoningDetails)
            .map(details_entry)
            .collect();
        if !details.is_empty() {
            v.insert("reasoning_details".into(), Value::Array(details));
        }
        if !m.tool_calls.is_empty() {
            // Each call's signature by its id, found once per call: the first entry for the
            // call that carries a signature (an entry without one is skipped, not taken as
            // "no signature").
            let mut signatures: HashMap<&str, &String> = HashMap::new();
            for r in self.own(m, ReasoningFormat::GeminiThoughtSignature) {
                let id = r.raw.as_ref().and_then(|raw| raw.get("tool_call_id"));
                if let (Some(Value::String(id)), Some(sig)) = (id, r.signature.as_ref()) {
                    signatures.entry(id.as_str()).or_insert(sig);
                }
            }
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    let arguments = match &c.args {
                        Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    };
                    let mut call = json!({"id": c.id, "type": "function", "function": {
                        "name": c.name,
                        "arguments": arguments,
                    }});
                    if let (Some(sig), Value::Object(obj)) =
                        (signatures.get(c.id.as_str()), &mut call)
                    {
                        obj.insert(
                            "extra_content".into(),
                            json!({"google": {"thought_signature": sig}}),
                        );
                    }
                    call
                })
                .collect();
            v.insert("tool_calls".into(), Value::Array(calls));
        }
        Value::Object(v)
    }
}

/// An OpenRouter `reasoning_details` entry rebuilt from its merged pieces.
fn details_entry(r: &Reasoning) -> Value {
    let mut entry = r
        .raw
        .as_ref()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let kind = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("reasoning.text")
        .to_string();
    match kind.as_str() {
        "reasoning.summary" => {
            entry.insert("summary".into(), Value::from(r.text.clone()));
        }
        "reasoning.encrypted" => {
            entry.insert(
                "data".into(),
                Value::from(r.encrypted.clone().unwrap_or_default()),
            );
        }
        _ => {
            entry.insert("text".into(), Value::from(r.text.clone()));
            if let Some(sig) = &r.signature {
                entry.insert("signature".into(), Value::from(sig.clone()));
            }
        }
    }
    entry.insert("type".into(), Value::from(kind));
    Value::Object(entry)
}
