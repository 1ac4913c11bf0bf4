//! The Responses API (`POST {base_url}/responses`): request bodies and whole answers.
//!
//! kit keeps the conversation, so requests are stateless: `store: false`, the whole
//! conversation as input items, and reasoning items sent back with their
//! `encrypted_content` (asked for with `include` on reasoning models), as OpenAI documents for
//! stateless use. An assistant message becomes its items in order: reasoning, the output
//! message, then a `function_call` per tool call; a tool result is a
//! `function_call_output`.

mod stream;
pub(super) use stream::EventParser;

use serde_json::{Map, Value, json};

use super::OpenAiModel;
use super::wire::image_url;
use crate::message::{
    Content, ContentPart, Message, Reasoning, ReasoningFormat, Role, ToolCall, Usage,
};
use crate::model::assemble::CallIds;
use crate::model::common::{
    ProviderError, annotate_cost, classify, clip, f32_json, merge_extra, u64_at,
};
use crate::model::{FinishReason, ModelError, ModelRequest, ModelResponse, ToolChoice, parse_args};

/// Responses `usage` → [`Usage`] (`input_tokens` includes the cached ones).
pub(super) fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "input_tokens"),
        output_tokens: u64_at(u, "output_tokens"),
        cache_read_tokens: u
            .get("input_tokens_details")
            .map_or(0, |d| u64_at(d, "cached_tokens")),
        reasoning_tokens: u
            .get("output_tokens_details")
            .map_or(0, |d| u64_at(d, "reasoning_tokens")),
        ..Usage::default()
    }
}

/// The finish reason of a response object: `incomplete` says why, calls mean tool calls.
pub(super) fn finish_of(response: &Value, has_calls: bool) -> FinishReason {
    if response.get("status").and_then(Value::as_str) == Some("incomplete") {
        return match response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
        {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("incomplete".into()),
        };
    }
    if has_calls {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    }
}

/// A `reasoning` output item as a reasoning part: its summaries joined, its encrypted
/// content kept, its id in `raw`.
pub(super) fn reasoning_item(provider: &str, item: &Value) -> Reasoning {
    let summary: Vec<&str> = item
        .get("summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("text").and_then(Value::as_str))
        .collect();
    let mut r = Reasoning::new(
        provider,
        ReasoningFormat::OpenAiResponses,
        summary.join("\n\n"),
    );
    r.encrypted = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_string);
    r.raw = item.get("id").map(|id| json!({ "id": id }));
    r
}

/// The text and refusal of a `message` output item.
fn message_text(item: &Value, text: &mut String, refusal: &mut String) {
    for part in item
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match part.get("type").and_then(Value::as_str) {
            Some("output_text") => {
                text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""))
            }
            Some("refusal") => {
                refusal.push_str(part.get("refusal").and_then(Value::as_str).unwrap_or(""));
            }
            _ => {}
        }
    }
}

/// The error of a failed response, typed by its code.
pub(super) fn response_error(provider: &str, error: &Value) -> ModelError {
    let parsed = ProviderError::parse(&json!({ "error": error }).to_string());
    classify(provider.to_string(), None, &parsed, None)
}

impl OpenAiModel {
    /// The input items of a conversation.
    fn input_items(&self, conversation: &[Message]) -> Vec<Value> {
        let mut items = Vec::with_capacity(conversation.len());
        for m in conversation {
            match m.role {
                Role::System => {
                    items.push(json!({"role": self.system_role.as_str(), "content": m.text()}))
                }
                Role::User => {
                    items.push(json!({"role": "user", "content": input_content(&m.content)}))
                }
                Role::Assistant => self.assistant_items(m, &mut items),
                Role::Tool => items.push(json!({
                    "type": "function_call_output",
                    "call_id": m.tool_call_id.clone().unwrap_or_default(),
                    "output": m.text(),
                })),
                Role::Remove => {}
            }
        }
        items
    }

