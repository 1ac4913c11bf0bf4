//! Error results for tool calls that never got one, so providers accept the history.

use std::collections::HashSet;

use crate::message::{Message, Role};
use crate::state::Messages;

/// Error results for tool calls that never got one (a cancelled or abandoned run), placed
/// right after the message that made them, so providers accept the history.
///
/// An answer's calls are answered by the tool results between it and the next answer, as
/// providers read them: a provider that numbers its calls per answer (`call_0`, `call_1`, …)
/// reuses ids, so a result anywhere in the history does not answer a later call of its id.
pub(super) fn patch_dangling_calls(messages: &Messages) -> Option<Vec<Message>> {
    // Fast path (every model call, O(1)): no call lacks a result after it.
    if !messages.has_open_tool_calls() {
        return None;
    }
    let owed = owed_results(messages);
    if owed.is_empty() {
        return None;
    }
    let mut patched = Vec::with_capacity(messages.len() + owed.len());
    let mut owed = owed.into_iter().peekable();
    for (i, m) in messages.iter().enumerate() {
        while let Some((_, results)) = owed.next_if(|(at, _)| *at == i) {
            patched.extend(results);
        }
        patched.push(m.clone());
    }
    patched.extend(owed.flat_map(|(_, results)| results));
    Some(patched)
}

/// For each answer with unanswered calls: where their error results go (before the first
/// message after the answer's own results that is not a tool result), and the results. One
/// pass over the history.
fn owed_results(messages: &[Message]) -> Vec<(usize, Vec<Message>)> {
    let mut owed = Vec::new();
    let mut at = 0;
    while at < messages.len() {
        let answer = &messages[at];
        at += 1;
        if answer.role != Role::Assistant || answer.tool_calls.is_empty() {
            continue;
        }
        let end = messages[at..]
            .iter()
            .position(|m| m.role == Role::Assistant)
            .map_or(messages.len(), |n| at + n);
        let answered: HashSet<&str> = messages[at..end]
            .iter()
            .filter(|m| m.role == Role::Tool)
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        let results: Vec<Message> = answer
            .tool_calls
            .iter()
            .filter(|c| !answered.contains(c.id.as_str()))
            .map(|c| {
                Message::tool_error(
                    &c.id,
                    format!(
                        "Tool call {} with id {} did not complete - no result was recorded. It \
                         may have been cancelled or interrupted.",
                        c.name, c.id
                    ),
                )
                .with_name(&c.name)
            })
            .collect();
        if !results.is_empty() {
            let after_results = messages[at..end]
                .iter()
                .position(|m| m.role != Role::Tool)
                .map_or(end, |n| at + n);
            owed.push((after_results, results));
        }
        at = end;
    }
    owed
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

    /// Providers that number calls per answer reuse ids: a result of an earlier answer does
    /// not answer a later call with its id.
    #[test]
    fn a_reused_call_id_is_answered_per_answer() {
        let call = |id: &str, name: &str| {
            Message::assistant_with_tool_calls("", vec![ToolCall::with_id(id, name, json!({}))])
        };
        let messages = Messages::from(vec![
            Message::user("find"),
            call("call_0", "search"),
            Message::tool("call_0", "found"),
            Message::assistant("found it"),
            Message::user("now mail it"),
            call("call_0", "send_email"),
            Message::user("actually, don't"),
        ]);
        let patched = patch_dangling_calls(&messages).expect("the second call is dangling");
        assert_eq!(patched.len(), 8);
        assert_eq!(patched[6].role, Role::Tool);
        assert_eq!(patched[6].tool_call_id.as_deref(), Some("call_0"));
        assert!(patched[6].text().contains("send_email"));
        assert_eq!(patched[7].text(), "actually, don't");
        assert!(patch_dangling_calls(&Messages::from(patched)).is_none());

        // The other way round: an unanswered first call, its id answered after a later answer.
        let messages = Messages::from(vec![
            call("call_0", "search"),
            Message::user("stop"),
            call("call_0", "search"),
            Message::tool("call_0", "found"),
        ]);
        let patched = patch_dangling_calls(&messages).expect("the first call is dangling");
        let roles: Vec<Role> = patched.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant,
                Role::Tool
            ]
        );
    }

    /// A long history with many answered calls and one dangling one: one pass.
    #[test]
    fn many_answers_are_read_once() {
        let mut all = Vec::new();
        for i in 0..20_000 {
            let id = format!("call_{}", i % 3);
            all.push(Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(&id, "t", json!({}))],
            ));
            if i != 10_000 {
                all.push(Message::tool(&id, "ok"));
            }
        }
        let patched = patch_dangling_calls(&Messages::from(all)).unwrap();
        assert_eq!(patched.len(), 40_000);
        assert!(patched[20_001].is_error());
    }
}
