//! The state every agent runs on.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, Role};
use crate::state::{DynState, Messages};

/// The agent's state: one channel per capability.
///
/// * `messages` — the conversation (`add_messages`: upsert by id, remove, append);
/// * `todos` — the plan written by `write_todos` (each call replaces it);
/// * `files` — the virtual filesystem (merge; a `None` in an update deletes the file);
/// * `async_tasks` — async subagent task records (merge by task id);
/// * `structured_response` — the parsed final answer, when a response format is set;
/// * `custom` — channels that custom middleware adds, with their reducers.
///
/// `todos`, `files` and `async_tasks` live outside `messages`, so compacting the conversation
/// never loses them.
#[derive(crate::State, Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// The conversation.
    #[state(reducer = crate::reducers::add_messages, update = Vec<Message>)]
    pub messages: Messages,
    /// The current plan.
    pub todos: Vec<Todo>,
    /// The virtual filesystem, by absolute path.
    #[state(
        reducer = crate::reducers::merge_or_remove,
        update = BTreeMap<String, Option<FileData>>
    )]
    pub files: BTreeMap<String, FileData>,
    /// Async subagent tasks, by task id.
    #[state(reducer = crate::reducers::merge)]
    pub async_tasks: BTreeMap<String, AsyncTask>,
    /// The structured final answer.
    pub structured_response: Option<Value>,
    /// Channels added by custom middleware.
    #[state(dynamic)]
    pub custom: DynState,
}

impl AgentState {
    /// The last message, if any.
    pub fn last_message(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// The text of the last assistant message with text (the agent's answer).
    pub fn final_text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && !m.content.is_empty())
            .map(Message::text)
            .unwrap_or_default()
    }

    /// The index of the last assistant message.
    pub fn last_ai_index(&self) -> Option<usize> {
        self.messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
    }

    /// Tool calls of the last assistant message that no tool message answers yet.
    pub fn pending_tool_calls(&self) -> Vec<&crate::message::ToolCall> {
        pending_calls(&self.messages, &[]).0
    }
}

/// Tool calls of the last assistant message of `base` followed by `extra` that no tool message
/// answers, and whether that message made any call at all. Messages of `extra` replace those
/// of `base` with the same id (the upsert of `add_messages`), so this is the answer for the
/// state as it will be once `extra` is appended. Only the messages after the last assistant
/// message are read, from the end.
pub(crate) fn pending_calls<'a>(
    base: &'a [Message],
    extra: &'a [Message],
) -> (Vec<&'a crate::message::ToolCall>, bool) {
    // Looked up in sets once there are many (an answer with thousands of calls, each
    // answered): searched per message and per call, they made this quadratic.
    let extra_ids: Option<HashSet<&str>> =
        (extra.len() > SEARCHED).then(|| extra.iter().map(|e| e.id.as_str()).collect());
    let replaced = |m: &Message| match &extra_ids {
        Some(ids) => ids.contains(m.id.as_str()),
        None => extra.iter().any(|e| e.id == m.id),
    };
    let mut answered: Vec<&str> = Vec::new();
    let mut last_ai: Option<&Message> = None;
    for m in extra
        .iter()
        .rev()
        .filter(|m| m.role != Role::Remove)
        .chain(base.iter().rev().filter(|m| !replaced(m)))
    {
        match m.role {
            Role::Assistant => {
                last_ai = Some(m);
                break;
            }
            Role::Tool => {
                if let Some(id) = m.tool_call_id.as_deref() {
                    answered.push(id);
                }
            }
            _ => {}
        }
    }
    let answered_set: Option<HashSet<&str>> =
        (answered.len() > SEARCHED).then(|| answered.iter().copied().collect());
    let is_answered = |id: &str| match &answered_set {
        Some(set) => set.contains(id),
        None => answered.contains(&id),
    };
    match last_ai {
        Some(ai) => (
            ai.tool_calls
                .iter()
                .filter(|c| !is_answered(&c.id))
                .collect(),
            !ai.tool_calls.is_empty(),
        ),
        None => (Vec::new(), false),
    }
}

