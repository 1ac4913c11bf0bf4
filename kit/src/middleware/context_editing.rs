//! Context editing: clearing old tool results from what the model sees once the conversation
//! grows past a token budget (LangChain's `ContextEditingMiddleware` with `ClearToolUsesEdit`,
//! the strategy of Anthropic's context management).

use serde_json::{Map, Value, json};

use super::support::report;
use crate::agent::{AgentError, Hook, Middleware, ModelExecution, ModelNext, Runtime};
use crate::message::{Message, Role};
use crate::model::{ModelRequest, estimate_message_chars};

/// The metadata key marking a cleared tool result (`{"cleared": true, "strategy":
/// "clear_tool_uses"}`), as LangChain marks it.
pub const CLEARED_KEY: &str = "context_editing";

/// Clears the oldest tool results when the request is over a token budget.
///
/// Only the request sent to the model is edited: the state keeps every result, so a later
/// turn (or a person reading the thread) still has them. When the request's estimated size is
/// over [`trigger`](Self::trigger) tokens, tool results are cleared oldest first, except the
/// [`keep`](Self::keep) most recent ones and those of [`exclude_tools`](Self::exclude_tools):
/// each keeps its place, its call id and its tool name, and its content becomes the
/// [`placeholder`](Self::placeholder) (`[cleared]`), so every tool call still has its
/// result and the conversation stays valid for the provider. With
/// [`clear_at_least`](Self::clear_at_least), clearing stops once that many tokens were freed;
/// with [`clear_tool_inputs`](Self::clear_tool_inputs), the arguments of the cleared calls
/// go too.
///
/// Defaults are LangChain's: trigger 100,000 tokens, keep 3, clear everything else, keep
/// the inputs. Tokens are estimated at four characters each.
///
/// ```
/// use kit::middleware::context_editing::ContextEditingMiddleware;
///
/// let editing = ContextEditingMiddleware::new()
///     .trigger(50_000)
///     .keep(5)
///     .exclude_tools(["read_file"]);
/// # drop(editing);
/// ```
#[derive(Debug, Clone)]
pub struct ContextEditingMiddleware {
    trigger: u64,
    clear_at_least: u64,
    keep: usize,
    clear_tool_inputs: bool,
    exclude_tools: Vec<String>,
    placeholder: String,
}

impl Default for ContextEditingMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextEditingMiddleware {
    /// LangChain's `ClearToolUsesEdit()` defaults.
    pub fn new() -> Self {
        ContextEditingMiddleware {
            trigger: 100_000,
            clear_at_least: 0,
            keep: 3,
            clear_tool_inputs: false,
            exclude_tools: Vec::new(),
            placeholder: "[cleared]".into(),
        }
    }

    /// Edits only requests of more than this many tokens (default 100,000).
    #[must_use]
    pub fn trigger(mut self, tokens: u64) -> Self {
        self.trigger = tokens;
        self
    }

    /// Stops clearing once this many tokens were freed (default 0: clear every candidate).
    #[must_use]
    pub fn clear_at_least(mut self, tokens: u64) -> Self {
        self.clear_at_least = tokens;
        self
    }

    /// Keeps this many most recent tool results whole (default 3).
    #[must_use]
    pub fn keep(mut self, results: usize) -> Self {
        self.keep = results;
        self
    }

    /// Also clears the arguments of the cleared calls (default off).
    #[must_use]
    pub fn clear_tool_inputs(mut self, on: bool) -> Self {
        self.clear_tool_inputs = on;
        self
    }

    /// Never clears the results of these tools.
    #[must_use]
    pub fn exclude_tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// What a cleared result says instead (default `[cleared]`).
    #[must_use]
    pub fn placeholder(mut self, text: impl Into<String>) -> Self {
        self.placeholder = text.into();
        self
    }

    /// Clears what the rules say in `messages`; returns how many results were cleared and the
    /// tokens freed.
    fn edit(&self, messages: &mut [Message]) -> (usize, u64) {
        let candidates: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let take = candidates.len().saturating_sub(self.keep);
        let mut cleared = 0;
        let mut freed = 0u64;
        for &i in &candidates[..take] {
            if messages[i].metadata.contains_key(CLEARED_KEY) {
                continue;
            }
            let Some(call_id) = messages[i].tool_call_id.clone() else {
                continue;
            };
            // The assistant message that made the call, before the result.
            let Some(ai) = messages[..i]
                .iter()
                .rposition(|m| m.role == Role::Assistant)
            else {
                continue;
            };
            let Some(call) = messages[ai].tool_calls.iter().find(|c| c.id == call_id) else {
                continue;
            };
            let tool = messages[i]
                .name
                .clone()
                .unwrap_or_else(|| call.name.clone());
            if self.exclude_tools.contains(&tool) {
                continue;
            }
            // What clearing frees, counted on what changes only: the result, and the one call's
            // arguments (re-estimating the calling message would cost all its calls' arguments
            // again for each of its results).
            let result = &mut messages[i];
            let mut before = estimate_message_chars(result);
            result.content = self.placeholder.clone().into();
            result.metadata.insert(
                CLEARED_KEY.into(),
                json!({"cleared": true, "strategy": "clear_tool_uses"}),
            );
            let mut after = estimate_message_chars(result);
            if self.clear_tool_inputs {
                let request = &mut messages[ai];
                if let Some(call) = request.tool_calls.iter_mut().find(|c| c.id == call_id) {
                    let args = std::mem::replace(&mut call.args, Value::Object(Map::new()));
                    before += args.to_string().len();
                    after += "{}".len();
                }
                let ids = request
                    .metadata
                    .get_mut(CLEARED_KEY)
                    .and_then(|v| v.get_mut("cleared_tool_inputs"))
                    .and_then(Value::as_array_mut);
                match ids {
                    Some(ids) => ids.push(Value::from(call_id.as_str())),
                    None => {
                        request.metadata.insert(
                            CLEARED_KEY.into(),
                            json!({"cleared_tool_inputs": [call_id]}),
                        );
                    }
                }
            }
            freed += (before.saturating_sub(after) as u64).div_ceil(4);
            cleared += 1;
            if self.clear_at_least > 0 && freed >= self.clear_at_least {
                break;
            }
        }
        (cleared, freed)
    }
}

