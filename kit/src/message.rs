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

/// Message content: plain text, or a list of parts (text and images).
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
    /// The concatenated text parts.
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

    /// True when there is no text and no other part.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(t) => t.is_empty(),
            Content::Parts(parts) => parts.iter().all(|p| match p {
                ContentPart::Text { text } => text.is_empty(),
                ContentPart::Image { .. } => false,
            }),
        }
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
                    ContentPart::Image { .. } => 0,
                })
                .sum(),
        }
    }
}

/// One part of a multi-part message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
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
    /// Prompt tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_tokens: u64,
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
            cache_creation_tokens: 0,
        });
        assert_eq!(usage.total_tokens(), 9);
    }
}