/// Up to this many ids are searched in a list (cheaper than building a set).
const SEARCHED: usize = 16;

/// Status of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One item of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// Its status.
    pub status: TodoStatus,
}

/// A file in the virtual filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileData {
    /// The content (UTF-8 text, or base64 when `encoding` says so).
    pub content: String,
    /// `utf-8` or `base64`.
    #[serde(default = "utf8")]
    pub encoding: String,
    /// When it was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it was last written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
}

fn utf8() -> String {
    "utf-8".to_string()
}

impl FileData {
    /// A UTF-8 file with this content, stamped now.
    pub fn text(content: impl Into<String>) -> Self {
        let now = crate::ids::now_rfc3339();
        FileData {
            content: content.into(),
            encoding: utf8(),
            created_at: Some(now.clone()),
            modified_at: Some(now),
        }
    }
}

/// An async subagent task record (spec §2.2), kept in the `async_tasks` channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AsyncTask {
    /// The stable task id (check, update, cancel and list use it).
    pub task_id: String,
    /// The async subagent's name.
    pub subagent_name: String,
    /// The remote graph / assistant id.
    pub graph_id: String,
    /// The worker's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The remote thread id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The remote run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The cached status.
    pub status: String,
    /// When the task was started (RFC 3339, seconds).
    pub created_at: String,
    /// When the status was last fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checked_at: Option<String>,
    /// When status or run changed last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_at: Option<String>,
    /// The task description.
    pub description: String,
    /// Follow-up messages sent with `update_async_task` (the newest 64).
    #[serde(default)]
    pub updates: Vec<String>,
    /// The last remote response: whole up to 64 KiB; over that without the thread's values,
    /// and over that again only its status, ids, error, stream link and pending interrupts,
    /// with `"truncated": true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<Value>,
    /// The extracted result, when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The last error talking to the worker, when the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    /// The definition, searching lists.
    fn pending_by_search<'a>(base: &'a [Message], extra: &'a [Message]) -> Vec<&'a str> {
        let replaced = |m: &Message| extra.iter().any(|e| e.id == m.id);
        let mut answered: Vec<&str> = Vec::new();
        for m in extra
            .iter()
            .rev()
            .filter(|m| m.role != Role::Remove)
            .chain(base.iter().rev().filter(|m| !replaced(m)))
        {
            match m.role {
                Role::Assistant => {
                    return m
                        .tool_calls
                        .iter()
                        .filter(|c| !answered.contains(&c.id.as_str()))
                        .map(|c| c.id.as_str())
                        .collect();
                }
                Role::Tool => answered.extend(m.tool_call_id.as_deref()),
                _ => {}
            }
        }
        Vec::new()
    }

    #[test]
    fn pending_calls_are_those_the_lists_say_at_any_size() {
        let mut rng = fastrand::Rng::with_seed(0x9e4d);
        for round in 0..400 {
            let calls = if round % 10 == 0 {
                2_000
            } else {
                rng.usize(0..40)
            };
            let ai = Message::assistant_with_tool_calls(
                "",
                (0..calls)
                    .map(|i| ToolCall::with_id(format!("c{i}"), "t", serde_json::json!({})))
                    .collect(),
            );
            let mut base = vec![Message::user("q"), ai];
            for i in 0..calls {
                if rng.bool() {
                    base.push(Message::tool(format!("c{i}"), "r"));
                }
            }
            // Extra: new answers, and replacements of some base answers.
            let mut extra: Vec<Message> = (0..rng.usize(0..=calls.min(40)))
                .map(|_| Message::tool(format!("c{}", rng.usize(0..calls.max(1))), "r2"))
                .collect();
            for m in base.iter().skip(2).take(rng.usize(0..20)) {
                let mut again = m.clone();
                again.tool_call_id = Some(format!("c{}", rng.usize(0..calls.max(1))));
                extra.push(again);
            }
            let (ours, any) = pending_calls(&base, &extra);
            let ours: Vec<&str> = ours.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(ours, pending_by_search(&base, &extra), "round {round}");
            assert_eq!(any, calls > 0);
        }
    }
}