#[crate::async_trait]
impl Middleware for ContextEditingMiddleware {
    fn name(&self) -> &str {
        "ContextEditingMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let tokens = request.estimate_tokens();
        if tokens <= self.trigger {
            return next.call(request).await;
        }
        // The state's conversation is shared with the request: edit a copy.
        let (cleared, freed) = self.edit(request.messages.make_mut());
        if cleared > 0 {
            report(
                rt,
                self.name(),
                "cleared",
                json!({"cleared": cleared, "tokens_before": tokens, "tokens_freed": freed}),
            )
            .await;
        }
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn turn(id: &str, tool: &str, result: &str) -> Vec<Message> {
        vec![
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(id, tool, json!({"q": "x"}))],
            ),
            Message::tool(id, result).with_name(tool),
        ]
    }

    fn conversation() -> Vec<Message> {
        let mut m = vec![Message::user("go")];
        m.extend(turn("a", "search", &"A".repeat(400)));
        m.extend(turn("b", "read_file", &"B".repeat(400)));
        m.extend(turn("c", "search", &"C".repeat(400)));
        m.extend(turn("d", "search", &"D".repeat(400)));
        m
    }

    #[test]
    fn clears_old_results_keeps_recent_and_excluded_ones_and_the_pairing() {
        let mw = ContextEditingMiddleware::new()
            .keep(1)
            .exclude_tools(["read_file"]);
        let mut messages = conversation();
        let (cleared, freed) = mw.edit(&mut messages);
        assert_eq!(cleared, 2, "a and c; b is excluded, d is kept");
        assert!(freed > 150);
        let texts: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(Message::text)
            .collect();
        assert_eq!(texts[0], "[cleared]");
        assert_eq!(texts[1], "B".repeat(400));
        assert_eq!(texts[2], "[cleared]");
        assert_eq!(texts[3], "D".repeat(400));
        // Every call still has its result, in place, with its id and name.
        assert_eq!(messages[2].tool_call_id.as_deref(), Some("a"));
        assert_eq!(messages[2].name.as_deref(), Some("search"));
        assert_eq!(
            messages[1].tool_calls[0].args,
            json!({"q": "x"}),
            "inputs kept"
        );
        // Clearing twice changes nothing more.
        let (again, _) = mw.edit(&mut messages);
        assert_eq!(again, 0);
    }

    #[test]
    fn clear_at_least_stops_early_and_inputs_can_go_too() {
        let mw = ContextEditingMiddleware::new()
            .keep(0)
            .clear_at_least(50)
            .clear_tool_inputs(true)
            .placeholder("(old result removed)");
        let mut messages = conversation();
        let (cleared, _) = mw.edit(&mut messages);
        assert_eq!(cleared, 1, "one result frees more than 50 tokens");
        assert_eq!(messages[2].text(), "(old result removed)");
        assert_eq!(messages[1].tool_calls[0].args, json!({}));
        assert_eq!(messages[4].text(), "B".repeat(400), "the rest untouched");
    }

    /// One answer with many calls, then their results: each clear counts only what it changes
    /// (the result and its call's arguments), and the calling message lists every cleared
    /// input, in order.
    #[test]
    fn many_calls_in_one_answer_are_cleared_one_by_one() {
        for n in [10, 2000] {
            let calls: Vec<ToolCall> = (0..n)
                .map(|i| {
                    ToolCall::with_id(format!("c{i}"), "search", json!({"q": "x".repeat(200)}))
                })
                .collect();
            let mut messages = vec![
                Message::user("go"),
                Message::assistant_with_tool_calls("", calls),
            ];
            messages.extend((0..n).map(|i| Message::tool(format!("c{i}"), "R".repeat(300))));
            let mw = ContextEditingMiddleware::new()
                .keep(0)
                .clear_tool_inputs(true);
            let placeholder = Message::tool("c0", "[cleared]");
            let each = estimate_message_chars(&messages[2]) - estimate_message_chars(&placeholder)
                + json!({"q": "x".repeat(200)}).to_string().len()
                - 2;
            let (cleared, freed) = mw.edit(&mut messages);
            assert_eq!(cleared, n);
            assert_eq!(freed, (each as u64).div_ceil(4) * n as u64);
            let ids = &messages[1].metadata[CLEARED_KEY]["cleared_tool_inputs"];
            let expected: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
            assert_eq!(ids, &json!(expected));
            assert!(messages[1].tool_calls.iter().all(|c| c.args == json!({})));
        }
    }
}
