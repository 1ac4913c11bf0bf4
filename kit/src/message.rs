//! Chat messages: roles, text and multi-part content, tool calls, tool results, usage.
//!
//! ```
//! use kit::{Message, Role};
//!
//! let question = Message::user("What is 2 + 2?");
//! assert_eq!(question.role, Role::User);
//! assert_eq!(question.text(), "What is 2 + 2?");
//!
//! // Messages round-trip through JSON with their ids.
//! let json = serde_json::to_string(&question).unwrap();
//! let back: Message = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, question);
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids;

/// The id that [`Message::remove_all`] carries.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The human (or the calling program).
    User,
    /// The model.
    Assistant,
    /// A tool result, answering one tool call of an assistant message.
    Tool,
    /// Not a message: an instruction to the [`add_messages`](crate::reducers::add_messages)
    /// reducer to delete the message with this id (or all of them).
    Remove,
}

impl Role {
    /// The role's name as providers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Remove => "remove",
        }
    }
}

/// Message content: plain text, or a list of parts (text, images, and the model's reasoning).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Several parts, in order.
    Parts(Vec<ContentPart>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::Text(text.to_string())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::Text(text)
    }
}

impl From<Vec<ContentPart>> for Content {
    fn from(parts: Vec<ContentPart>) -> Self {
        Content::Parts(parts)
    }
}

impl Content {
    /// The concatenated text parts (reasoning is not text: see [`reasoning`](Self::reasoning)).
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    if let ContentPart::Text { text } = part {
                        out.push_str(text);
                    }
                }
                out
            }
        }
    }

    /// True when there is no text and no image. Reasoning and provider blocks alone count as
    /// empty: they are how the model got to an answer, not an answer.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(t) => t.is_empty(),
            Content::Parts(parts) => parts.iter().all(|p| match p {
                ContentPart::Text { text } => text.is_empty(),
                ContentPart::Image { .. } => false,
                ContentPart::Reasoning(_) | ContentPart::ProviderBlock { .. } => true,
            }),
        }
    }

    /// The reasoning parts, in order (empty for plain text).
    pub fn reasoning(&self) -> impl Iterator<Item = &Reasoning> {
        let parts: &[ContentPart] = match self {
            Content::Text(_) => &[],
            Content::Parts(parts) => parts,
        };
        parts.iter().filter_map(|p| match p {
            ContentPart::Reasoning(r) => Some(r),
            _ => None,
        })
    }

    /// Rewrites every text part with `f` (used by redaction).
    pub fn map_text(&mut self, mut f: impl FnMut(&str) -> String) {
        match self {
            Content::Text(t) => *t = f(t),
            Content::Parts(parts) => {
                for part in parts {
                    if let ContentPart::Text { text } = part {
                        *text = f(text);
                    }
                }
            }
        }
    }

    /// Total length in bytes of the text parts (images excluded).
    pub fn text_len(&self) -> usize {
        match self {
            Content::Text(t) => t.len(),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => text.len(),
                    ContentPart::Image { .. }
                    | ContentPart::Reasoning(_)
                    | ContentPart::ProviderBlock { .. } => 0,
                })
                .sum(),
        }
    }
}

/// One part of a multi-part message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where the image comes from.
        source: ImageSource,
    },
    /// The model's reasoning before its answer (an assistant message's thinking blocks,
    /// reasoning text or encrypted reasoning), kept so it can be shown, traced and sent back.
    Reasoning(Reasoning),
    /// A block of the provider's own that the answer carried and the conversation must keep
    /// (Anthropic's server tool calls and their results: `server_tool_use`,
    /// `web_search_tool_result`, ...), kept verbatim and sent back only to that provider.
    ProviderBlock {
        /// The provider that produced it.
        provider: String,
        /// The block as the provider sent it.
        block: Value,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }

    /// An image by URL.
    pub fn image_url(url: impl Into<String>) -> Self {
        ContentPart::Image {
            source: ImageSource::Url { url: url.into() },
        }
    }

    /// An image from base64 data, e.g. `media_type = "image/png"`.
    pub fn image_base64(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        ContentPart::Image {
            source: ImageSource::Base64 {
                media_type: media_type.into(),
                data: data.into(),
            },
        }
    }
}