    fn assistant_items(&self, m: &Message, items: &mut Vec<Value>) {
        let message = |text: &str| {
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]})
        };
        match &m.content {
            Content::Text(t) if t.is_empty() => {}
            Content::Text(t) => items.push(message(t)),
            Content::Parts(parts) => {
                for part in parts {
                    match part {
                        ContentPart::Text { text } if !text.is_empty() => items.push(message(text)),
                        ContentPart::Reasoning(r)
                            if self.send_reasoning
                                && r.is_from(&self.provider, ReasoningFormat::OpenAiResponses) =>
                        {
                            let summary: Vec<Value> = if r.text.is_empty() {
                                Vec::new()
                            } else {
                                vec![json!({"type": "summary_text", "text": r.text})]
                            };
                            let mut item = json!({"type": "reasoning", "summary": summary});
                            if let (Some(e), Value::Object(obj)) = (&r.encrypted, &mut item) {
                                obj.insert("encrypted_content".into(), Value::from(e.clone()));
                            }
                            items.push(item);
                        }
                        _ => {}
                    }
                }
            }
        }
        for call in &m.tool_calls {
            let arguments = match &call.args {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            };
            items.push(json!({"type": "function_call", "call_id": call.id,
                              "name": call.name, "arguments": arguments}));
        }
    }

    /// The Responses request body.
    pub(super) fn responses_body(&self, request: &ModelRequest, stream: bool) -> Value {
        let opts = request.options.clone().or(&self.defaults);
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model.clone()));
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            body.insert("instructions".into(), Value::from(system));
        }
        body.insert(
            "input".into(),
            Value::Array(self.input_items(&request.messages)),
        );
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let mut tool = json!({"type": "function", "name": t.name,
                    "description": t.description, "parameters": t.parameters});
                if let (Some(strict), Value::Object(obj)) = (t.strict, &mut tool) {
                    obj.insert("strict".into(), Value::Bool(strict));
                }
                tool
            })
            .collect();
        tools.extend(self.builtin_tools.iter().cloned());
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if !request.tools.is_empty() {
            let choice = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
            };
            body.insert("tool_choice".into(), choice);
            if let Some(parallel) = opts.parallel_tool_calls {
                body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
            }
        }
        if let Some(format) = &request.response_format {
            body.insert(
                "text".into(),
                json!({"format": {"type": "json_schema", "name": format.name,
                    "schema": format.schema, "strict": format.strict}}),
            );
        }
        if let Some(t) = opts.temperature {
            body.insert("temperature".into(), f32_json(t));
        }
        if let Some(n) = opts.max_tokens {
            body.insert("max_output_tokens".into(), json!(n));
        }
        let reasons = super::is_reasoning_model(&self.model) || opts.reasoning_effort.is_some();
        if reasons {
            let mut reasoning = json!({"summary": "auto"});
            if let (Some(effort), Value::Object(obj)) = (&opts.reasoning_effort, &mut reasoning) {
                obj.insert("effort".into(), Value::from(effort.clone()));
            }
            body.insert("reasoning".into(), reasoning);
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
        body.insert("store".into(), Value::Bool(false));
        body.insert("stream".into(), Value::Bool(stream));
        merge_extra(&mut body, &opts.extra);
        Value::Object(body)
    }

    /// Reads a whole `response` object.
    pub(super) fn parse_responses(&self, v: &Value) -> Result<ModelResponse, ModelError> {
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(response_error(&self.provider, err));
        }
        let output = v.get("output").and_then(Value::as_array).ok_or_else(|| {
            ModelError::MalformedResponse {
                provider: self.provider.clone(),
                message: format!(
                    "the response has no `output` array: {}",
                    clip(&v.to_string(), 500)
                ),
            }
        })?;
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut refusal = String::new();
        let mut calls = Vec::new();
        let mut ids = CallIds::new(v.get("id").and_then(Value::as_str).unwrap_or_default());
        for (i, item) in output.iter().enumerate() {
            match item.get("type").and_then(Value::as_str) {
                Some("reasoning") => {
                    flush_text(&mut text, &mut parts);
                    parts.push(ContentPart::Reasoning(reasoning_item(&self.provider, item)));
                }
                Some("message") => message_text(item, &mut text, &mut refusal),
                Some("function_call") => {
                    let field = |k: &str| {
                        item.get(k)
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                    };
                    let Some(name) = field("name") else {
                        return Err(ModelError::MalformedResponse {
                            provider: self.provider.clone(),
                            message: format!("output item {i} is a function_call without a name"),
                        });
                    };
                    let id = field("call_id").map_or_else(|| ids.make(i), str::to_string);
                    calls.push(ToolCall::with_id(
                        id,
                        name,
                        parse_args(field("arguments").unwrap_or("")),
                    ));
                }
                _ => {} // built-in tool calls (web search, ...) ran on the server
            }
        }
        let mut metadata = Map::new();
        if !refusal.is_empty() {
            if text.is_empty() && parts.is_empty() {
                text.clone_from(&refusal);
            }
            metadata.insert("refusal".into(), Value::from(refusal));
        }
        let content = if parts.is_empty() {
            Content::Text(text)
        } else {
            flush_text(&mut text, &mut parts);
            Content::Parts(parts)
        };
        let finish_reason = finish_of(v, !calls.is_empty());
        let mut message = Message::assistant(content);
        message.tool_calls = calls;
        message.usage = v.get("usage").filter(|u| u.is_object()).map(usage);
        message.metadata = metadata;
        for key in ["id", "model"] {
            if let Some(s) = v.get(key).and_then(Value::as_str) {
                message.metadata.insert(key.into(), Value::from(s));
            }
        }
        message.metadata.insert(
            "finish_reason".into(),
            serde_json::to_value(&finish_reason).unwrap_or(Value::Null),
        );
        annotate_cost(&mut message.metadata, &self.model, message.usage.as_ref());
        Ok(ModelResponse {
            message,
            finish_reason,
        })
    }
}

fn flush_text(text: &mut String, parts: &mut Vec<ContentPart>) {
    if !text.is_empty() {
        parts.push(ContentPart::text(std::mem::take(text)));
    }
}

/// User content as Responses input parts.
fn input_content(content: &Content) -> Value {
    match content {
        Content::Text(t) => Value::from(t.clone()),
        Content::Parts(parts) => Value::Array(
            parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(json!({"type": "input_text", "text": text})),
                    ContentPart::Image { source } => Some(json!({
                        "type": "input_image",
                        "image_url": image_url(source),
                        "detail": "auto",
                    })),
                    _ => None,
                })
                .collect(),
        ),
    }
}
