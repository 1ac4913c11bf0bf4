//! Error results for tool calls that never got one, so providers accept the history.

use std::collections::HashSet;

use crate::message::{Message, Role};
use crate::state::Messages;

/// Error results for tool calls that never got one (a cancelled or abandoned run), placed
/// right after the message that made them, so providers accept the history.
pub(super) fn patch_dangling_calls(messages: &Messages) -> Option<Vec<Message>> {
    // Fast path (every model call, O(1)): no call lacks a result after it.
    if !messages.has_open_tool_calls() {
        return None;
    }
    let answered: HashSet<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let dangling = messages.iter().any(|m| {
        m.role == Role::Assistant
            && m.tool_calls
                .iter()
                .any(|c| !answered.contains(c.id.as_str()))
    });
    if !dangling {
        return None;
    }
    // Patches go after the tool results that do exist for the same assistant message.
    let mut patched = Vec::with_capacity(messages.len() + 2);
    let mut owed: Vec<Message> = Vec::new();
    for m in messages {
        if m.role != Role::Tool {
            patched.append(&mut owed);
        }
        patched.push(m.clone());
        if m.role == Role::Assistant {
            for c in &m.tool_calls {
                if !answered.contains(c.id.as_str()) {
                    owed.push(
                        Message::tool_error(
                            &c.id,
                            format!(
                                "Tool call {} with id {} did not complete - no result was \
                                 recorded. It may have been cancelled or interrupted.",
                                c.name, c.id
                            ),
                        )
                        .with_name(&c.name),
                    );
                }
            }
        }
    }
    patched.append(&mut owed);
    Some(patched)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn dangling_calls_get_error_results_in_place() {
        let ai = Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id("a", "t", json!({})),
                ToolCall::with_id("b", "t", json!({})),
            ],
        );
        let messages = Messages::from(vec![
            Message::user("q"),
            ai,
            Message::tool("a", "ok"),
            Message::user("never mind"),
        ]);
        let patched = patch_dangling_calls(&messages).unwrap();
        let roles: Vec<Role> = patched.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(patched[3].tool_call_id.as_deref(), Some("b"));
        assert!(patched[3].text().contains("did not complete"));
        assert!(patch_dangling_calls(&Messages::from(patched)).is_none());
    }
}