/// The source of an image part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// An `http(s)` or `data:` URL.
    Url {
        /// The URL.
        url: String,
    },
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// The base64 text.
        data: String,
    },
}

/// The wire form a [`Reasoning`] part came in, which is also the only form it is sent back
/// in: a provider never receives another provider's reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningFormat {
    /// Reasoning with no provider form to send back (shown and traced only).
    #[default]
    Text,
    /// Anthropic's `thinking` block (text and `signature`), or `redacted_thinking` (`data`,
    /// kept in [`Reasoning::encrypted`]).
    AnthropicThinking,
    /// A Chat Completions message's `reasoning_content` (DeepSeek, vLLM, Qwen, Kimi).
    ReasoningContent,
    /// A Chat Completions message's `reasoning` text (Groq, Cerebras, Ollama, OpenRouter).
    ReasoningField,
    /// One entry of OpenRouter's `reasoning_details` (kept whole in [`Reasoning::raw`]).
    ReasoningDetails,
    /// A Mistral `thinking` content chunk.
    MistralThinking,
    /// A Gemini thought signature on a tool call (OpenAI-compatible endpoint:
    /// `extra_content.google.thought_signature`); [`Reasoning::raw`] names the call.
    GeminiThoughtSignature,
    /// An OpenAI Responses API `reasoning` item (summary and `encrypted_content`).
    OpenAiResponses,
}

/// What a model reasoned before it answered, as the provider sent it.
///
/// Providers that think before answering send their reasoning in their own forms; kit keeps
/// each on the assistant message as a [`ContentPart::Reasoning`], in the order it came, so it
/// can be streamed, traced and — where the provider requires it, as Anthropic does for
/// thinking with tool use and DeepSeek for `reasoning_content` with tools — sent back
/// unchanged on the next request. [`provider`](Self::provider) and
/// [`format`](Self::format) decide where it goes back: only to the provider (and wire form)
/// that produced it.
///
/// ```
/// use kit::message::{ContentPart, Reasoning, ReasoningFormat};
/// use kit::Message;
///
/// let thinking = Reasoning::new("anthropic", ReasoningFormat::AnthropicThinking, "2 + 2 is 4.")
///     .with_signature("EqQBCkgIARABGAIiQ...");
/// let answer = Message::assistant(vec![ContentPart::Reasoning(thinking), ContentPart::text("4")]);
/// assert_eq!(answer.text(), "4");
/// assert_eq!(answer.content.reasoning().next().map(|r| r.text.as_str()), Some("2 + 2 is 4."));
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reasoning {
    /// The provider that produced it (the model's [`provider`](crate::model::ChatModel::provider)).
    #[serde(default)]
    pub provider: String,
    /// The wire form it came in.
    #[serde(default)]
    pub format: ReasoningFormat,
    /// The reasoning text, or its summary; empty when the provider hid it.
    #[serde(default)]
    pub text: String,
    /// The provider's signature over the reasoning (Anthropic, Gemini, OpenRouter), sent back
    /// unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Reasoning the provider returned encrypted or redacted (Anthropic's `redacted_thinking`
    /// data, OpenAI's `encrypted_content`, OpenRouter's `reasoning.encrypted`), sent back
    /// unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<String>,
    /// The provider's own record of it, verbatim, when it carries more than the fields above
    /// (an OpenRouter `reasoning_details` entry, the tool call a Gemini signature belongs to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

impl Reasoning {
    /// Reasoning text from `provider` in this wire form.
    pub fn new(
        provider: impl Into<String>,
        format: ReasoningFormat,
        text: impl Into<String>,
    ) -> Self {
        Reasoning {
            provider: provider.into(),
            format,
            text: text.into(),
            ..Reasoning::default()
        }
    }

    /// Sets the signature (builder style).
    #[must_use]
    pub fn with_signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// Sets the encrypted reasoning (builder style).
    #[must_use]
    pub fn with_encrypted(mut self, data: impl Into<String>) -> Self {
        self.encrypted = Some(data.into());
        self
    }

    /// Sets the provider's raw record (builder style).
    #[must_use]
    pub fn with_raw(mut self, raw: Value) -> Self {
        self.raw = Some(raw);
        self
    }

    /// True when it came from `provider` in `format`: the only case it is sent back.
    pub fn is_from(&self, provider: &str, format: ReasoningFormat) -> bool {
        self.format == format && self.provider == provider
    }

    /// Adds a streamed piece: text and signature are appended, the encrypted data appended,
    /// and whatever else the piece sets replaces what was there.
    pub fn merge(&mut self, piece: &Reasoning) {
        if self.provider.is_empty() {
            self.provider.clone_from(&piece.provider);
        }
        if piece.format != ReasoningFormat::Text {
            self.format = piece.format;
        }
        self.text.push_str(&piece.text);
        for (into, more) in [
            (&mut self.signature, &piece.signature),
            (&mut self.encrypted, &piece.encrypted),
        ] {
            if let Some(more) = more {
                into.get_or_insert_with(String::new).push_str(more);
            }
        }
        if piece.raw.is_some() {
            self.raw.clone_from(&piece.raw);
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; the tool result answers it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments: a JSON object, or — when the model produced text that is not JSON — a
    /// JSON string holding that raw text, which the tool node answers with a validation error.
    pub args: Value,
}

impl ToolCall {
    /// A tool call with a fresh id.
    pub fn new(name: impl Into<String>, args: Value) -> Self {
        ToolCall {
            id: format!("call_{}", &ids::random()[..8]),
            name: name.into(),
            args,
        }
    }

    /// A tool call with the given id.
    pub fn with_id(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        }
    }
}

/// Whether a tool result is a success or an error the model should react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The tool ran and returned this content.
    #[default]
    Success,
    /// The tool failed, or the call was invalid or refused; the content says why.
    Error,
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (all lifetimes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_tokens: u64,
    /// Of `cache_creation_tokens`, those written with Anthropic's one-hour lifetime (billed
    /// higher than the five-minute default).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_1h_tokens: u64,
    /// Of `output_tokens`, those spent reasoning (OpenAI's `reasoning_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input plus output tokens (saturating: the counts come from a provider, which may send
    /// any number).
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds another call's usage to this one; each count saturates at `u64::MAX` rather than
    /// overflow.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(other.cache_creation_tokens);
        self.cache_creation_1h_tokens = self
            .cache_creation_1h_tokens
            .saturating_add(other.cache_creation_1h_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// A stable id (generated when the message is created); reducers upsert by it.
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    /// The content.
    #[serde(default)]
    pub content: Content,
    /// Tool calls of an assistant message, in the order the model made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool's name. For others: an optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For a tool message: success or error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    /// For an assistant message: the tokens the call used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Free-form details (provider response id, model, finish reason, who made it).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl Message {
    /// A message with a fresh id and nothing else.
    pub fn new(role: Role, content: impl Into<Content>) -> Self {
        Message {
            id: ids::random(),
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            status: None,
            usage: None,
            metadata: Map::new(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<Content>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<Content>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<Content>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// An assistant message that calls tools.
    pub fn assistant_with_tool_calls(content: impl Into<Content>, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::new(Role::Assistant, content);
        m.tool_calls = calls;
        m
    }

    /// A successful tool result answering `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        let mut m = Self::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.into());
        m.status = Some(ToolStatus::Success);
        m
    }

    /// An error tool result answering `call_id`.
    pub fn tool_error(call_id: impl Into<String>, content: impl Into<Content>) -> Self {
        let mut m = Self::tool(call_id, content);
        m.status = Some(ToolStatus::Error);
        m
    }

    /// An instruction to the `add_messages` reducer: delete the message with this id.
    pub fn remove(id: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Remove, "");
        m.id = id.into();
        m
    }

    /// An instruction to the `add_messages` reducer: delete every message.
    pub fn remove_all() -> Self {
        Self::remove(REMOVE_ALL_MESSAGES)
    }

    /// Sets the name (builder style).
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the id (builder style).
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The text of the message (text parts concatenated).
    pub fn text(&self) -> String {
        self.content.text()
    }

    /// True for an assistant message with at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.role == Role::Assistant && !self.tool_calls.is_empty()
    }

    /// True for an error tool result.
    pub fn is_error(&self) -> bool {
        self.status == Some(ToolStatus::Error)
    }
}

/// The last message of a list with this role.
pub fn last_with_role(messages: &[Message], role: Role) -> Option<&Message> {
    messages.iter().rev().find(|m| m.role == role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_round_trip() {
        let m = Message::user(vec![
            ContentPart::text("look: "),
            ContentPart::image_url("https://example.com/cat.png"),
            ContentPart::image_base64("image/png", "iVBORw0KGgo="),
        ]);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["content"][1]["type"], "image");
        assert_eq!(json["content"][1]["source"]["kind"], "url");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.text(), "look: ");
    }

    #[test]
    fn reasoning_parts_round_trip_and_are_not_text() {
        let thinking = Reasoning::new("anthropic", ReasoningFormat::AnthropicThinking, "Hmm.")
            .with_signature("sig");
        let redacted = Reasoning::new("anthropic", ReasoningFormat::AnthropicThinking, "")
            .with_encrypted("EmwKAhgB");
        let m = Message::assistant(vec![
            ContentPart::Reasoning(thinking.clone()),
            ContentPart::Reasoning(redacted),
            ContentPart::ProviderBlock {
                provider: "anthropic".into(),
                block: serde_json::json!({"type": "server_tool_use", "id": "srvtoolu_1"}),
            },
            ContentPart::text("Done."),
        ]);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["content"][0]["type"], "reasoning");
        assert_eq!(json["content"][0]["signature"], "sig");
        assert_eq!(json["content"][0]["format"], "anthropic_thinking");
        assert_eq!(json["content"][2]["type"], "provider_block");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.text(), "Done.");
        assert_eq!(back.content.text_len(), 5);
        assert_eq!(back.content.reasoning().count(), 2);
        assert!(thinking.is_from("anthropic", ReasoningFormat::AnthropicThinking));
        assert!(!thinking.is_from("openai", ReasoningFormat::AnthropicThinking));
        // Reasoning alone is not an answer.
        let only = Message::assistant(vec![ContentPart::Reasoning(thinking)]);
        assert!(only.content.is_empty());
        // A message written before reasoning existed still reads.
        let old: Message = serde_json::from_str(
            r#"{"id":"m","role":"assistant","content":[{"type":"text","text":"hi"}]}"#,
        )
        .unwrap();
        assert_eq!(old.text(), "hi");
    }

    #[test]
    fn tool_messages_carry_status_and_call_id() {
        let call = ToolCall::with_id("c1", "add", serde_json::json!({"a": 1}));
        let ai = Message::assistant_with_tool_calls("", vec![call]);
        assert!(ai.has_tool_calls());
        let err = Message::tool_error("c1", "bad");
        assert!(err.is_error());
        let json = serde_json::to_string(&err).unwrap();
        assert!(json.contains(r#""status":"error""#), "{json}");
        assert!(json.contains(r#""tool_call_id":"c1""#), "{json}");
        let mut usage = Usage {
            input_tokens: 3,
            output_tokens: 4,
            ..Usage::default()
        };
        usage.add(&Usage {
            input_tokens: 1,
            output_tokens: 1,
            cache_read_tokens: 2,
            ..Usage::default()
        });
        assert_eq!(usage.total_tokens(), 9);
    }
}
